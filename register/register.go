// Package register builds the action register: one entry per tool with its
// tier, decision, roles, limits, approver routing, the evidence an approval
// needs, whether it is idempotent, and for every check its calls pass,
// where the check is enforced and the tests that prove it. It is generated
// from the policy table, the tool registry and the guard-proof list
// (guards.json, which make prove runs), so it cannot drift from them.
package register

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
)

//go:generate go run ./gen

// guardsJSON is the guard-proof list: each guard, the checks it proves, the
// file it lives in, the text make prove removes, and the tests that must
// notice.
//
//go:embed guards.json
var guardsJSON []byte

// locationsJSON maps each guard to the function it sits in, generated from
// the source by go generate ./register (TestLocationsAreCurrent keeps it so).
//
//go:embed locations.json
var locationsJSON []byte

// Guard is one entry of the guard-proof list.
type Guard struct {
	Name    string   `json:"name"`
	Checks  []string `json:"checks"`
	File    string   `json:"file"`
	Test    string   `json:"test"`
	Guard   string   `json:"guard"`
	Removed string   `json:"removed"`
}

// Guards returns the guard-proof list.
func Guards() ([]Guard, error) {
	var gs []Guard
	if err := json.Unmarshal(guardsJSON, &gs); err != nil {
		return nil, fmt.Errorf("register/guards.json: %w", err)
	}
	return gs, nil
}

// Locations returns the function each guard sits in, by guard name.
func Locations() (map[string]string, error) {
	m := map[string]string{}
	if err := json.Unmarshal(locationsJSON, &m); err != nil {
		return nil, fmt.Errorf("register/locations.json: %w", err)
	}
	return m, nil
}

// tool is what a check's applicability is decided on.
type tool struct {
	spec     policy.ToolSpec
	row      policy.Row
	decision policy.Decision
	evidence []policy.EvidenceRule
	unit     policy.Unit
	// ladder is the pack's verification ladder, nil when it has none.
	ladder *policy.Verification
}

func (t tool) runs() bool     { return t.decision != policy.DecisionDeny }
func (t tool) approves() bool { return t.decision == policy.DecisionApprove }

func (t tool) escalates() bool {
	for _, a := range t.row.Approvers {
		if _, ok := t.row.EscalationFor(a.Role); ok {
			return true
		}
	}
	return false
}

func (t tool) limited(calls bool) bool {
	return slices.ContainsFunc(t.row.Limits, func(l policy.Limit) bool { return calls && l.MaxCalls > 0 || !calls && l.MaxCents > 0 })
}

// Check is one control: what it guarantees and which tools' calls pass it.
type Check struct {
	ID   string `json:"id"`
	What string `json:"what"`
	// applies says whether a tool's calls pass this check; nil for the
	// deployment's checks, which guard every tool alike.
	applies func(tool) bool
}

