package packs

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/policy"
)

// fileServer is one of the team's own MCP servers: a command run over
// stdio, or a streamable HTTP URL. ${NAME} in a command's words, an env
// value or the URL is NAME from toolgate's environment, which must be set.
type fileServer struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	KeyMeta string            `yaml:"keyMeta"`
	// Unlisted is what the server's tools that no row names get: by
	// default nothing (neither offered nor run); where the file gives a
	// policy, each accepted one is offered and runs only once a person
	// approves it (the policy's roles, approvers and evidence).
	Unlisted *filePolicy `yaml:"unlisted"`
	// Auth is how toolgate authenticates to an HTTP server.
	Auth *fileAuth `yaml:"auth"`
}

// fileAuth is how toolgate authenticates to an HTTP server: as the
// signed-in person, with a token the provider issues for the server's
// audience for each call (exchange: the audience, RFC 8693; the caller's
// own token never leaves toolgate), or with a service credential from
// toolgate's environment (bearer: "${NAME}"). With exchange, bearer is what
// accept-mcp lists the tools with.
type fileAuth struct {
	Exchange string `yaml:"exchange"`
	Bearer   string `yaml:"bearer"`
}

// fileNarrow is what a row adds to one arg of an MCP tool's input schema:
// it only narrows, since the server's own rules still hold.
type fileNarrow struct {
	Enum       []string `yaml:"enum"`
	PathPrefix string   `yaml:"pathPrefix"`
	Minimum    *float64 `yaml:"minimum"`
	Maximum    *float64 `yaml:"maximum"`
	MaxLength  *int     `yaml:"maxLength"`
	MaxItems   *int     `yaml:"maxItems"`
	Pattern    string   `yaml:"pattern"`
}

// narrows reports whether the row adds any rule to the arg.
func (n fileNarrow) narrows() bool {
	return len(n.Enum) > 0 || n.PathPrefix != "" || n.Minimum != nil || n.Maximum != nil || n.MaxLength != nil || n.MaxItems != nil || n.Pattern != ""
}

// PinsFile is where a pack file's accepted MCP definitions are kept: beside
// it, its name with .pins.json for its extension. starter accept-mcp --write writes
// it; a person reviews what changed in it as in any other file.
func PinsFile(packFile string) string {
	return strings.TrimSuffix(packFile, filepath.Ext(packFile)) + ".pins.json"
}

// Pins are the definitions an operator accepted, by server and tool.
type Pins map[string]map[string]Pinned

// Pinned is one accepted definition and its pin.
type Pinned struct {
	Pin        string                 `json:"pin"`
	Definition mcpupstream.Definition `json:"definition"`
}

// ReadPins reads a pack file's pins, refusing one whose pin is not its
// definition's (edited by hand): what was accepted is what it says.
func ReadPins(packFile string) (Pins, error) {
	pins, err := readPins(packFile)
	if err != nil {
		return nil, err
	}
	for server, tools := range pins {
		for tool, p := range tools {
			if p.Definition.Name != tool || p.Definition.Pin() != p.Pin {
				return nil, fmt.Errorf("%s: %s.%s: the pin is not its definition's; accept the tool again (starter accept-mcp)", PinsFile(packFile), server, tool)
			}
		}
	}
	return pins, nil
}

