package packs

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
	"go.yaml.in/yaml/v3"
)

// A pack file declares a pack as data: its name, the system its tools
// reach, its roles, and per tool what the model sees (name, description,
// the JSON Schema of its args), how toolgate treats it (tier, idempotent,
// timeout, the upstream route) and its policy row (roles, decision,
// limits, approver routing, evidence). YAML, or JSON, which is YAML too.
// Everything a file cannot say (a dry run that needs code) is a Go pack.
type file struct {
	Pack   string `yaml:"pack"`
	System string `yaml:"system"`
	// Currency is what the pack's values count, an ISO 4217 code (values
	// are in its minor units); none when left out.
	Currency string     `yaml:"currency"`
	Roles    []fileRole `yaml:"roles"`
	// Resources are the kinds of thing the pack's sign-ins grant and its
	// tools act on.
	Resources []fileKind `yaml:"resources"`
	Tools     []fileTool `yaml:"tools"`
	// Servers are the team's own MCP servers, whose tools the pack's rows
	// with a server gate.
	Servers []fileServer `yaml:"servers"`
}

type fileKind struct {
	Kind    string `yaml:"kind"`
	Plural  string `yaml:"plural"`
	Claim   string `yaml:"claim"`
	Conceal bool   `yaml:"conceal"`
	Example string `yaml:"example"`
}

type fileResource struct {
	Arg  string `yaml:"arg"`
	Kind string `yaml:"kind"`
}

type fileRole struct {
	Name  string `yaml:"name"`
	Label string `yaml:"label"`
}

type fileTool struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Tier        string         `yaml:"tier"`
	Idempotent  bool           `yaml:"idempotent"`
	Credential  *bool          `yaml:"credential"`
	Timeout     string         `yaml:"timeout"`
	Shared      bool           `yaml:"shared"`
	ValueArg    string         `yaml:"valueArg"`
	Receipt     *fileReceipt   `yaml:"receipt"`
	Resource    *fileResource  `yaml:"resource"`
	Args        map[string]any `yaml:"args"`
	Example     map[string]any `yaml:"example"`
	Route       *fileRoute     `yaml:"route"`
	Policy      filePolicy     `yaml:"policy"`
	// Server and Tool make the row one of an MCP server's tools, whose
	// description and args are the server's as accepted (the pins file);
	// Narrow adds rules to its args.
	Server  string                `yaml:"server"`
	Tool    string                `yaml:"tool"`
	Narrow  map[string]fileNarrow `yaml:"narrow"`
	Preview *filePreview          `yaml:"preview"`
}

// filePreview is an MCP tool's dry run: a read-only tool of the same
// server, called with the call's args its own args name (preview arg:
// the call's arg).
type filePreview struct {
	Tool string            `yaml:"tool"`
	Args map[string]string `yaml:"args"`
}

type fileReceipt struct {
	Name  string `yaml:"name"`
	Field string `yaml:"field"`
}

type fileRoute struct {
	Method string            `yaml:"method"`
	Path   string            `yaml:"path"`
	Query  map[string]string `yaml:"query"`
	Body   []string          `yaml:"body"`
	Keyed  *bool             `yaml:"keyed"`
	// Dedupes says the upstream runs one Idempotency-Key once: what lets
	// an idempotent POST be sent again.
	Dedupes bool `yaml:"dedupes"`
}

type filePolicy struct {
	Roles           []string       `yaml:"roles"`
	Decision        string         `yaml:"decision"`
	HardLimit       int64          `yaml:"hardLimit"`
	Limits          []fileLimit    `yaml:"limits"`
	Approvers       []fileApprover `yaml:"approvers"`
	Quorum          []fileQuorum   `yaml:"quorum"`
	Editable        []string       `yaml:"editable"`
	ConfirmInClient bool           `yaml:"confirmInClient"`
	RequesterTier   string         `yaml:"requesterTier"`
	RequesterMaxAge string         `yaml:"requesterMaxAge"`
	Evidence        []fileEvidence `yaml:"evidence"`
}

type fileLimit struct {
	Scope    string `yaml:"scope"`
	Window   string `yaml:"window"`
	MaxCalls int    `yaml:"maxCalls"`
	MaxValue int64  `yaml:"maxValue"`
}

