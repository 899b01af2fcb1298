// Package pack is what a Go pack brings beyond its policy.Pack: the code a
// file cannot say. Today that is a dry run per approve tool, which reads the
// pack's own system as the signed-in person and tells the approver what
// would run and what it is worth. It holds no Temporal and no database: a
// pack depends on this package and policy, never on the engine's insides.
package pack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/policy"
)

// Pack is one team's tools and tables (Policy, a policy.Pack), the dry runs of the tools
// whose spec says DryRun, and the shapers of the tools whose answers are
// reshaped for the model, each by tool name.
type Pack struct {
	Policy     policy.Pack
	Previewers map[string]Previewer
	Shapers    map[string]Shaper
	// Servers are the team's own MCP servers the pack's MCP tools
	// (policy.ToolSpec.MCP) run on, each by its name.
	Servers []mcpupstream.Server
}

// Check refuses a pack whose dry runs and specs disagree: a DryRun tool
// without a previewer, or a previewer for a tool that is not a DryRun tool
// of this pack.
func (p Pack) Check() error {
	dry := map[string]bool{}
	for _, t := range p.Policy.Tools {
		if t.DryRun {
			dry[t.Name] = true
			if p.Previewers[t.Name] == nil && (t.MCP == nil || t.MCP.Preview == nil) {
				return fmt.Errorf("pack %s: tool %q has DryRun set but no previewer", p.Policy.Name, t.Name)
			}
		}
	}
	for name := range p.Previewers {
		if !dry[name] {
			return fmt.Errorf("pack %s: a previewer is given for %q, which is not one of its DryRun tools", p.Policy.Name, name)
		}
	}
	servers := map[string]bool{}
	for _, s := range p.Servers {
		if servers[s.Name] {
			return fmt.Errorf("pack %s: two MCP servers are named %q", p.Policy.Name, s.Name)
		}
		servers[s.Name] = true
	}
	for _, t := range p.Policy.Tools {
		if t.MCP != nil && !servers[t.MCP.Server] {
			return fmt.Errorf("pack %s: tool %q runs on the MCP server %q, which the pack does not name", p.Policy.Name, t.Name, t.MCP.Server)
		}
	}
	for name, s := range p.Shapers {
		if s == nil || !slices.ContainsFunc(p.Policy.Tools, func(t policy.ToolSpec) bool { return t.Name == name }) {
			return fmt.Errorf("pack %s: a shaper is given for %q, which is not one of its tools", p.Policy.Name, name)
		}
	}
	return nil
}

// Shaper turns a tool's upstream answer into the result the model reads:
// a re-ranking by the call's own args, a cut, a note on what the list is.
// It runs in the call's activity on the answer as received, before the
// sanitizer redacts and caps it (TOOL_MAX_RESULT_CHARS), so what it keeps
// is what a record-boundary cut then works on. It must be a pure function
// of the args (canonical, session filled) and the answer; an error means
// the answer did not read, and is reported as the upstream unavailable.
type Shaper func(args json.RawMessage, answer []byte) ([]byte, error)

// Previewer is a tool's dry run. It must change nothing: it runs before a
// person has decided, and again when an approver edits the card.
type Previewer func(ctx context.Context, req PreviewRequest, sys System) (Preview, error)

// PreviewRequest is the call to preview: the tool, its canonical args as
// authorized (session filled) and the resource it acts on (Kind "" when
// none).
type PreviewRequest struct {
	Tool     string
	Args     json.RawMessage
	Resource policy.ResourceRef
}

// Preview is what a dry run decided.
type Preview struct {
	// Action is exactly what runs if the card is approved: the args with the
	// dry run's choices filled in.
	Action json.RawMessage
	// ValueCents is the call's value, judged against the row's hard limit,
	// spend limits and approver routing.
	ValueCents int64
	// CardText is the sentence the approver decides on, from the preview alone.
	CardText string
	// Shortfall, when set, says why nothing can be planned, though the call
	// was valued: the call ends without a card.
	Shortfall string
}

// System is the pack's upstream, reached as the signed-in person with the
// short-lived token of the call's credential.
type System interface {
	// Get reads path (with its query) and returns the answer's body; a
	// refusal or an outage comes back as the engine's own error, to be
	// returned as is.
	Get(ctx context.Context, path string) ([]byte, error)
}

// ErrUnavailable marks a dry run that could not be made now (its system's
// answer did not match the request, say): the engine may try it again.
var ErrUnavailable = errors.New("the dry run could not be made")

// Unavailable is an ErrUnavailable with what went wrong.
func Unavailable(why string) error { return fmt.Errorf("%w: %s", ErrUnavailable, why) }