// readPins reads a pack file's pins as written, none when there is no
// file.
func readPins(packFile string) (Pins, error) {
	path := PinsFile(packFile)
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Pins{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	var pins Pins
	if err := json.Unmarshal(raw, &pins); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pins, nil
}

// serverName is a server's name: it prefixes its tools' wire names, so
// it holds no double underscore.
var serverName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// envRef is ${NAME} in a server's command, env or URL.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (r *reader) servers(dir string, fs []fileServer) ([]mcpupstream.Server, error) {
	var out []mcpupstream.Server
	seen := map[string]bool{}
	for i, f := range fs {
		at := fmt.Sprintf("servers[%d]", i)
		if !serverName.MatchString(f.Name) || len(f.Name) > 24 {
			return nil, r.errorf(at+".name", "%q must be 1 to 24 lower-case letters, digits or single _, starting with a letter (it prefixes the wire names of its tools: name__tool)", f.Name)
		}
		if seen[f.Name] {
			return nil, r.errorf(at+".name", "%q is named twice", f.Name)
		}
		seen[f.Name] = true
		s := mcpupstream.Server{Name: f.Name, KeyMeta: f.KeyMeta, Env: map[string]string{}}
		var err error
		expand := func(field, v string) string {
			out, e := r.expand(at+"."+field, v)
			if err == nil {
				err = e
			}
			return out
		}
		switch {
		case len(f.Command) > 0 && f.URL != "":
			return nil, r.errorf(at, "give a command (a server run over stdio) or a url (streamable HTTP), not both")
		case len(f.Command) > 0:
			for j, w := range f.Command {
				s.Command = append(s.Command, expand(fmt.Sprintf("command[%d]", j), w))
			}
			// A program named by a relative path is found from the pack
			// file's folder, wherever the process runs.
			if prog := s.Command[0]; strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
				abs, err := filepath.Abs(filepath.Join(dir, prog))
				if err != nil {
					return nil, r.errorf(at+".command[0]", "%v", err)
				}
				s.Command[0] = abs
			}
			for k, v := range f.Env {
				s.Env[k] = expand("env."+k, v)
			}
		case f.URL != "":
			s.URL = expand("url", f.URL)
			if len(f.Env) > 0 {
				return nil, r.errorf(at+".env", "env is a stdio server's; an HTTP server's is its own")
			}
			if u, err := url.Parse(s.URL); err != nil || u.User != nil || u.Host == "" ||
				!(u.Scheme == "https" || u.Scheme == "http" && slices.Contains([]string{"127.0.0.1", "::1", "localhost"}, u.Hostname())) {
				return nil, r.errorf(at+".url", "use https://host/path, or http:// only on this machine (127.0.0.1, ::1, localhost), with no user in it")
			}
		default:
			return nil, r.errorf(at, "give a command (a server run over stdio, e.g. command: [npx, my-server]) or a url (streamable HTTP)")
		}
		if err != nil {
			return nil, err
		}
		if a := f.Auth; a != nil {
			switch {
			case s.URL == "":
				return nil, r.errorf(at+".auth", "auth is an HTTP server's; a stdio server runs as the worker and is sent no token")
			case a.Exchange == "" && a.Bearer == "":
				return nil, r.errorf(at+".auth", "give exchange (the server's audience: each call runs as the signed-in person) or bearer (a service credential, \"${NAME}\")")
			case a.Bearer != "" && !envRef.MatchString(a.Bearer):
				return nil, r.errorf(at+".auth.bearer", "a credential written into a pack file is a secret in a file; give it as \"${NAME}\", set in toolgate's environment")
			}
			s.Audience = a.Exchange
			if a.Bearer != "" {
				s.Bearer, err = r.expand(at+".auth.bearer", a.Bearer)
				if err != nil {
					return nil, err
				}
			}
		}
		if f.Unlisted != nil && f.Unlisted.Decision != "" && f.Unlisted.Decision != string(policy.DecisionApprove) {
			return nil, r.errorf(at+".unlisted.decision", "a tool no row names runs only once a person approves it; leave decision out, or name the tool in a row")
		}
		out = append(out, s)
	}
	return out, nil
}