type fileApprover struct {
	Role string `yaml:"role"`
	UpTo int64  `yaml:"upTo"`
	When string `yaml:"when"`
}

type fileQuorum struct {
	Above     int64 `yaml:"above"`
	Approvals int   `yaml:"approvals"`
}

type fileEvidence struct {
	UpTo   int64  `yaml:"upTo"`
	ACR    string `yaml:"acr"`
	MaxAge string `yaml:"maxAge"`
}

// DefaultFileTimeout bounds one upstream attempt of a file tool that names
// no timeout.
const DefaultFileTimeout = 10 * time.Second

// IsFile reports whether a TOOLGATE_PACKS entry names a pack file rather
// than a built-in pack.
func IsFile(entry string) bool {
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(entry, ext) {
			return true
		}
	}
	return false
}

// LoadFile reads a pack file. A bad one is refused with the file, the line
// and the field, and what to write instead.
func LoadFile(path string) (pack.Pack, error) {
	r, f, err := readFile(path)
	if err != nil {
		return pack.Pack{}, err
	}
	servers, err := r.servers(filepath.Dir(path), f.Servers)
	if err != nil {
		return pack.Pack{}, err
	}
	pins := Pins{}
	if len(servers) > 0 {
		if pins, err = ReadPins(path); err != nil {
			return pack.Pack{}, err
		}
	}
	d, err := r.pack(f, servers, pins)
	if err != nil {
		return pack.Pack{}, err
	}
	// What the pack's tools and rows say of each other (roles, routes,
	// rules, the value arg): New's checks, placed at the tool they name.
	if _, err := policy.New(d); err != nil {
		for i, t := range f.Tools {
			if t.Name != "" && (strings.Contains(err.Error(), "tool "+t.Name+":") || strings.Contains(err.Error(), strconv.Quote(t.Name)) || strings.Contains(err.Error(), " of "+t.Name+" ")) {
				return pack.Pack{}, r.errorf(fmt.Sprintf("tools[%d]", i), "%v", err)
			}
		}
		return pack.Pack{}, fmt.Errorf("%s: %w", path, err)
	}
	return pack.Pack{Policy: d, Servers: servers}, nil
}

// readFile reads a pack file's fields, refusing one the format does not
// have.
func readFile(path string) (*reader, file, error) {
	var f file
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, f, fmt.Errorf("pack file: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, f, fmt.Errorf("%s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil, f, fmt.Errorf("%s: the file is empty; a pack file declares pack, system, roles and tools", path)
	}
	r := &reader{file: path, lines: map[string]int{}}
	if err := r.walk(root.Content[0], "", reflect.TypeFor[file]()); err != nil {
		return nil, f, err
	}
	if err := root.Content[0].Decode(&f); err != nil {
		return nil, f, fmt.Errorf("%s: %w", path, err)
	}
	return r, f, nil
}

// reader turns a file into a policy.Pack, remembering each field's line.
type reader struct {
	file  string
	lines map[string]int
}

// errorf is an error at a field: file:line: path: what is wrong.
func (r *reader) errorf(path, format string, args ...any) error {
	line := r.lines[path]
	for p := path; line == 0 && p != ""; {
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
		line = r.lines[p]
	}
	return fmt.Errorf("%s:%d: %s: %s", r.file, line, path, fmt.Sprintf(format, args...))
}

// walk records the line of every field and refuses a key the format does
// not have, naming the ones it does. Free-form maps (args, example,
// query) are recorded, not checked.
func (r *reader) walk(n *yaml.Node, path string, t reflect.Type) error {
	r.lines[path] = n.Line
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		var known []string
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			known = append(known, name)
			fields[name] = t.Field(i).Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			ft, ok := fields[key]
			if !ok {
				r.lines[sub] = n.Content[i].Line
				return r.errorf(sub, "unknown field; the fields here are %s", strings.Join(known, ", "))
			}
			if err := r.walk(val, sub, ft); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if err := r.walk(item, fmt.Sprintf("%s[%d]", path, i), t.Elem()); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := r.walk(n.Content[i+1], path+"."+n.Content[i].Value, t.Elem()); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			r.record(n.Content[i+1], path+"."+n.Content[i].Value)
		}
	}
	return nil
}

