// Package engines expresses toolgate's policy table in three other ways —
// a hand-written floor (a map and ordered ifs), Rego for OPA, and Cedar —
// so the decision can be compared and benchmarked against policy.Decide.
// The models cover the shipped table: each row has at most one limit.
package engines

import (
	"context"
	"fmt"
	"slices"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/toolgate/toolgate/packs/mangrove"
	tg "github.com/toolgate/toolgate/policy"
)

// Input is one call as every engine sees it, after decoding and session fill.
type Input struct {
	Tool       string
	Role       string
	Credential bool
	Stores     []int64
	Store      int64 // 0 when the tool names no store
	Value      int64
	Calls      int
	Cents      int64
}

type row struct {
	decision  string // effective
	roles     []string
	hardLimit int64
	maxCalls  int
	maxCents  int64
	scoped    bool
}

// shipped is the Mangrove pack's policy, the table the engines are compared on.
var shipped = func() *tg.Policy {
	p, err := tg.New(mangrove.Policy())
	if err != nil {
		panic(err)
	}
	return p
}()

func rows() map[string]row {
	p := shipped
	out := map[string]row{}
	for _, r := range mangrove.Table {
		spec, _ := p.Spec(r.Tool)
		x := row{decision: string(p.Effective(r.Tool)), hardLimit: r.HardLimitCents, scoped: scoped(spec)}
		for _, role := range r.Roles {
			x.roles = append(x.roles, string(role))
		}
		if len(r.Limits) > 0 {
			x.maxCalls, x.maxCents = r.Limits[0].MaxCalls, r.Limits[0].MaxCents
		}
		out[r.Tool] = x
	}
	return out
}

func scoped(spec tg.ToolSpec) bool {
	for _, f := range []string{"storeId"} {
		if s := shipped.Schema(spec.Args)["properties"].(map[string]any); s[f] != nil {
			return true
		}
	}
	return false
}

// Floor is the least a decision can cost: a map lookup and ordered ifs.
type Floor struct{ rows map[string]row }

// NewFloor builds the floor from the shipped table.
func NewFloor() *Floor { return &Floor{rows: rows()} }

// Decide returns the code of the first failing step, or the row's decision.
func (f *Floor) Decide(in *Input) (string, tg.Code) {
	r, ok := f.rows[in.Tool]
	switch {
	case !ok:
		return "deny", tg.CodeUnknownTool
	case r.decision == "deny":
		return "deny", tg.CodeToolDenied
	case !slices.Contains(r.roles, in.Role):
		return "deny", tg.CodeRole
	case !in.Credential:
		return "deny", tg.CodeCredentialUnavailable
	case r.scoped && !slices.Contains(in.Stores, in.Store):
		return "deny", tg.CodeResourceScope
	case r.hardLimit > 0 && in.Value > r.hardLimit:
		return "deny", tg.CodeOverLimit
	case r.maxCalls > 0 && in.Calls+1 > r.maxCalls, r.maxCents > 0 && in.Cents+in.Value > r.maxCents:
		return "deny", tg.CodeRateLimit
	}
	return r.decision, tg.CodeOK
}

// RegoPolicy is the chain in Rego; the table is passed as data.
const RegoPolicy = `package toolgate

row := data.rows[input.tool]

result := {"decision": "deny", "code": "unknown_tool"} if {
	not data.rows[input.tool]
} else := {"decision": "deny", "code": "tool_denied"} if {
	row.decision == "deny"
} else := {"decision": "deny", "code": "role"} if {
	not input.role in row.roles
} else := {"decision": "deny", "code": "credential_unavailable"} if {
	not input.credential
} else := {"decision": "deny", "code": "resource_scope"} if {
	row.scoped
	not input.store in input.stores
} else := {"decision": "deny", "code": "over_limit"} if {
	row.hard_limit > 0
	input.value > row.hard_limit
} else := {"decision": "deny", "code": "rate_limit"} if {
	row.max_calls > 0
	input.calls + 1 > row.max_calls
} else := {"decision": "deny", "code": "rate_limit"} if {
	row.max_cents > 0
	input.cents + input.value > row.max_cents
} else := {"decision": row.decision, "code": "ok"}
`

// Rego is the Rego version, prepared once.
type Rego struct{ q rego.PreparedEvalQuery }

// NewRego prepares the query with the shipped table as data.
func NewRego(ctx context.Context) (*Rego, error) {
	data := map[string]any{}
	for name, r := range rows() {
		data[name] = map[string]any{"decision": r.decision, "roles": r.roles, "hard_limit": r.hardLimit,
			"max_calls": r.maxCalls, "max_cents": r.maxCents, "scoped": r.scoped}
	}
	q, err := rego.New(rego.Query("data.toolgate.result"), rego.Module("toolgate.rego", RegoPolicy),
		rego.Data(map[string]any{"rows": data})).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("rego: %w", err)
	}
	return &Rego{q: q}, nil
}