// Catalogue is every check the register knows, in the order of the chain.
var Catalogue = []Check{
	{"chain.registered", "step 0: only a registered tool runs (unknown_tool)", func(tool) bool { return true }},
	{"chain.not_denied", "step 1: a deny row never runs (tool_denied)", func(tool) bool { return true }},
	{"chain.tier_floor", "the risk tier's floor: a row may raise the decision, never lower it", func(tool) bool { return true }},
	{"chain.role", "step 2: a well-formed session whose role the row lists (role)", tool.runs},
	{"chain.args", "step 3: args decoded strictly and validated (invalid_arguments)", tool.runs},
	{"chain.credential", "step 4: a credential when the tool runs as the person (credential_unavailable); a signed-out call waits for a sign-in", func(t tool) bool {
		return t.runs() && t.spec.RequiresCredential
	}},
	{"chain.resource_scope", "step 5: the resource the args name (or the session's own, filled in) is one the session holds (resource_scope)", func(t tool) bool {
		return t.runs() && t.spec.Resource.Kind != ""
	}},
	{"chain.hard_limit", "step 6: the dry run's value within the hard limit (over_limit)", func(t tool) bool { return t.runs() && t.row.HardLimitCents > 0 }},
	{"limits.calls", "step 7: calls per window, counted from the audit log (rate_limit)", func(t tool) bool { return t.runs() && t.limited(true) }},
	{"limits.spend", "step 7: value per window, counted from the audit log (rate_limit)", func(t tool) bool { return t.runs() && t.limited(false) }},
	{"limits.admission", "admission counts and reserves the limits under a lock per bucket; only calls that ran nothing upstream free budget", func(t tool) bool {
		return t.runs() && (len(t.row.Limits) > 0 || t.approves())
	}},
	{"chain.recorded", "the verdict and spec facts are recorded in history: a policy change never changes a call in flight", func(tool) bool { return true }},
	{"run.one_id_one_call", "one workflow ID is one call: a duplicate attaches, a reuse for something else is idempotency_conflict", tool.runs},
	{"run.as_person", "runs as the signed-in person: the credential is bound to its sign-in, the token never leaves the activity", func(t tool) bool {
		return t.runs() && t.spec.RequiresCredential
	}},
	{"run.requester_tier", "the requester's sign-in reaches the row's tier, and is no older than its maximum age when the call is asked (step_up_required)", func(t tool) bool { return t.runs() && t.row.RequesterTier != "" }},
	{"run.verified_tier", "the caller holds the row's tier of its pack's ladder in this conversation, earned only through the pack's verification tools: checked by admission and again before anything is sent upstream; a row that names none needs the strictest; a lockout refuses every tier above the weakest (step_up_required)", func(t tool) bool {
		return t.runs() && t.ladder != nil
	}},
	{"run.verification", "a verification tool's factor is sealed by the front door and opened once, so no history, log, audit row or result holds it; each attempt is spent before the upstream is asked; a spent budget locks the person out beyond the call, and the right factor then grants nothing until a person hands them back", func(t tool) bool {
		return t.runs() && t.spec.Verifies != nil
	}},
	{"run.pinned", "a team's MCP server's tool runs only while the server defines it as an operator accepted it (its pin): a changed description, schema or hint is refused unsent until a person accepts it again", func(t tool) bool {
		return t.runs() && t.spec.MCP != nil
	}},
	{"run.once", "not idempotent: one attempt, never retried", func(t tool) bool { return t.runs() && !t.spec.Idempotent }},
	{"run.sanitized", "args and results pass the sanitizer before the model, history, audit row or a log", tool.runs},
	{"audit.every_decision", "every decision is one audit row, written once", func(tool) bool { return true }},
	{"audit.append_only", "the audit log is append-only for every service's role", func(tool) bool { return true }},
	{"approval.role", "a decision counts only from the routed role (or the one it escalated to)", tool.approves},
	{"approval.resources", "a decision counts only from an approver who holds the action's resource", tool.approves},
	{"approval.signed", "a decision counts only signed by a trusted key, for this card and run, within its life", tool.approves},
	{"approval.hash", "a decision counts only with the card's args hash", tool.approves},
	{"approval.evidence", "an approval counts only with the approver's sign-in as strong and fresh as the card needs; a rejection needs a trusted sign-in, never the step-up", tool.approves},
	{"approval.unexpired", "a decision counts only while the card is unexpired", tool.approves},
	{"approval.once", "a decision after the end changes nothing", tool.approves},
	{"approval.exact_args", "the approved call runs exactly the stored args (hash-checked in the activity)", tool.approves},
	{"approval.hostile_signals", "hostile decisions are refused and audited; the card locks after 20 signed ones, and no unsigned one spends its budget", tool.approves},
	{"approval.one_per_intent", "one card per intent (already_pending)", tool.approves},
	{"approval.note", "a rejection's note reaches the model", tool.approves},
	{"approval.webhook", "approvers are told of each card by a signed webhook", tool.approves},
	{"approval.quorum", "above the quorum's value, several distinct people (issuer and subject, or user ID); the requester never counts", func(t tool) bool { return t.approves() && len(t.row.Quorum) > 0 }},
	{"approval.edit", "an edit runs the chain again and puts the card up as a new version; the old hash is refused", func(t tool) bool {
		return t.approves() && len(t.row.Editable) > 0
	}},
	{"approval.rules", "a card goes to the first approver whose bound and rule (CEL) hold; a rule that cannot be evaluated refuses the call", func(t tool) bool {
		return t.approves() && slices.ContainsFunc(t.row.Approvers, func(a policy.Approver) bool { return a.When != "" })
	}},
	{"approval.escalation", "an unanswered card is also offered one role up", func(t tool) bool { return t.approves() && t.escalates() }},
	{"deployment.defaults", "no demo secret, open endpoint or public listener outside dev mode; servers time out slow clients", nil},
	{"deployment.sessions", "card UI sessions end at sign-out and lockout; a sign-in returns only to the card UI's own pages; failed sign-ins are throttled", nil},
	{"deployment.codec", "the codec endpoint demands its token", nil},
	{"deployment.mcp", "the MCP server refuses batches, cross-site requests and another person's session", nil},
	{"deployment.worker", "a stopping worker lets running activities finish", nil},
	{"deployment.packs", "a pack that does not hold together stops every process at start, naming the pack and the tool; what the model is told of an upstream names the tool's own system", nil},
	{"deployment.upstream", "the demo upstream tells an outage from a wrong secret", nil},
	{"deployment.mcp_upstreams", "a pack's MCP tools are its servers' as accepted: a row narrows args and never widens them, a server's hints raise a tier and never lower it, a schema toolgate cannot check refuses the tool, and a stdio server gets none of toolgate's environment", nil},
	{"deployment.temporal_config", "every process reaches Temporal through Temporal's client configuration (TLS, API key, namespace, profiles)", nil},
	{"deployment.audit_views", "the insights page and stories are for auditors, read through a login that can only read the audit log", nil},
}