// unlistedRow is the row an accepted tool of a server with unlisted gets
// when no row names it: its server's schema as is, a person's approval
// for every call, at least the write tier (hints may raise it), and an
// example made from its schema for the pack kit. An error says why the
// tool cannot be offered so (accept-mcp leaves it out).
func (r *reader) unlistedRow(s fileServer, def mcpupstream.Definition) (fileTool, error) {
	if _, _, err := r.mcpArgs("servers."+s.Name, "f_unlisted", def, nil); err != nil {
		return fileTool{}, err
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(def.InputSchema, &schema); err != nil {
		return fileTool{}, fmt.Errorf("%s's input schema is not a JSON Schema: %w", def.Name, err)
	}
	example := map[string]any{}
	for _, name := range schema.Required {
		v, err := exampleOf(schema.Properties[name])
		if err != nil {
			return fileTool{}, fmt.Errorf("%s's arg %s: %w", def.Name, name, err)
		}
		example[name] = v
	}
	p := *s.Unlisted
	p.Decision = string(policy.DecisionApprove)
	return fileTool{Server: s.Name, Tool: def.Name, Tier: string(policy.TierWrite), Example: example, Policy: p}, nil
}

// previewRows gives each MCP dry run its preview tool's own row (rows[j]
// is tools[j]'s): a dry run's reading goes on the card its caller is
// answered with, so the tool must be one the caller may be offered, and is
// held to that row. A dry run's read is not counted against that row's
// limits, so a row with limits is no dry run's: else a caller at the
// limit would read on, a card at a time.
func (r *reader) previewRows(tools []policy.ToolSpec, rows []policy.Row) error {
	for i, t := range tools {
		if t.MCP == nil || t.MCP.Preview == nil {
			continue
		}
		j := slices.IndexFunc(tools, func(o policy.ToolSpec) bool {
			return o.MCP != nil && o.MCP.Server == t.MCP.Server && o.MCP.Tool == t.MCP.Preview.Tool
		})
		if j < 0 {
			return r.errorf(fmt.Sprintf("tools[%d].preview.tool", i), "%s on %s is no row of this file: name it in a row of its own, with the roles that may read with it (what a dry run reads is shown to the caller)", t.MCP.Preview.Tool, t.MCP.Server)
		}
		if j < len(rows) && len(rows[j].Limits) > 0 {
			return r.errorf(fmt.Sprintf("tools[%d].policy.limits", j), "%s is the dry run of %s (tools[%d].preview), and a dry run's read is not counted against a row's limits: "+
				"drop this row's limits, or the preview of tools[%d] (its card then shows the exact args); a card's dry runs are bounded by the limits of the row that puts it up",
				tools[j].Name, t.Name, i, i)
		}
		t.MCP.Preview.Row = tools[j].Name
	}
	return nil
}

// withUnlisted is the file's rows and, for each server with unlisted, a
// row for each accepted tool of it that no row names.
func (r *reader) withUnlisted(f file, pins Pins) ([]fileTool, error) {
	tools := slices.Clone(f.Tools)
	for i, s := range f.Servers {
		if s.Unlisted == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(pins[s.Name])) {
			if slices.ContainsFunc(f.Tools, func(t fileTool) bool { return t.Server == s.Name && t.Tool == name }) {
				continue
			}
			t, err := r.unlistedRow(s, pins[s.Name][name].Definition)
			if err != nil {
				return nil, r.errorf(fmt.Sprintf("servers[%d].unlisted", i), "%s on %s was accepted but cannot be offered unlisted (%v); run starter accept-mcp again, or name it in a row", name, s.Name, err)
			}
			tools = append(tools, t)
		}
	}
	return tools, nil
}

// exampleOf is a value the schema takes, for a tool's example: its first
// enum value, else the least its bounds allow.
func exampleOf(s *jsonschema.Schema) (any, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("it has no schema")
	case len(s.Enum) > 0:
		return s.Enum[0], nil
	case s.Pattern != "":
		return nil, fmt.Errorf("toolgate cannot make an example of its pattern; name the tool in a row with an example")
	}
	switch s.Type {
	case "string":
		n := 1
		if s.MinLength != nil {
			n = max(n, *s.MinLength)
		}
		return strings.Repeat("a", n), nil
	case "integer", "number":
		v := 0.0
		switch {
		case s.Minimum != nil:
			v = *s.Minimum
		case s.Maximum != nil && *s.Maximum < 0:
			v = *s.Maximum
		}
		if s.Type == "integer" {
			v = math.Ceil(v)
		}
		return v, nil
	case "boolean":
		return false, nil
	case "array":
		n := 0
		if s.MinItems != nil {
			n = *s.MinItems
		}
		items := make([]any, 0, n)
		for range n {
			v, err := exampleOf(s.Items)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	}
	return nil, fmt.Errorf("toolgate cannot make an example of type %q", s.Type)
}