// record notes the lines of a free-form value.
func (r *reader) record(n *yaml.Node, path string) {
	r.lines[path] = n.Line
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			r.record(n.Content[i+1], path+"."+n.Content[i].Value)
		}
	}
}

func (r *reader) pack(f file, servers []mcpupstream.Server, pins Pins) (policy.Pack, error) {
	d := policy.Pack{Name: f.Pack, System: f.System, Unit: policy.Unit{Currency: f.Currency}}
	if f.Pack == "" {
		return d, r.errorf("pack", "required: the pack's name, e.g. pack: helpdesk")
	}
	if f.System == "" {
		return d, r.errorf("system", "required: how messages to the model name the upstream, e.g. system: the helpdesk")
	}
	for _, role := range f.Roles {
		d.Roles = append(d.Roles, policy.RoleSpec{Name: policy.Role(role.Name), Label: role.Label})
	}
	kinds := map[string]bool{}
	for i, k := range f.Resources {
		at := fmt.Sprintf("resources[%d]", i)
		if !kindWord.MatchString(k.Kind) {
			return d, r.errorf(at+".kind", "%q must be 1 to 32 lower-case letters, digits or _, starting with a letter, e.g. kind: portal", k.Kind)
		}
		if kinds[k.Kind] {
			return d, r.errorf(at+".kind", "%q is declared twice", k.Kind)
		}
		kinds[k.Kind] = true
		d.Resources = append(d.Resources, policy.ResourceKind{Name: k.Kind, Plural: k.Plural, Claim: k.Claim, Conceal: k.Conceal, Example: k.Example})
	}
	if len(f.Tools) == 0 {
		return d, r.errorf("tools", "a pack file declares at least one tool")
	}
	tools, err := r.withUnlisted(f, pins)
	if err != nil {
		return d, err
	}
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		spec, formats, err := r.tool(at, f.Pack, t)
		switch {
		case t.Server != "":
			spec, formats, err = r.mcpTool(at, f.Pack, t, servers, pins)
		case t.Tool != "" || t.Narrow != nil || t.Preview != nil:
			return d, r.errorf(at, "tool, narrow and preview name an MCP server's tool; name its server too")
		}
		if err != nil {
			return d, err
		}
		if t.Resource != nil {
			switch {
			case !kinds[t.Resource.Kind]:
				return d, r.errorf(at+".resource.kind", "%q is not one of the pack's resources; declare it under resources (kind: %s)", t.Resource.Kind, t.Resource.Kind)
			case !slices.Contains(fieldNames(spec.Args), t.Resource.Arg):
				return d, r.errorf(at+".resource.arg", "%q is not one of the tool's args (%s)", t.Resource.Arg, strings.Join(fieldNames(spec.Args), ", "))
			}
			spec.Resource = policy.ResourceArg{Arg: t.Resource.Arg, Kind: t.Resource.Kind}
		}
		row, rules, err := r.row(at+".policy", spec.Name, string(spec.Tier), t.ValueArg != "", t.Resource != nil, t.Policy)
		if err != nil {
			return d, err
		}
		for j, e := range row.Editable {
			if !slices.Contains(fieldNames(spec.Args), e) {
				return d, r.errorf(fmt.Sprintf("%s.policy.editable[%d]", at, j), "editable: %q is not one of the tool's args (%s)", e, strings.Join(fieldNames(spec.Args), ", "))
			}
		}
		d.Tools, d.Rows, d.Evidence = append(d.Tools, spec), append(d.Rows, row), append(d.Evidence, rules...)
		d.Formats = append(d.Formats, formats...)
	}
	return d, r.previewRows(d.Tools, d.Rows)
}