// Decide evaluates one call.
func (r *Rego) Decide(ctx context.Context, in *Input) (string, tg.Code, error) {
	stores := make([]any, len(in.Stores))
	for i, s := range in.Stores {
		stores[i] = s
	}
	rs, err := r.q.Eval(ctx, rego.EvalInput(map[string]any{"tool": in.Tool, "role": in.Role, "credential": in.Credential,
		"stores": stores, "store": in.Store, "value": in.Value, "calls": in.Calls, "cents": in.Cents}))
	if err != nil || len(rs) == 0 {
		return "", "", fmt.Errorf("rego: %v (%d results)", err, len(rs))
	}
	m := rs[0].Expressions[0].Value.(map[string]any)
	return m["decision"].(string), tg.Code(m["code"].(string)), nil
}

// CedarPolicy is the chain in Cedar: one forbid per step, in chain order,
// and a permit. The first forbid that applies names the code.
const CedarPolicy = `
forbid (principal, action, resource) unless { resource has decision };
forbid (principal, action, resource) when { resource.decision == "deny" };
forbid (principal, action, resource) unless { resource.roles.contains(principal.role) };
forbid (principal, action, resource) unless { principal.credential };
forbid (principal, action, resource) when { resource.scoped && !principal.stores.contains(context.store) };
forbid (principal, action, resource) when { resource.hard_limit > 0 && context.value > resource.hard_limit };
forbid (principal, action, resource) when { resource.max_calls > 0 && context.calls + 1 > resource.max_calls };
forbid (principal, action, resource) when { resource.max_cents > 0 && context.cents + context.value > resource.max_cents };
permit (principal, action == Action::"call", resource);
`

var cedarCodes = []tg.Code{tg.CodeUnknownTool, tg.CodeToolDenied, tg.CodeRole, tg.CodeCredentialUnavailable,
	tg.CodeResourceScope, tg.CodeOverLimit, tg.CodeRateLimit, tg.CodeRateLimit}

// Cedar is the Cedar version with the table as entities.
type Cedar struct {
	ps       *cedar.PolicySet
	entities types.EntityMap
	decision map[string]string
	ids      map[types.PolicyID]int
}

// NewCedar parses the policies and builds the tool entities.
func NewCedar() (*Cedar, error) {
	ps, err := cedar.NewPolicySetFromBytes("toolgate.cedar", []byte(CedarPolicy))
	if err != nil {
		return nil, fmt.Errorf("cedar: %w", err)
	}
	c := &Cedar{ps: ps, entities: types.EntityMap{}, decision: map[string]string{}, ids: map[types.PolicyID]int{}}
	for i := range cedarCodes {
		c.ids[types.PolicyID(fmt.Sprintf("policy%d", i))] = i
	}
	for name, r := range rows() {
		roles := make([]types.Value, len(r.roles))
		for i, role := range r.roles {
			roles[i] = types.String(role)
		}
		uid := types.NewEntityUID("Tool", types.String(name))
		c.entities[uid] = types.Entity{UID: uid, Attributes: types.NewRecord(types.RecordMap{
			"decision": types.String(r.decision), "roles": types.NewSet(roles...), "hard_limit": types.Long(r.hardLimit),
			"max_calls": types.Long(r.maxCalls), "max_cents": types.Long(r.maxCents), "scoped": types.Boolean(r.scoped),
		})}
		c.decision[name] = r.decision
	}
	return c, nil
}

// Decide authorizes one call.
func (c *Cedar) Decide(in *Input) (string, tg.Code) {
	stores := make([]types.Value, len(in.Stores))
	for i, s := range in.Stores {
		stores[i] = types.Long(s)
	}
	user := types.NewEntityUID("User", "u")
	entities := withUser{user: types.Entity{UID: user, Attributes: types.NewRecord(types.RecordMap{
		"role": types.String(in.Role), "credential": types.Boolean(in.Credential), "stores": types.NewSet(stores...)})}, tools: c.entities}
	dec, diag := cedar.Authorize(c.ps, entities, cedar.Request{
		Principal: user, Action: types.NewEntityUID("Action", "call"), Resource: types.NewEntityUID("Tool", types.String(in.Tool)),
		Context: types.NewRecord(types.RecordMap{"store": types.Long(in.Store), "value": types.Long(in.Value),
			"calls": types.Long(in.Calls), "cents": types.Long(in.Cents)}),
	})
	if dec == cedar.Allow {
		return c.decision[in.Tool], tg.CodeOK
	}
	first := len(cedarCodes)
	for _, r := range diag.Reasons {
		if i, ok := c.ids[r.PolicyID]; ok && i < first {
			first = i
		}
	}
	for _, e := range diag.Errors { // a missing tool entity errors its later forbids
		if i, ok := c.ids[e.PolicyID]; ok && i == 0 && first > 0 {
			first = 0
		}
	}
	if first == len(cedarCodes) {
		return "deny", tg.CodeUnknownTool
	}
	return "deny", cedarCodes[first]
}

// withUser serves the request's user and the static tool entities without
// copying the map per call.
type withUser struct {
	user  types.Entity
	tools types.EntityMap
}

func (w withUser) Get(uid types.EntityUID) (types.Entity, bool) {
	if uid == w.user.UID {
		return w.user, true
	}
	e, ok := w.tools[uid]
	return e, ok
}