// expand replaces each ${NAME} in v with NAME from toolgate's environment,
// refusing one that is not set.
func (r *reader) expand(at, v string) (string, error) {
	var err error
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		val, ok := os.LookupEnv(name)
		if !ok && err == nil {
			err = r.errorf(at, "%s is not set in toolgate's environment", ref)
		}
		return val
	})
	return out, err
}

// floor is the tier an MCP tool's annotations allow at least, with the
// spec's defaults for hints left out (not read-only, destructive): a
// server's hints raise a row's tier, never lower it.
func floor(a *mcp.ToolAnnotations) (policy.Tier, string) {
	switch {
	case a != nil && a.ReadOnlyHint:
		return policy.TierRead, ""
	case a != nil && a.DestructiveHint != nil && !*a.DestructiveHint:
		return policy.TierWriteReversible, "it is not read-only (readOnlyHint)"
	case a == nil || a.DestructiveHint == nil:
		return policy.TierWrite, "it says nothing of being read-only or harmless, which MCP reads as destructive"
	}
	return policy.TierWrite, "it is destructive (destructiveHint)"
}

var tierOrder = []policy.Tier{policy.TierRead, policy.TierWriteReversible, policy.TierWrite, policy.TierIrreversible}

// mcpTool fills an MCP tool's spec from its accepted definition: the wire
// name (server__tool unless the row names it), the description, the args
// (the server's schema as narrowed by the row), the tier raised to what its
// hints allow, and idempotency only where the server allows it too.
func (r *reader) mcpTool(at, packName string, t fileTool, servers []mcpupstream.Server, pins Pins) (policy.ToolSpec, []policy.Format, error) {
	if !slices.ContainsFunc(servers, func(s mcpupstream.Server) bool { return s.Name == t.Server }) {
		return policy.ToolSpec{}, nil, r.errorf(at+".server", "%q is not one of the pack's servers", t.Server)
	}
	if t.Tool == "" {
		return policy.ToolSpec{}, nil, r.errorf(at+".tool", "required: the tool's name on %s", t.Server)
	}
	if t.Args != nil || t.Route != nil {
		return policy.ToolSpec{}, nil, r.errorf(at, "an MCP tool's args and route are its server's; narrow its args with narrow")
	}
	accepted, ok := pins[t.Server][t.Tool]
	if !ok {
		return policy.ToolSpec{}, nil, r.errorf(at+".tool", "%s on %s has not been accepted: run starter accept-mcp --pack %s, read what it shows, and keep the pins file it writes", t.Tool, t.Server, r.file)
	}
	def := accepted.Definition
	if t.Name == "" {
		t.Name = t.Server + "__" + t.Tool
	}
	if t.Description == "" {
		t.Description = def.Description
	}
	hinted, why := floor(def.Annotations)
	if slices.Index(tierOrder, policy.Tier(t.Tier)) >= 0 && slices.Index(tierOrder, hinted) > slices.Index(tierOrder, policy.Tier(t.Tier)) {
		if hinted.Floor() == policy.DecisionApprove && len(t.Policy.Approvers) == 0 {
			return policy.ToolSpec{}, nil, r.errorf(at+".tier", "%s on %s is a %s tool at least, since %s, so a person approves every call: name its approvers", t.Tool, t.Server, hinted, why)
		}
		t.Tier = string(hinted)
	}
	readOnly := def.Annotations != nil && def.Annotations.ReadOnlyHint
	if t.Idempotent && !readOnly && (def.Annotations == nil || !def.Annotations.IdempotentHint) {
		return policy.ToolSpec{}, nil, r.errorf(at+".idempotent", "%s on %s does not say it is idempotent (idempotentHint), so toolgate runs it at most once; leave idempotent out", t.Tool, t.Server)
	}
	spec, formats, err := r.tool(at, packName, t)
	if err != nil {
		return spec, nil, err
	}
	args, argFormats, err := r.mcpArgs(at, fmt.Sprintf("f_%s_%d", tagWord(packName[:min(len(packName), 24)]), toolIndex(at)), def, t.Narrow)
	if err != nil {
		return spec, nil, err
	}
	spec.Args = args
	server := servers[slices.IndexFunc(servers, func(s mcpupstream.Server) bool { return s.Name == t.Server })]
	spec.MCP = &policy.MCPTarget{Server: t.Server, Tool: t.Tool, Pin: accepted.Pin, KeyMeta: server.KeyMeta}
	if t.Preview != nil {
		if spec.MCP.Preview, err = r.mcpPreview(at+".preview", t, def, pins); err != nil {
			return spec, nil, err
		}
		spec.DryRun = true
	}
	return spec, append(formats, argFormats...), nil
}