var (
	toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	kindWord = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

func (r *reader) tool(at, packName string, t fileTool) (policy.ToolSpec, []policy.Format, error) {
	spec := policy.ToolSpec{Name: t.Name, Description: strings.TrimSpace(t.Description), Tier: policy.Tier(t.Tier), Idempotent: t.Idempotent,
		RequiresCredential: t.Credential == nil || *t.Credential, Timeout: DefaultFileTimeout, Shared: t.Shared, ValueArg: t.ValueArg}
	if t.Receipt != nil {
		spec.Receipt = &policy.Receipt{Name: t.Receipt.Name, Field: t.Receipt.Field}
		if err := spec.Receipt.Check(); err != nil {
			return spec, nil, r.errorf(at+".receipt", "%v", err)
		}
	}
	if !toolName.MatchString(t.Name) {
		return spec, nil, r.errorf(at+".name", "%q must be 1 to 64 lower-case letters, digits or _, starting with a letter", t.Name)
	}
	if spec.Description == "" {
		return spec, nil, r.errorf(at+".description", "required: when the model should use %s, and when not", t.Name)
	}
	switch spec.Tier {
	case policy.TierRead, policy.TierWriteReversible, policy.TierWrite, policy.TierIrreversible:
	default:
		return spec, nil, r.errorf(at+".tier", "%q is not a tier; use read, write_reversible, write or irreversible", t.Tier)
	}
	if t.Timeout != "" {
		d, err := time.ParseDuration(t.Timeout)
		if err != nil || d <= 0 || d > 5*time.Minute {
			return spec, nil, r.errorf(at+".timeout", "%q is not a duration from 1ms to 5m, e.g. 10s", t.Timeout)
		}
		spec.Timeout = d
	}
	if t.Credential != nil && !*t.Credential {
		return spec, nil, r.errorf(at+".credential", "every tool runs as the signed-in person (its credential is exchanged for each call); leave credential out")
	}
	if t.Example != nil {
		b, _ := json.Marshal(t.Example)
		spec.Example = string(b)
	}
	if t.Server != "" {
		return spec, nil, nil // its args are its server's (mcpTool)
	}
	args, formats, err := r.args(at+".args", fmt.Sprintf("f_%s_%d", tagWord(packName[:min(len(packName), 24)]), toolIndex(at)), t.Args)
	if err != nil {
		return spec, nil, err
	}
	spec.Args = args
	if t.Route != nil {
		filled := ""
		if t.Resource != nil {
			filled = t.Resource.Arg // step 5 fills it from the session when left out
		}
		route, err := r.route(at+".route", t.Route, args, filled)
		if err != nil {
			return spec, nil, err
		}
		if spec.Idempotent && route.Method != "GET" && !route.Dedupes {
			return spec, nil, r.errorf(at+".idempotent", "a %s marked idempotent is sent again after a timeout or a 5xx, which runs it twice upstream unless the upstream runs one Idempotency-Key once; if it does, say so with route.dedupes: true, else leave idempotent out", route.Method)
		}
		spec.Route = route
	}
	return spec, formats, nil
}

func (r *reader) route(at string, fr *fileRoute, args reflect.Type, filled string) (policy.Route, error) {
	route := policy.Route{Method: fr.Method, Path: fr.Path, Query: fr.Query, Body: fr.Body, Keyed: fr.Method == "POST", Dedupes: fr.Dedupes}
	if fr.Keyed != nil {
		route.Keyed = *fr.Keyed
	}
	if route.Dedupes && !route.Keyed {
		return route, r.errorf(at+".dedupes", "dedupes needs keyed: an upstream cannot run one Idempotency-Key once when toolgate sends none")
	}
	if fr.Method != "GET" && fr.Method != "POST" {
		return route, r.errorf(at+".method", "%q: use GET or POST", fr.Method)
	}
	if !strings.HasPrefix(fr.Path, "/") {
		return route, r.errorf(at+".path", "%q must start with /, e.g. /v1/tickets/{ticketId}", fr.Path)
	}
	names := fieldNames(args)
	for rest := fr.Path; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return route, r.errorf(at+".path", "%q has a { without its }", fr.Path)
		}
		f := rest[open+1 : open+end]
		if !slices.Contains(names, f) {
			return route, r.errorf(at+".path", "{%s} is not one of the args (%s)", f, strings.Join(names, ", "))
		}
		if !requiredArg(args, f) && f != filled {
			return route, r.errorf(at+".path", "{%s} is filled from an optional arg; make %s required, or the tool's resource arg", f, f)
		}
		rest = rest[open+end+1:]
	}
	for param, f := range fr.Query {
		if !slices.Contains(names, f) {
			return route, r.errorf(at+".query."+param, "%q is not one of the args (%s)", f, strings.Join(names, ", "))
		}
	}
	for i, f := range fr.Body {
		if !slices.Contains(names, f) {
			return route, r.errorf(fmt.Sprintf("%s.body[%d]", at, i), "%q is not one of the args (%s)", f, strings.Join(names, ", "))
		}
	}
	return route, nil
}