// Register is the action register.
type Register struct {
	Tools []Entry `json:"tools"`
	// Deployment are the checks that guard every tool alike.
	Deployment []CheckEntry `json:"deployment"`
}

// Entry is one tool's line in the register.
type Entry struct {
	Tool               string          `json:"tool"`
	Tier               policy.Tier     `json:"tier"`
	Decision           policy.Decision `json:"decision"`
	Roles              []policy.Role   `json:"roles"`
	Idempotent         bool            `json:"idempotent"`
	RequiresCredential bool            `json:"requiresCredential"`
	HardLimit          string          `json:"hardLimit,omitempty"`
	Limits             []string        `json:"limits,omitempty"`
	Routing            []string        `json:"routing,omitempty"`
	Evidence           []string        `json:"evidence,omitempty"`
	Quorum             []string        `json:"quorum,omitempty"`
	Editable           []string        `json:"editable,omitempty"`
	Checks             []CheckEntry    `json:"checks"`
}

// CheckEntry is one check with where it is enforced and what proves it.
type CheckEntry struct {
	ID       string     `json:"id"`
	What     string     `json:"what"`
	Enforced []Location `json:"enforced"`
	Proofs   []Proof    `json:"proofs"`
}

// Location is a guard's place in the source.
type Location struct {
	File string `json:"file"`
	Func string `json:"func"`
}

func (l Location) String() string { return l.File + " " + l.Func }

// Proof is a guard and the tests that fail when it is removed (make prove).
type Proof struct {
	Guard string `json:"guard"`
	Test  string `json:"test"`
}

// Build generates the register from the policy, the guard-proof list and
// the guards' locations. It fails if a check a tool's calls pass has no
// guard proving it, or a guard names a check nobody knows.
func Build(p *policy.Policy, guards []Guard, locations map[string]string) (Register, error) {
	byCheck := map[string][]Guard{}
	var problems []string
	for _, g := range guards {
		if len(g.Checks) == 0 {
			problems = append(problems, fmt.Sprintf("guard %q proves no check", g.Name))
		}
		for _, id := range g.Checks {
			if !slices.ContainsFunc(Catalogue, func(c Check) bool { return c.ID == id }) {
				problems = append(problems, fmt.Sprintf("guard %q names an unknown check %q", g.Name, id))
			}
			byCheck[id] = append(byCheck[id], g)
		}
	}
	entry := func(c Check) CheckEntry {
		e := CheckEntry{ID: c.ID, What: c.What}
		for _, g := range byCheck[c.ID] {
			loc := Location{File: g.File, Func: locations[g.Name]}
			if !slices.Contains(e.Enforced, loc) {
				e.Enforced = append(e.Enforced, loc)
			}
			e.Proofs = append(e.Proofs, Proof{Guard: g.Name, Test: g.Test})
		}
		return e
	}
	var r Register
	for _, name := range p.Names() {
		spec, _ := p.Spec(name)
		row, _ := p.Row(name)
		d, _ := p.PackOf(name)
		t := tool{spec: spec, row: row, decision: p.Effective(name), evidence: p.EvidenceRules(name), unit: d.Unit, ladder: d.Verification}
		e := describe(t)
		for _, c := range Catalogue {
			if c.applies == nil || !c.applies(t) {
				continue
			}
			ce := entry(c)
			if len(ce.Proofs) == 0 {
				problems = append(problems, fmt.Sprintf("%s: no guard proves %q (%s); add one to register/guards.json and see its tests fail without it", name, c.ID, c.What))
			}
			e.Checks = append(e.Checks, ce)
		}
		r.Tools = append(r.Tools, e)
	}
	for _, c := range Catalogue {
		if c.applies == nil {
			ce := entry(c)
			if len(ce.Proofs) == 0 {
				problems = append(problems, fmt.Sprintf("the deployment: no guard proves %q (%s)", c.ID, c.What))
			}
			r.Deployment = append(r.Deployment, ce)
		}
	}
	if len(problems) > 0 {
		return r, fmt.Errorf("the action register is incomplete:\n  %s", strings.Join(problems, "\n  "))
	}
	return r, nil
}