// mcpPreview checks a row's dry run: an accepted tool of the same server
// that says it is read-only (a dry run runs before anyone decided, so it
// must change nothing), each of whose args it fills names an arg of each
// tool, its required args all filled.
func (r *reader) mcpPreview(at string, t fileTool, call mcpupstream.Definition, pins Pins) (*policy.MCPPreview, error) {
	p := t.Preview
	accepted, ok := pins[t.Server][p.Tool]
	if !ok {
		return nil, r.errorf(at+".tool", "%q on %s has not been accepted: run starter accept-mcp --pack %s, read what it shows, and keep the pins file it writes", p.Tool, t.Server, r.file)
	}
	def := accepted.Definition
	if def.Annotations == nil || !def.Annotations.ReadOnlyHint {
		return nil, r.errorf(at+".tool", "%s on %s does not say it is read-only (readOnlyHint), and a dry run runs before anyone has decided; name a read-only tool", p.Tool, t.Server)
	}
	if def.Annotations.OpenWorldHint == nil || *def.Annotations.OpenWorldHint {
		return nil, r.errorf(at+".tool", "%s on %s does not say it reaches nothing outside its server (openWorldHint: false), and a dry run runs with the model's args before anyone has decided; name a closed-world tool", p.Tool, t.Server)
	}
	var previewSchema, callSchema jsonschema.Schema
	if json.Unmarshal(def.InputSchema, &previewSchema) != nil || json.Unmarshal(call.InputSchema, &callSchema) != nil {
		return nil, r.errorf(at, "the input schemas of %s and %s do not read as JSON Schema", p.Tool, t.Tool)
	}
	if len(p.Args) == 0 {
		return nil, r.errorf(at+".args", "name which of %s's args fill %s's (e.g. args: {path: path})", t.Tool, p.Tool)
	}
	for name, from := range p.Args {
		if previewSchema.Properties[name] == nil {
			return nil, r.errorf(at+".args."+name, "%q is not one of %s's args", name, p.Tool)
		}
		if callSchema.Properties[from] == nil {
			return nil, r.errorf(at+".args."+name, "%q is not one of %s's args", from, t.Tool)
		}
	}
	for _, name := range previewSchema.Required {
		if _, ok := p.Args[name]; !ok {
			return nil, r.errorf(at+".args", "%s needs %s; name the arg of %s that fills it", p.Tool, name, t.Tool)
		}
	}
	return &policy.MCPPreview{Tool: p.Tool, Pin: accepted.Pin, Args: p.Args}, nil
}

// The keywords of a server's schema that toolgate checks or shows, and
// those it may pass over because they only describe (the server checks its
// own schema too). Any other keyword could change what an arg is, so a
// tool whose schema uses one is refused rather than gated by half.
var (
	mcpTypeKeywords = []string{"type", "description", "title", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "default", "items", "minItems", "maxItems"}
	mcpPassKeywords = []string{"$schema", "$comment", "examples", "format"}
)