func (r *reader) row(at, tool, tier string, valued, scoped bool, p filePolicy) (policy.Row, []policy.EvidenceRule, error) {
	row := policy.Row{Tool: tool, Decision: policy.Decision(p.Decision), HardLimitCents: p.HardLimit, Editable: p.Editable, RequesterTier: p.RequesterTier,
		ConfirmInClient: p.ConfirmInClient}
	switch row.Decision {
	case policy.DecisionAllow, policy.DecisionApprove, policy.DecisionDeny:
	default:
		return row, nil, r.errorf(at+".decision", "%q: use allow, approve or deny", p.Decision)
	}
	if row.ConfirmInClient && row.Decision == policy.DecisionDeny {
		return row, nil, r.errorf(at+".confirmInClient", "a deny row puts up no card to confirm: drop confirmInClient, or make the decision approve")
	}
	for _, role := range p.Roles {
		row.Roles = append(row.Roles, policy.Role(role))
	}
	for i, l := range p.Limits {
		li := fmt.Sprintf("%s.limits[%d]", at, i)
		lim := policy.Limit{Scope: policy.Scope(l.Scope), MaxCalls: l.MaxCalls, MaxCents: l.MaxValue}
		switch {
		case lim.Scope == policy.PerResource && !scoped:
			return row, nil, r.errorf(li+".scope", "resource counts the calls on one resource, and this tool names none (resource); use user")
		case lim.Scope != policy.PerUser && lim.Scope != policy.PerResource:
			return row, nil, r.errorf(li+".scope", "%q: use user (each person's calls, counted together) or resource (every call on one resource)", l.Scope)
		}
		switch l.Window {
		case "hour":
			lim.Window = policy.Hour
		case "day":
			lim.Window = policy.Day
		default:
			return row, nil, r.errorf(li+".window", "%q: use hour or day", l.Window)
		}
		if lim.MaxCalls <= 0 && lim.MaxCents <= 0 {
			return row, nil, r.errorf(li, "a limit needs maxCalls or maxValue above 0")
		}
		row.Limits = append(row.Limits, lim)
	}
	for _, a := range p.Approvers {
		row.Approvers = append(row.Approvers, policy.Approver{Role: policy.Role(a.Role), UpToCents: a.UpTo, When: a.When})
	}
	if (row.Decision == policy.DecisionApprove || row.Decision == policy.DecisionAllow && policy.Tier(tier).Floor() == policy.DecisionApprove) && len(row.Approvers) == 0 {
		return row, nil, r.errorf(at+".approvers", "a card of this tool (an approve row, or a %s tool, which a person always approves) needs its approvers: list at least one role, e.g. approvers: [{role: supervisor}]", tier)
	}
	for _, q := range p.Quorum {
		row.Quorum = append(row.Quorum, policy.Quorum{AboveCents: q.Above, Approvals: q.Approvals})
	}
	if !valued && (row.HardLimitCents > 0 || len(row.Quorum) > 0 || slices.ContainsFunc(row.Limits, func(l policy.Limit) bool { return l.MaxCents > 0 })) {
		return row, nil, r.errorf(at, "hardLimit, maxValue and quorum judge a call's value, and this tool has none: name its valueArg, or leave them out")
	}
	if p.RequesterMaxAge != "" {
		d, err := time.ParseDuration(p.RequesterMaxAge)
		if err != nil || d <= 0 {
			return row, nil, r.errorf(at+".requesterMaxAge", "%q is not a duration, e.g. 15m", p.RequesterMaxAge)
		}
		row.RequesterMaxAge = d
	}
	var rules []policy.EvidenceRule
	for i, e := range p.Evidence {
		d, err := time.ParseDuration(e.MaxAge)
		if err != nil || d <= 0 {
			return row, nil, r.errorf(fmt.Sprintf("%s.evidence[%d].maxAge", at, i), "%q is not a duration, e.g. 8h", e.MaxAge)
		}
		rules = append(rules, policy.EvidenceRule{Tool: tool, UpToCents: e.UpTo, ACR: e.ACR, MaxAge: d})
	}
	return row, rules, nil
}

