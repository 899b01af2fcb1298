package policy

import (
	"encoding/json"
	"reflect"

	"github.com/toolgate/toolgate/toolargs"
)

// Definition is a tool as offered to a model: its name, when to use it, and
// the JSON Schema of its arguments.
type Definition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Tier        Tier           `json:"tier"`
	Idempotent  bool           `json:"idempotent"`
}

// Offered lists, in registry order, the tools a role may be offered: those
// whose row names the role and whose effective decision is not deny.
func (p *Policy) Offered(role Role) []string {
	var out []string
	for _, n := range p.names {
		if p.Effective(n) != DecisionDeny && containsRole(p.rows[n].Roles, role) {
			out = append(out, n)
		}
	}
	return out
}

// DefinitionsFor returns the definitions of the tools a role may be offered.
func (p *Policy) DefinitionsFor(role Role) []Definition {
	var out []Definition
	for _, n := range p.Offered(role) {
		s := p.specs[n]
		out = append(out, Definition{Name: s.Name, Description: s.Description, InputSchema: p.Schema(s.Args), Tier: s.Tier, Idempotent: s.Idempotent})
	}
	return out
}

func containsRole(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// Schema derives the JSON Schema of an args struct a model is offered
// (toolargs.Codec.Schema), a pack's format as its pattern.
func (p *Policy) Schema(t reflect.Type) map[string]any { return p.codec.Schema(t) }

// Decode strictly decodes raw args into a new value of the tool's args type
// and validates it (toolargs.Codec.Decode): a refusal is a *toolargs.ArgError
// whose text names the field, the rule and the allowed values.
func (p *Policy) Decode(spec ToolSpec, raw json.RawMessage) (any, error) {
	return p.codec.Decode(toolargs.Tool{Name: spec.Name, Args: spec.Args}, raw)
}

// RedactPII returns args with the free-text fields tagged redact:"pii"
// passed through the sanitizer (toolargs.RedactPII), for clients to apply
// before they start a call; args of a tool it does not know come back
// unchanged.
func (p *Policy) RedactPII(tool string, args json.RawMessage) json.RawMessage {
	spec, ok := p.Spec(tool)
	if !ok {
		return args
	}
	return toolargs.RedactPII(toolargs.Tool{Name: spec.Name, Args: spec.Args}, args)
}