// mcpArgs builds the Go type of an MCP tool's args from its accepted input
// schema and the row's narrowing, as a pack file's args are built: strings
// as *string (an empty one is sent as given), numbers as *float64,
// integers as *int64, booleans as *bool, lists of these as slices; each
// nil when left out and never sent then.
func (r *reader) mcpArgs(at, tag string, def mcpupstream.Definition, narrow map[string]fileNarrow) (reflect.Type, []policy.Format, error) {
	var raw map[string]any
	if err := json.Unmarshal(def.InputSchema, &raw); err != nil {
		return nil, nil, r.errorf(at, "%s's input schema is not a JSON object: %v", def.Name, err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(def.InputSchema, &s); err != nil {
		return nil, nil, r.errorf(at, "%s's input schema is not a JSON Schema: %v", def.Name, err)
	}
	for k := range raw {
		if !slices.Contains([]string{"type", "properties", "required", "additionalProperties"}, k) && !slices.Contains(mcpPassKeywords, k) {
			return nil, nil, r.errorf(at, "%s's input schema uses %s, which toolgate cannot check; leave the tool out", def.Name, k)
		}
	}
	if s.Type != "object" {
		return nil, nil, r.errorf(at, "%s's input schema is not an object", def.Name)
	}
	props, _ := raw["properties"].(map[string]any)
	for n := range narrow {
		if props[n] == nil {
			return nil, nil, r.errorf(at+".narrow."+n, "%q is not one of %s's args", n, def.Name)
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	var fields []reflect.StructField
	var formats []policy.Format
	for i, n := range names {
		if !argName.MatchString(n) {
			return nil, nil, r.errorf(at, "%s's arg %q is not a name toolgate can hold (1 to 64 letters, digits or _); leave the tool out", def.Name, n)
		}
		fr, _ := props[n].(map[string]any)
		f, fs, err := r.mcpField(at, fmt.Sprintf("%s_%d", tag, i), def.Name, n, fr, s.Properties[n], narrow[n], slices.Contains(s.Required, n))
		if err != nil {
			return nil, nil, err
		}
		fields = append(fields, f)
		formats = append(formats, fs...)
	}
	return reflect.StructOf(fields), formats, nil
}

func (r *reader) mcpField(at, formatTag, tool, name string, raw map[string]any, s *jsonschema.Schema, n fileNarrow, required bool) (reflect.StructField, []policy.Format, error) {
	sf := reflect.StructField{Name: "F" + formatTag[strings.LastIndexByte(formatTag, '_')+1:]}
	cannot := func(what string) error {
		return r.errorf(at, "%s's arg %s %s, which toolgate cannot check; leave the tool out", tool, name, what)
	}
	if t, ok := raw["type"].(string); ok && !slices.Contains([]string{"string", "integer", "number", "boolean", "array"}, t) {
		return sf, nil, cannot(fmt.Sprintf("is of type %q", t))
	}
	for k := range raw {
		if !slices.Contains(mcpTypeKeywords, k) && !slices.Contains(mcpPassKeywords, k) {
			return sf, nil, cannot("uses " + k)
		}
	}
	item := s
	listed := s.Type == "array"
	if listed {
		itemsRaw, _ := raw["items"].(map[string]any)
		if s.Items == nil || itemsRaw == nil {
			return sf, nil, cannot("is a list of anything")
		}
		for k := range itemsRaw {
			if !slices.Contains(mcpTypeKeywords, k) && !slices.Contains(mcpPassKeywords, k) || k == "items" {
				return sf, nil, cannot("holds items that use " + k)
			}
		}
		item = s.Items
	} else if s.Items != nil || s.MinItems != nil || s.MaxItems != nil {
		return sf, nil, cannot("has items but is not a list")
	}
	var elem reflect.Type
	switch item.Type {
	case "string":
		elem = reflect.TypeFor[string]()
	case "integer":
		elem = reflect.TypeFor[int64]()
	case "number":
		elem = reflect.TypeFor[float64]()
	case "boolean":
		elem = reflect.TypeFor[bool]()
	default:
		return sf, nil, cannot(fmt.Sprintf("is of type %q", item.Type))
	}
	words, formats, err := r.valueRules(at+".narrow."+name, formatTag, tool, name, item, n, listed)
	if err != nil {
		return sf, nil, err
	}
	// A narrowed arg is required: one left out is whatever the server does
	// then (its default, or everything), which no narrowing holds.
	presence := "omitnil"
	if required || n.narrows() {
		presence = "required"
	}
	validate := presence
	if listed {
		sf.Type = reflect.SliceOf(elem)
		if s.MinItems != nil {
			validate += ",min=" + strconv.Itoa(*s.MinItems)
		}
		maxItems := s.MaxItems
		if n.MaxItems != nil {
			if maxItems != nil && *n.MaxItems > *maxItems {
				return sf, nil, r.errorf(at+".narrow."+name+".maxItems", "%d would widen the server's %d", *n.MaxItems, *maxItems)
			}
			maxItems = n.MaxItems
		}
		if maxItems != nil {
			validate += ",max=" + strconv.Itoa(*maxItems)
		}
		if len(words) > 0 {
			validate += ",dive," + strings.Join(words, ",")
		}
	} else {
		sf.Type = reflect.PointerTo(elem)
		if len(words) > 0 {
			validate += "," + strings.Join(words, ",")
		}
	}
	desc := strings.TrimSpace(s.Description)
	if n.PathPrefix != "" {
		// The rule in words beside its pattern: the model reads both.
		prefix, _ := r.expand(at, n.PathPrefix)
		desc = strings.TrimSpace(desc + " A path under " + prefix + ", written out whole.")
	}
	tag := fmt.Sprintf(`json:%q validate:%q desc:%q`, name+",omitzero", validate, desc)
	if s.Title != "" {
		tag += fmt.Sprintf(` title:%q`, s.Title)
	}
	if len(s.Default) > 0 && !listed {
		var def any
		_ = json.Unmarshal(s.Default, &def)
		text := fmt.Sprint(def)
		if f, ok := def.(float64); ok && f == math.Trunc(f) {
			text = strconv.FormatInt(int64(f), 10)
		}
		tag += fmt.Sprintf(` default:%q`, text)
	}
	sf.Tag = reflect.StructTag(tag)
	return sf, formats, nil
}

// valueRules are the validate rules on one value (a field, or each item of
// a list): the server's, then the row's, each of which only narrows. A
// pattern or a path prefix is a format, named by its tag among the rules.
func (r *reader) valueRules(at, formatTag, tool, name string, s *jsonschema.Schema, n fileNarrow, listed bool) ([]string, []policy.Format, error) {
	var rules []string
	var formats []policy.Format
	str, num := s.Type == "string", s.Type == "integer" || s.Type == "number"
	if !str && (n.PathPrefix != "" || n.Pattern != "" || n.MaxLength != nil || len(n.Enum) > 0) {
		return nil, nil, r.errorf(at, "pathPrefix, pattern, maxLength and enum narrow a string; %s is a %s", name, s.Type)
	}
	if !num && (n.Minimum != nil || n.Maximum != nil) {
		return nil, nil, r.errorf(at, "minimum and maximum narrow a number; %s is a %s", name, s.Type)
	}
	if n.MaxItems != nil && !listed {
		return nil, nil, r.errorf(at+".maxItems", "%s is not a list", name)
	}
	if s.MinLength != nil {
		rules = append(rules, "min="+strconv.Itoa(*s.MinLength))
	}
	maxLength := s.MaxLength
	if n.MaxLength != nil {
		if maxLength != nil && *n.MaxLength > *maxLength {
			return nil, nil, r.errorf(at+".maxLength", "%d would widen the server's %d", *n.MaxLength, *maxLength)
		}
		maxLength = n.MaxLength
	}
	if maxLength != nil {
		rules = append(rules, "max="+strconv.Itoa(*maxLength))
	}
	for _, b := range []struct {
		rule, keyword string
		server, row   *float64
	}{{"min", "minimum", s.Minimum, n.Minimum}, {"max", "maximum", s.Maximum, n.Maximum}} {
		server, row := b.server, b.row
		if row != nil && server != nil && (b.rule == "min" && *row < *server || b.rule == "max" && *row > *server) {
			return nil, nil, r.errorf(at+"."+b.keyword, "%v would widen the server's %v", *row, *server)
		}
		bound := server
		if row != nil {
			bound = row
		}
		if bound == nil {
			continue
		}
		if s.Type == "integer" && *bound != math.Trunc(*bound) {
			return nil, nil, r.errorf(at, "%s is a whole number; its bound %v is not", name, *bound)
		}
		rules = append(rules, b.rule+"="+strconv.FormatFloat(*bound, 'f', -1, 64))
	}
	enum := make([]string, 0, len(s.Enum))
	for _, e := range s.Enum {
		w, ok := e.(string)
		if !ok || !enumWord.MatchString(w) {
			return nil, nil, r.errorf(at, "%s's arg %s has the enum value %v, which toolgate cannot check; leave the tool out", tool, name, e)
		}
		enum = append(enum, w)
	}
	if len(n.Enum) > 0 {
		for _, w := range n.Enum {
			if !enumWord.MatchString(w) {
				return nil, nil, r.errorf(at+".enum", "%q: each value is one word of letters, digits and _ . : -", w)
			}
			if len(enum) > 0 && !slices.Contains(enum, w) {
				return nil, nil, r.errorf(at+".enum", "%q is not one of the server's values (%s): a row narrows, never widens", w, strings.Join(enum, ", "))
			}
		}
		enum = n.Enum
	}
	if len(enum) > 0 {
		rules = append(rules, "oneof="+strings.Join(enum, " "))
	}
	for i, p := range []string{s.Pattern, n.Pattern} {
		if p == "" {
			continue
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, nil, r.errorf(at+".pattern", "%s's pattern %q is not one Go can read (%v); leave the tool out or narrow it otherwise", name, p, err)
		}
		f := policy.Format{Tag: fmt.Sprintf("%s_p%d", formatTag, i), Pattern: re, Rule: "must match the pattern " + p}
		rules, formats = append(rules, f.Tag), append(formats, f)
	}
	if n.PathPrefix != "" {
		prefix, err := r.expand(at+".pathPrefix", n.PathPrefix)
		if err != nil {
			return nil, nil, err
		}
		re, err := pathUnder(prefix)
		if err != nil {
			return nil, nil, r.errorf(at+".pathPrefix", "%v", err)
		}
		f := policy.Format{Tag: formatTag + "_path", Pattern: re,
			Rule: fmt.Sprintf("must be a path under %s, written out whole (absolute, no . or .. parts, no doubled or trailing /)", prefix)}
		rules, formats = append(rules, f.Tag), append(formats, f)
	}
	return rules, formats, nil
}

// pathUnder is the rule of a path under prefix as a server will read it:
// the prefix itself or a path below it, absolute and clean as written. A
// path that would be cleaned (a . or .. part, a doubled or trailing slash)
// is refused, not cleaned: toolgate never judges one path and sends
// another, and a server never reads a path toolgate read otherwise.
func pathUnder(prefix string) (*regexp.Regexp, error) {
	// What no path may hold, by Unicode category: every control character
	// (C0 and C1: NEL and CSI are controls too), every format character
	// (bidi overrides, zero-width spaces), the line and paragraph separators.
	const unreadable = `\p{Cc}\p{Cf}\p{Zl}\p{Zp}`
	if !filepath.IsAbs(prefix) || filepath.Clean(prefix) != prefix || strings.ContainsAny(prefix, "\x00\\") || regexp.MustCompile(`[`+unreadable+`]`).MatchString(prefix) {
		return nil, fmt.Errorf("%q: a prefix is an absolute, clean path of readable characters, e.g. /srv/scratch", prefix)
	}
	// A part is anything but /, and neither . nor .. (RE2 has no lookahead,
	// so: a first character that is not a dot, or a dot and then not a dot,
	// or two dots and then anything). Nor does any part hold what another
	// reader of paths takes for something else: a control character, a
	// backslash (a separator to some servers), a percent sign (an escape to
	// others), or an unreadable character (a path that reads on the card
	// otherwise than it is sent).
	c := `[^/\\%` + unreadable + `]`
	d := `[^/.\\%` + unreadable + `]`
	part := `(?:` + d + c + `*|\.` + d + c + `*|\.\.` + c + `+)`
	if prefix == "/" {
		return regexp.MustCompile(`^(?:/` + part + `)+$|^/$`), nil
	}
	return regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `(?:/` + part + `)*$`), nil
}