// The JSON Schema keywords a pack file's args may use: those the chain
// enforces and the model is shown. Any other keyword is refused, so no rule
// is written that nothing checks.
var (
	objectKeywords = []string{"type", "properties", "required", "additionalProperties"}
	fieldKeywords  = []string{"type", "description", "title", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "default", "x-redact"}
	argName        = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,63}$`)
)

// args builds the Go type a file tool's args decode into from their JSON
// Schema (checked well-formed by google/jsonschema-go): a struct whose
// json, validate and desc tags say what the schema says, so the chain
// decodes, validates, describes and encodes them exactly as a Go pack's.
// A pattern becomes a pack format named tag.
func (r *reader) args(at, tag string, raw map[string]any) (reflect.Type, []policy.Format, error) {
	if raw == nil {
		return nil, nil, r.errorf(at, "required: the JSON Schema of the args, e.g. {type: object, properties: {...}, required: [...]}")
	}
	for k := range raw {
		if !slices.Contains(objectKeywords, k) {
			return nil, nil, r.errorf(at+"."+k, "not supported; the args schema may use %s", strings.Join(objectKeywords, ", "))
		}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, nil, r.errorf(at, "not JSON: %v", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, nil, r.errorf(at, "not a JSON Schema: %v", err)
	}
	if s.Type != "object" {
		return nil, nil, r.errorf(at+".type", "the args are one object: type: object")
	}
	if s.AdditionalProperties != nil && !isFalse(s.AdditionalProperties) {
		return nil, nil, r.errorf(at+".additionalProperties", "toolgate refuses unknown fields; leave it out or set it false")
	}
	props, _ := raw["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names) // the canonical encoding's field order
	for _, n := range s.Required {
		if s.Properties[n] == nil {
			return nil, nil, r.errorf(at+".required", "%q is not one of the properties", n)
		}
	}
	var fields []reflect.StructField
	var formats []policy.Format
	for i, n := range names {
		fat := at + ".properties." + n
		if !argName.MatchString(n) {
			return nil, nil, r.errorf(fat, "an arg's name is 1 to 64 letters, digits or _, starting with a letter")
		}
		fr, _ := props[n].(map[string]any)
		for k := range fr {
			if !slices.Contains(fieldKeywords, k) {
				return nil, nil, r.errorf(fat+"."+k, "not supported; an arg may use %s", strings.Join(fieldKeywords, ", "))
			}
		}
		f, format, err := r.field(fat, fmt.Sprintf("%s_%d", tag, i), n, s.Properties[n], fr, slices.Contains(s.Required, n))
		if err != nil {
			return nil, nil, err
		}
		fields = append(fields, f)
		if format != nil {
			formats = append(formats, *format)
		}
	}
	// The library's own check last: the fields' errors above name their field.
	if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		return nil, nil, r.errorf(at, "not a valid JSON Schema: %v", err)
	}
	return reflect.StructOf(fields), formats, nil
}

func isFalse(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

// field is one arg as a struct field: strings as string, integers as
// *int64 and booleans as *bool (so a required 0 or false is given, not
// missing), with the schema's rules as validate tags.
func (r *reader) field(at, formatTag, name string, s *jsonschema.Schema, raw map[string]any, required bool) (reflect.StructField, *policy.Format, error) {
	sf := reflect.StructField{Name: "F" + formatTag[strings.LastIndexByte(formatTag, '_')+1:]}
	desc := strings.TrimSpace(s.Description)
	if desc == "" {
		return sf, nil, r.errorf(at+".description", "required: the model needs to know what %s is", name)
	}
	rules := []string{"omitempty"}
	if required {
		rules = []string{"required"}
	}
	var format *policy.Format
	switch s.Type {
	case "string":
		sf.Type = reflect.TypeFor[string]()
		if s.MinLength != nil {
			rules = append(rules, "min="+strconv.Itoa(*s.MinLength))
		}
		if s.MaxLength != nil {
			rules = append(rules, "max="+strconv.Itoa(*s.MaxLength))
		}
		if len(s.Enum) > 0 {
			var words []string
			for _, e := range s.Enum {
				w, ok := e.(string)
				if !ok || !enumWord.MatchString(w) {
					return sf, nil, r.errorf(at+".enum", "%v: each value is one word of letters, digits and _ . : -", e)
				}
				words = append(words, w)
			}
			rules = append(rules, "oneof="+strings.Join(words, " "))
		}
		if s.Pattern != "" {
			re, err := regexp.Compile(s.Pattern)
			if err != nil {
				return sf, nil, r.errorf(at+".pattern", "not a regular expression: %v", err)
			}
			format = &policy.Format{Tag: formatTag, Pattern: re, Rule: fmt.Sprintf("must match the pattern %s", s.Pattern)}
			rules = append(rules, formatTag)
		}
	case "integer":
		sf.Type = reflect.TypeFor[*int64]()
		for k, v := range map[string]*float64{"min": s.Minimum, "max": s.Maximum} {
			if v == nil {
				continue
			}
			if *v != math.Trunc(*v) || math.Abs(*v) > 1e15 {
				return sf, nil, r.errorf(at+"."+map[string]string{"min": "minimum", "max": "maximum"}[k], "%v is not a whole number", *v)
			}
			rules = append(rules, fmt.Sprintf("%s=%d", k, int64(*v)))
		}
		slices.Sort(rules[1:])
	case "boolean":
		sf.Type = reflect.TypeFor[*bool]()
	default:
		return sf, nil, r.errorf(at+".type", "%q: an arg is a string, an integer (amounts in minor units, e.g. cents) or a boolean", s.Type)
	}
	if s.Type != "string" && (s.MinLength != nil || s.MaxLength != nil || s.Pattern != "" || len(s.Enum) > 0) {
		return sf, nil, r.errorf(at, "minLength, maxLength, pattern and enum are for strings")
	}
	if s.Type != "integer" && (s.Minimum != nil || s.Maximum != nil) {
		return sf, nil, r.errorf(at, "minimum and maximum are for integers")
	}
	tag := fmt.Sprintf(`json:%q validate:%q desc:%q`, name+",omitempty", strings.Join(rules, ","), desc)
	if s.Title != "" {
		tag += fmt.Sprintf(` title:%q`, s.Title)
	}
	if len(s.Default) > 0 {
		// What the upstream does when the arg is left out, shown to the
		// model as the schema's default (the chain fills nothing in).
		var def any
		_ = json.Unmarshal(s.Default, &def)
		text := fmt.Sprint(def)
		if n, ok := def.(float64); ok && n == math.Trunc(n) {
			text = strconv.FormatInt(int64(n), 10)
		}
		tag += fmt.Sprintf(` default:%q`, text)
	}
	switch raw["x-redact"] {
	case nil:
	case "pii":
		if s.Type != "string" {
			return sf, nil, r.errorf(at+".x-redact", "only a string is redacted")
		}
		tag += ` redact:"pii"`
	default:
		return sf, nil, r.errorf(at+".x-redact", "%v: the one redaction is pii", raw["x-redact"])
	}
	sf.Tag = reflect.StructTag(tag)
	return sf, format, nil
}

// enumWord is one value of an enum: the validator's oneof splits on
// spaces and reads quotes, so a value holds neither.
var enumWord = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// tagWord is s as a validate tag may hold it: lower-case letters, digits
// and _ (the validator panics on punctuation in a tag).
func tagWord(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '_'
	}, s)
}

// toolIndex is i of a path tools[i].
func toolIndex(at string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(at, "tools["), "]"))
	return n
}

// requiredArg reports whether the args type's field named name is required.
func requiredArg(t reflect.Type, name string) bool {
	for i := 0; i < t.NumField(); i++ {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n == name {
			return strings.HasPrefix(t.Field(i).Tag.Get("validate"), "required")
		}
	}
	return false
}

// fieldNames lists an args type's JSON names.
func fieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}