// Default builds the register of a deployment's packs.
func Default(p *policy.Policy) (Register, error) {
	gs, err := Guards()
	if err != nil {
		return Register{}, err
	}
	locs, err := Locations()
	if err != nil {
		return Register{}, err
	}
	return Build(p, gs, locs)
}

func describe(t tool) Entry {
	e := Entry{Tool: t.spec.Name, Tier: t.spec.Tier, Decision: t.decision, Roles: t.row.Roles, Idempotent: t.spec.Idempotent,
		RequiresCredential: t.spec.RequiresCredential, Editable: t.row.Editable}
	if t.row.HardLimitCents > 0 {
		e.HardLimit = t.unit.Format(t.row.HardLimitCents) + " a call"
	}
	for _, l := range t.row.Limits {
		var caps []string
		if l.MaxCalls > 0 {
			caps = append(caps, fmt.Sprintf("%d calls", l.MaxCalls))
		}
		if l.MaxCents > 0 {
			caps = append(caps, t.unit.Format(l.MaxCents))
		}
		e.Limits = append(e.Limits, fmt.Sprintf("%s per %s per %s", strings.Join(caps, " and "), l.Scope, l.Window))
	}
	if !t.approves() {
		return e
	}
	from := int64(0)
	for _, a := range t.row.Approvers {
		when := ""
		if a.When != "" {
			when = " when " + a.When
		}
		if a.UpToCents == 0 {
			e.Routing = append(e.Routing, fmt.Sprintf("%s above %s%s", a.Role, t.unit.Format(from), when))
			continue
		}
		e.Routing = append(e.Routing, fmt.Sprintf("%s up to %s%s", a.Role, t.unit.Format(a.UpToCents), when))
		if a.When == "" {
			from = a.UpToCents
		}
	}
	for _, a := range t.row.Approvers {
		if up, ok := t.row.EscalationFor(a.Role); ok {
			e.Routing = append(e.Routing, fmt.Sprintf("unanswered: %s → %s", a.Role, up))
		}
	}
	for _, q := range t.row.Quorum {
		e.Quorum = append(e.Quorum, fmt.Sprintf("%d distinct approvers above %s", q.Approvals, t.unit.Format(q.AboveCents)))
	}
	rules := t.evidence
	from = 0
	for _, r := range rules {
		bound := "above " + t.unit.Format(from)
		if r.UpToCents > 0 {
			bound, from = "up to "+t.unit.Format(r.UpToCents), r.UpToCents
		}
		e.Evidence = append(e.Evidence, fmt.Sprintf("%s: %s sign-in within %s", bound, r.ACR, span(r.MaxAge)))
	}
	if len(rules) == 0 {
		s := policy.StrictestEvidence
		e.Evidence = []string{fmt.Sprintf("any value: %s sign-in within %s (the strictest: no rule of its own)", s.ACR, span(s.MaxAge()))}
	}
	return e
}

// span says a whole number of hours or minutes in words.
func span(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return fmt.Sprintf("%d minutes", d/time.Minute)
}
