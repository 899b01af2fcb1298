// Package policy decides, deterministically, whether a tool call may run.
// It is pure Go: no Temporal, no I/O, no clock. Usage counts and dry-run
// values are inputs.
package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/toolargs"
)

// Policy is the tools of one or more packs (Pack) paired with their
// policy tables: what a deployment gates. New builds it and refuses a pack
// that does not hold together; nothing else registers a tool.
type Policy struct {
	specs map[string]ToolSpec
	rows  map[string]Row
	names []string
	// entries joins spec, row and effective decision for one lookup per
	// call, found by the name's length first (a string compare, not a hash).
	entries map[string]*entry
	byLen   [][]*entry
	// packs are the packs, in order; pack maps a tool to its pack.
	packs []Pack
	pack  map[string]int
	// kinds are every pack's resource kinds' names, in pack order.
	kinds []string
	// evidence is every pack's evidence table, in pack order.
	evidence []EvidenceRule
	// formats are the packs' own validate tags, and codec the args codec
	// that knows them.
	formats map[string]Format
	codec   *toolargs.Codec
}

type entry struct {
	spec     ToolSpec
	row      Row
	decision Decision
	// evidence holds EvidenceFor's answers for this tool, worked out once:
	// the rules in order, then the strictest (steps4to6 hands out pointers
	// to them; Check copies).
	evidence []evidenceAt
	// denied is step 1's refusal, worded once: a refusal need not allocate.
	denied string
	// unit writes the tool's values (its pack's Unit).
	unit Unit
	// value is the index of the ValueArg field, nil when none.
	value []int
	// routes are the row's approvers' compiled When rules (nil where none).
	routes []*route
	// resource is step 5's plan, nil when the tool names no resource, and
	// kind its kind's name ("" then).
	resource *resourcePlan
	kind     string
	// verified is what the row needs of the caller, nil when its pack
	// has no ladder.
	verified *VerifiedNeed
}

type evidenceAt struct {
	upToCents int64
	req       Requirement
}

func (e *entry) evidenceFor(valueCents int64) *Requirement {
	for i := range e.evidence {
		if e.evidence[i].upToCents == 0 || valueCents <= e.evidence[i].upToCents {
			return &e.evidence[i].req
		}
	}
	return &e.evidence[len(e.evidence)-1].req
}

// lookup finds a registered tool's entry; only exact names match.
func (p *Policy) lookup(tool string) *entry {
	if len(tool) >= len(p.byLen) {
		return nil
	}
	for _, e := range p.byLen[len(tool)] {
		if e.spec.Name == tool {
			return e
		}
	}
	return nil
}

// New builds a policy from packs. Every tool needs exactly one row and
// every row a tool; a tool name is one pack's; a row whose decision is
// unknown, a row naming an undeclared role, a declared role no row names
// and a tool that may run without an upstream route are refused, each
// with the pack and the tool it is about.
func New(packs ...Pack) (*Policy, error) {
	p := &Policy{specs: map[string]ToolSpec{}, rows: map[string]Row{}, pack: map[string]int{}, formats: map[string]Format{SealedTag: sealedFormat}}
	if len(packs) == 0 {
		return nil, fmt.Errorf("policy: no pack; a deployment gates the tools of at least one")
	}
	names := map[string]bool{}
	roles := map[Role]string{}
	kinds := map[string]string{}
	for i, d := range packs {
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		if names[d.Name] {
			return nil, fmt.Errorf("policy: pack %q is loaded twice", d.Name)
		}
		names[d.Name] = true
		for _, f := range d.Formats {
			if _, dup := p.formats[f.Tag]; dup {
				return nil, fmt.Errorf("policy: pack %s: format %q is defined by another pack too", d.Name, f.Tag)
			}
			p.formats[f.Tag] = f
		}
		for _, s := range d.Tools {
			if s.Name == "" || s.Args == nil {
				return nil, fmt.Errorf("policy: pack %s: tool %q needs a name and an args type", d.Name, s.Name)
			}
			if j, dup := p.pack[s.Name]; dup {
				if j == i {
					return nil, fmt.Errorf("policy: pack %s: tool %q registered twice", d.Name, s.Name)
				}
				return nil, fmt.Errorf("policy: pack %s: tool %q is already pack %s's", d.Name, s.Name, packs[j].Name)
			}
			if s.Tier.Floor() == DecisionDeny && s.Tier != "" {
				return nil, fmt.Errorf("policy: pack %s: tool %q has unknown risk tier %q", d.Name, s.Name, s.Tier)
			}
			p.specs[s.Name], p.pack[s.Name] = s, i
			p.names = append(p.names, s.Name)
		}
		for _, r := range d.Rows {
			if j, ok := p.pack[r.Tool]; !ok || j != i {
				return nil, fmt.Errorf("policy: pack %s: row for unregistered tool %q", d.Name, r.Tool)
			}
			if r.RequesterTier != "" && acrRank(r.RequesterTier) < 0 {
				return nil, fmt.Errorf("policy: pack %s: row %q needs requester tier %q, which is not one of %v", d.Name, r.Tool, r.RequesterTier, ACRLevels)
			}
			if _, dup := p.rows[r.Tool]; dup {
				return nil, fmt.Errorf("policy: pack %s: tool %q has two rows", d.Name, r.Tool)
			}
			switch r.Decision {
			case DecisionAllow, DecisionApprove, DecisionDeny:
			default:
				return nil, fmt.Errorf("policy: pack %s: tool %q has unknown decision %q", d.Name, r.Tool, r.Decision)
			}
			p.rows[r.Tool] = r
		}
		p.evidence = append(p.evidence, d.Evidence...)
		// A session's role is the deployment's: one role in two packs would
		// give one pack's tools to the other's people.
		for _, r := range d.Roles {
			if other, dup := roles[r.Name]; dup {
				return nil, fmt.Errorf("policy: the role %q is declared by packs %s and %s; a role is one pack's", r.Name, other, d.Name)
			}
			roles[r.Name] = d.Name
		}
		// A kind is one pack's too: an account held for one pack's tools
		// must not act on another's, nor its claim be taken over.
		for _, k := range d.Resources {
			if other, dup := kinds[k.Name]; dup {
				return nil, fmt.Errorf("policy: the resource kind %q is declared by packs %s and %s; a kind is one pack's", k.Name, other, d.Name)
			}
			kinds[k.Name] = d.Name
			p.kinds = append(p.kinds, k.Name)
		}
	}
	p.packs = packs
	p.codec = toolargs.New(p.formats)
	p.entries = map[string]*entry{}
	for _, n := range p.names {
		d := packs[p.pack[n]]
		if _, ok := p.rows[n]; !ok {
			return nil, fmt.Errorf("policy: pack %s: tool %q has no policy row", d.Name, n)
		}
		e := &entry{spec: p.specs[n], row: p.rows[n], decision: Stricter(p.rows[n].Decision, p.specs[n].Tier.Floor())}
		if e.decision != DecisionDeny && !e.spec.Runnable() {
			return nil, fmt.Errorf("policy: pack %s: tool %q may run but has no upstream route to run it", d.Name, n)
		}
		if e.spec.MCP != nil && e.spec.Route.Path != "" {
			return nil, fmt.Errorf("policy: pack %s: tool %q has both an upstream route and an MCP server's tool; a call goes to one", d.Name, n)
		}
		if err := e.spec.Receipt.Check(); err != nil {
			return nil, fmt.Errorf("policy: pack %s: tool %q has %w", d.Name, n, err)
		}
		if e.spec.Unavailable != "" && !e.spec.Idempotent {
			return nil, fmt.Errorf("policy: pack %s: tool %q says what to do when its upstream is down (Unavailable), but is not idempotent: the model of a write that may have run is told not to call again, whatever the tool says", d.Name, n)
		}
		if !e.spec.RequiresCredential && e.row.RequesterTier != "" {
			return nil, fmt.Errorf("policy: pack %s: the row of %q needs requester tier %q, but the tool runs as no one (RequiresCredential is false), so there is no sign-in to hold to it: set RequiresCredential or drop the tier", d.Name, n, e.row.RequesterTier)
		}
		for param, kind := range e.spec.Route.Session {
			if _, both := e.spec.Route.Query[param]; both || !slices.ContainsFunc(d.Resources, func(k ResourceKind) bool { return k.Name == kind }) {
				return nil, fmt.Errorf("policy: pack %s: tool %q fills the query parameter %q from the session's %q, which is not one of the pack's resource kinds or is also filled from the args", d.Name, n, param, kind)
			}
		}
		if r := e.spec.Route; r.Path != "" && r.Method != "GET" && e.spec.Idempotent && !r.Dedupes {
			return nil, fmt.Errorf("policy: pack %s: tool %q is idempotent, but a %s is sent again after a timeout or a 5xx, which runs it twice upstream unless the upstream runs one Idempotency-Key once: say so (Route.Dedupes, keyed) or make it not idempotent", d.Name, n, r.Method)
		}
		if r := e.spec.Route; r.Dedupes && !r.Keyed {
			return nil, fmt.Errorf("policy: pack %s: tool %q says its upstream deduplicates by Idempotency-Key (Route.Dedupes) but sends none (Route.Keyed)", d.Name, n)
		}
		if e.spec.Tier == TierRead && e.spec.Route.Path != "" && e.spec.Route.Method != "GET" {
			return nil, fmt.Errorf("policy: pack %s: tool %q is a read, so its route is a GET, not %s (a read is offered as changing nothing)", d.Name, n, e.spec.Route.Method)
		}
		for _, r := range d.Evidence {
			if r.Tool == n {
				e.evidence = append(e.evidence, evidenceAt{upToCents: r.UpToCents, req: Requirement{ACR: r.ACR, MaxAgeSeconds: int64(r.MaxAge.Seconds())}})
			}
		}
		e.evidence = append(e.evidence, evidenceAt{req: StrictestEvidence})
		if d.Verification != nil {
			e.verified = &VerifiedNeed{Tier: d.TierFor(n), Why: e.row.VerifiedWhy}
		}
		e.denied = sentences.Say(sentences.ToolDenied, n)
		e.unit = d.Unit
		if err := e.compile(); err != nil {
			return nil, fmt.Errorf("policy: pack %s: tool %s: %w", d.Name, n, err)
		}
		if e.row.ConfirmInClient && e.row.Decision == DecisionDeny {
			return nil, fmt.Errorf("policy: pack %s: tool %s: the row denies every call, so no card is put up to confirm in the client: drop ConfirmInClient or make it approve", d.Name, n)
		}
		for _, name := range e.row.Editable {
			if _, ok := fieldByName(e.spec.Args, name); !ok {
				return nil, fmt.Errorf("policy: pack %s: tool %s: the row lets approvers edit %q, which is not one of its args", d.Name, n, name)
			}
		}
		rp, err := compileResource(e.spec, d.Resources, p.codec)
		if err != nil {
			return nil, fmt.Errorf("policy: pack %s: tool %s: %w", d.Name, n, err)
		}
		if e.resource = rp; rp != nil {
			e.kind = rp.kind.Name
		}
		for _, l := range e.row.Limits {
			if l.Scope != PerUser && (l.Scope != PerResource || rp == nil) {
				return nil, fmt.Errorf("policy: pack %s: tool %s: a limit of scope %q needs scope %q, or %q on a tool that names a resource (Resource)", d.Name, n, l.Scope, PerUser, PerResource)
			}
			if l.Window <= 0 || l.Window > MaxWindow {
				return nil, fmt.Errorf("policy: pack %s: tool %s: a limit's window is %d seconds; give one from a second to 31 days (policy.MaxWindow), e.g. policy.Hour or policy.Day", d.Name, n, l.Window)
			}
		}
		p.entries[n] = e
		for len(p.byLen) <= len(n) {
			p.byLen = append(p.byLen, nil)
		}
		p.byLen[len(n)] = append(p.byLen[len(n)], e)
	}
	for _, n := range p.names {
		if err := p.codec.Check(toolargs.Tool{Name: n, Args: p.specs[n].Args}); err != nil {
			return nil, fmt.Errorf("policy: pack %s: tool %s: %w", packs[p.pack[n]].Name, n, err)
		}
	}
	return p, nil
}

// Packs are the packs the policy was built from, in order.
func (p *Policy) Packs() []Pack { return slices.Clone(p.packs) }

// PackOf is the pack a tool belongs to.
func (p *Policy) PackOf(tool string) (Pack, bool) {
	i, ok := p.pack[tool]
	if !ok {
		return Pack{}, false
	}
	return p.packs[i], true
}

// Roles are every pack's roles, in pack order.
func (p *Policy) Roles() []RoleSpec {
	var out []RoleSpec
	for _, d := range p.packs {
		out = append(out, d.Roles...)
	}
	return out
}

// EvidenceRules are the evidence rules of one tool, in table order.
func (p *Policy) EvidenceRules(tool string) []EvidenceRule {
	var out []EvidenceRule
	for _, r := range p.evidence {
		if r.Tool == tool {
			out = append(out, r)
		}
	}
	return out
}

// System is how messages to the model name the upstream of a tool's pack;
// "the upstream system" for a name no pack holds.
func (p *Policy) System(tool string) string {
	if d, ok := p.PackOf(tool); ok {
		return d.System
	}
	return "the upstream system"
}

// Spec returns the tool's spec. Only exact, registered names match.
func (p *Policy) Spec(name string) (ToolSpec, bool) {
	s, ok := p.specs[name]
	return s, ok
}

// Row returns the tool's policy row.
func (p *Policy) Row(name string) (Row, bool) {
	r, ok := p.rows[name]
	return r, ok
}

// Names lists the registered tools in registry order.
func (p *Policy) Names() []string { return slices.Clone(p.names) }

// Effective is the row's decision raised to the tool's risk-tier floor.
func (p *Policy) Effective(name string) Decision {
	s, ok := p.specs[name]
	if !ok {
		return DecisionDeny
	}
	return Stricter(p.rows[name].Decision, s.Tier.Floor())
}

// Request is one proposed tool call with the session it came from.
type Request struct {
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Session Session         `json:"session"`
}

// Facts are the system-computed inputs of steps 6 and 7.
type Facts struct {
	// ValueCents is the dry run's value of the call; nil when the tool has none.
	ValueCents *int64
	// Usage holds, per limit of the row (same order), what the audit log
	// already counts in its window. Missing usage fails closed.
	Usage []Usage
}

// Usage is what one limit has already admitted in its window.
type Usage struct {
	Calls int   `json:"calls"`
	Cents int64 `json:"cents"`
}

// LimitKey names one limit bucket to count, e.g. get_plan/portal/PRT-1/3600
// (tool, the resource's kind or "user", whose, window). It carries the
// limit's bounds, so admission counts and judges exactly the limits the
// recorded verdict names.
type LimitKey struct {
	Key      string      `json:"key"`
	Tool     string      `json:"tool"`
	Scope    Scope       `json:"scope"`
	UserID   string      `json:"userId,omitempty"`
	Resource ResourceRef `json:"resource,omitzero"`
	Window   Window      `json:"window"`
	MaxCalls int         `json:"maxCalls,omitempty"`
	MaxCents int64       `json:"maxCents,omitempty"`
}

// Verdict is the outcome of the chain.
type Verdict struct {
	// Decision is allow, approve or deny.
	Decision Decision `json:"decision"`
	// Code is ok, or the code of the first failing step.
	Code Code `json:"code"`
	// Message tells the model what happened and what to do next.
	Message string `json:"message"`
	// Step is the failing step; meaningful only when Decision is deny.
	Step Step `json:"step"`
	// AuthRequired asks the agent to have the person sign in.
	AuthRequired bool `json:"authRequired,omitempty"`
	// Args are the decoded args after session fill, canonically encoded.
	Args json.RawMessage `json:"args,omitempty"`
	// Resource is the resource the call acts on; its Kind is "" when the
	// tool names none.
	Resource ResourceRef `json:"resource,omitzero"`
	// Limits are the buckets step 7 counts, in row order.
	Limits []LimitKey `json:"limits,omitempty"`
	// NeedsPreview says steps 0-5 passed and the tool's dry run must value
	// the call before the chain can finish.
	NeedsPreview bool `json:"needsPreview,omitempty"`
	// ApproverRole is the role that decides an approve verdict.
	ApproverRole Role `json:"approverRole,omitempty"`
	// Tool holds the facts of the tool's spec that decide how the call
	// runs, recorded with the verdict so a later change to the spec never
	// changes a call in flight. Set on passing verdicts of Check.
	Tool *ToolFacts `json:"toolFacts,omitempty"`
	// Evidence is the sign-in an approval needs (EvidenceFor), set on
	// approve verdicts and recorded with them.
	Evidence *Requirement `json:"evidence,omitempty"`
	// RequesterTier is the row's requester tier, checked against the
	// credential when it is exchanged; the sign-in behind it may be at most
	// RequesterMaxAgeSeconds old when the call was asked (0 on verdicts
	// recorded before the age was checked).
	RequesterTier          string `json:"requesterTier,omitempty"`
	RequesterMaxAgeSeconds int64  `json:"requesterMaxAgeSeconds,omitempty"`
	// Verified is the tier of its pack's ladder the caller must hold in the
	// conversation, checked by admission and again before anything is
	// sent upstream; nil for a pack without one.
	Verified *VerifiedNeed `json:"verified,omitempty"`
	// EscalateTo is the role an unanswered card is also offered to.
	EscalateTo Role `json:"escalateTo,omitempty"`
	// ValueCents is the call's value when an arg holds it (ToolSpec.ValueArg).
	ValueCents *int64 `json:"valueCents,omitempty"`
	// Currency is the unit the value's messages are written in (its pack's).
	Currency string `json:"currency,omitempty"`
	// Approvals is how many distinct approvers the card needs, when more
	// than one (Row.Quorum); the requester is never one of them.
	Approvals int `json:"approvals,omitempty"`
	// Editable are the args an approver may change (Row.Editable).
	Editable []string `json:"editable,omitempty"`
	// ConfirmInClient says the requester may decide the card in their own
	// MCP client (Row.ConfirmInClient), on a card of one approver.
	ConfirmInClient bool `json:"confirmInClient,omitempty"`
}

// ToolFacts are the parts of a tool's spec that decide how a call runs
// after it is authorized.
type ToolFacts struct {
	Tier       Tier          `json:"tier"`
	Idempotent bool          `json:"idempotent"`
	Timeout    time.Duration `json:"timeout"`
	// PerRequester keys the call's intent by its requester too (the tool
	// is not Shared); false on facts recorded before it was.
	PerRequester bool `json:"perRequester,omitempty"`
	// Pinned says the tool is a team's MCP server's, pinned to the
	// definition a person accepted: its card goes up only once the server
	// is seen to define it so (false on facts recorded before).
	Pinned bool `json:"pinned,omitempty"`
}

// Allowed reports whether the call may proceed (now or after approval).
func (v Verdict) Allowed() bool { return v.Decision != DecisionDeny }

// refuse writes step's refusal into v, which must be zero: field by field,
// as a whole Verdict written through a pointer costs more than the step
// that refuses.
func (v *Verdict) refuse(step Step, msg string) {
	v.Decision, v.Code, v.Step, v.Message = DecisionDeny, step.Code(), step, msg
}

func deny(step Step, msg string) Verdict {
	return Verdict{Decision: DecisionDeny, Code: step.Code(), Step: step, Message: msg}
}

// The chain, top to bottom: front (steps 0-2), Decode (step 3), the
// session's credential and resources and the call's value (steps 4-6), then
// step 7 on the limits. Its one entry is Check, what the workflow runs and
// records, then Admit, step 7 on that record, run by admission against the
// audit log's counts; Authorize is the two in a row, for callers (and tests)
// that count usage themselves.

// Check runs steps 0 to 6, everything that needs no counting. A passing
// verdict is the record the workflow keeps: the canonical args, the tool's
// spec facts, and the limits step 7 must count, with their bounds.
func (p *Policy) Check(req Request, valueCents *int64) (v Verdict) {
	defer func() {
		// A rule New could not foresee must refuse the call, never fail the
		// workflow task that judges it (which would retry without end).
		if r := recover(); r != nil {
			v = deny(StepArguments, sentences.Say(sentences.ArgsUnjudged, r))
		}
	}()
	e, held := p.front(&v, req.Tool, &req.Session)
	if e == nil {
		if s, ok := p.specs[req.Tool]; ok && s.Verifies != nil {
			v.Args = Withheld(req.Args)
		}
		return v
	}
	args, err := p.Decode(e.spec, req.Args)
	if err != nil {
		return withheld(e, req.Args, deny(StepArguments, err.Error()))
	}
	if p.steps4to6(&v, e, args, &req.Session, held, valueCents); v.Decision == DecisionDeny {
		return withheld(e, req.Args, v)
	}
	if v.Evidence != nil {
		req := *v.Evidence
		v.Evidence = &req
	}
	canonical, err := p.codec.Encode(args)
	if err != nil {
		return deny(StepArguments, sentences.Say(sentences.ArgsUnencoded, err))
	}
	v.Args = canonical
	v.Tool = &ToolFacts{Tier: e.spec.Tier, Idempotent: e.spec.Idempotent, Timeout: e.spec.Timeout, PerRequester: !e.spec.Shared, Pinned: e.spec.MCP != nil}
	if len(e.row.Limits) > 0 {
		v.Limits = make([]LimitKey, 0, len(e.row.Limits))
		for _, l := range e.row.Limits {
			v.Limits = append(v.Limits, limitKey(e.spec.Name, l, req.Session.UserID, v.Resource))
		}
	}
	return v
}

// withheld gives a refused verification call the args its audit row
// keeps: the factor withheld, whatever the client sent.
func withheld(e *entry, args json.RawMessage, v Verdict) Verdict {
	if e.spec.Verifies != nil {
		v.Args = Withheld(args)
	}
	return v
}

// Admit is step 7 on a verdict Check recorded: each limit it names, with
// the usage already counted in its window (same order) and this call's
// value, stays within its bounds. Missing usage fails closed.
func Admit(v Verdict, valueCents *int64, usage []Usage) Verdict {
	if !v.Allowed() {
		return v
	}
	if v.NeedsPreview {
		return deny(StepHardLimit, sentences.Say(sentences.CallUnvalued))
	}
	if len(usage) != len(v.Limits) {
		return deny(StepRateLimit, sentences.Say(sentences.UsageUncounted))
	}
	if valueCents == nil {
		valueCents = v.ValueCents
	}
	value := deref(valueCents)
	for i, k := range v.Limits {
		if l := (Limit{Scope: k.Scope, Window: k.Window, MaxCalls: k.MaxCalls, MaxCents: k.MaxCents}); exceeds(&l, &usage[i], value) {
			return limitDenial(k.Tool, l, v.Resource, usage[i], value, Unit{Currency: v.Currency})
		}
	}
	return v
}

// Authorize runs the whole chain, steps 0 to 7: Check, then Admit with the
// usage in f.
func (p *Policy) Authorize(req Request, f Facts) Verdict {
	return Admit(p.Check(req, f.ValueCents), f.ValueCents, f.Usage)
}

// front runs steps 0 to 2: registered, not denied, a sound session with a
// listed role. v must be zero. A nil entry comes with the refusal in v; a
// passing one with the session's resources of the kind the tool names
// (held), for step 5.
func (p *Policy) front(v *Verdict, tool string, s *Session) (*entry, []string) {
	e := p.lookup(tool)
	if e == nil {
		v.refuse(StepRegistered, sentences.Say(sentences.UnknownTool, toolargs.Clip(tool), strings.Join(p.Offered(s.Role), ", ")))
		return nil, nil
	}
	if e.decision == DecisionDeny {
		v.refuse(StepNotDenied, e.denied)
		return nil, nil
	}
	why, held := p.sessionProblem(s, e.kind)
	if why != "" {
		v.refuse(StepRole, sentences.Say(sentences.MalformedSession, why))
		return nil, nil
	}
	if !slices.Contains(e.row.Roles, s.Role) {
		v.refuse(StepRole, sentences.Say(sentences.RoleNotOffered, e.spec.Name, toolargs.Clip(string(s.Role))))
		return nil, nil
	}
	return e, held
}

// steps4to6 runs steps 4 to 6 on decoded args: a credential when the tool
// needs one, the resource the args name (filling the session's first when
// they name none), and the dry run's value against the hard limit and the
// approver routing. A dry-run tool without its value yet passes with
// NeedsPreview set. The verdict is written to v, which must be zero.
func (p *Policy) steps4to6(v *Verdict, e *entry, args any, s *Session, held []string, valueCents *int64) {
	spec, row, decision := &e.spec, &e.row, e.decision
	if spec.RequiresCredential && (s.CredentialRef == "" || s.UserID == "") {
		*v = deny(StepCredential, sentences.Say(sentences.NotSignedIn))
		v.AuthRequired = true
		return
	}
	var resource ResourceRef
	if rp := e.resource; rp != nil {
		var why string
		if at := rp.argAt(args); at != nil {
			resource, why = p.scopeAt(rp, at, held)
		} else {
			resource, why = p.scope(rp, args, held)
		}
		if why != "" {
			*v = deny(StepResourceScope, why)
			return
		}
	}
	// v is still zero here: set fields one by one, not a whole Verdict
	// through the pointer (a fifth of the steps' time).
	v.Decision, v.Code, v.Resource, v.Message, v.RequesterTier, v.Currency = decision, CodeOK, resource, sentences.Say(sentences.Allowed), row.RequesterTier, e.unit.Currency
	if e.verified != nil {
		v.Verified = &VerifiedNeed{Tier: e.verified.Tier, Why: e.verified.Why}
	}
	if row.RequesterTier != "" {
		age := row.RequesterMaxAge
		if age <= 0 {
			age = RequesterTierMaxAge
		}
		v.RequesterMaxAgeSeconds = int64(math.Ceil(age.Seconds()))
	}
	if decision == DecisionApprove {
		v.Message = sentences.Say(sentences.AwaitingApproval)
	}
	if spec.DryRun && valueCents == nil {
		// Step 6 needs the dry run's value; the caller previews and checks again.
		v.NeedsPreview, v.Message = true, sentences.Say(sentences.NeedsDryRun)
		return
	}
	if valueCents == nil && e.value != nil {
		// The value is an arg's: decoding made it present (a required arg).
		if n, ok := intAt(args, e.value); ok {
			valueCents = &n
			v.ValueCents = valueCents
		}
	}
	if valueCents != nil && *valueCents < 0 {
		*v = deny(StepHardLimit, sentences.Say(sentences.ValuedBelowZero, spec.Name))
		return
	}
	if row.HardLimitCents > 0 {
		if valueCents == nil {
			*v = deny(StepHardLimit, sentences.Say(sentences.Unvalued, spec.Name))
			return
		}
		if *valueCents > row.HardLimitCents {
			*v = deny(StepHardLimit, sentences.Say(sentences.OverHardLimit, spec.Name, e.unit.Format(*valueCents), e.unit.Format(row.HardLimitCents)))
			return
		}
	}
	if decision == DecisionApprove {
		role, ok, err := e.approverFor(deref(valueCents), args)
		if err != nil {
			*v = deny(StepNotDenied, sentences.Say(sentences.ApproverUnknown, spec.Name, err))
			return
		}
		if !ok {
			msg := sentences.Say(sentences.NoApprover, spec.Name)
			if valueCents != nil {
				msg = sentences.Say(sentences.NoApproverWorth, spec.Name, e.unit.Format(*valueCents))
			}
			*v = deny(StepNotDenied, msg)
			return
		}
		v.ApproverRole = role
		v.EscalateTo = e.escalationFor(role, deref(valueCents), args)
		if n := row.ApprovalsFor(deref(valueCents)); n > 1 {
			v.Approvals = n
		}
		v.ConfirmInClient = row.ConfirmInClient && v.Approvals <= 1
		v.Editable = row.Editable
		v.Evidence = e.evidenceFor(deref(valueCents))
	}
}

func deref(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// exceeds is step 7 for one limit: its usage plus this call goes past a
// bound.
func exceeds(l *Limit, u *Usage, value int64) bool {
	return l.MaxCalls > 0 && u.Calls+1 > l.MaxCalls || l.MaxCents > 0 && u.Cents+value > l.MaxCents
}

// limitDenial says which bound a call would pass, and for whom.
func limitDenial(tool string, l Limit, r ResourceRef, u Usage, value int64, unit Unit) Verdict {
	who := sentences.Say(sentences.SignedInPerson)
	if l.Scope == PerResource {
		who = r.String()
	}
	if callsOver := l.MaxCalls > 0 && u.Calls+1 > l.MaxCalls; callsOver {
		return deny(StepRateLimit, sentences.Say(sentences.OverCallLimit, tool, l.MaxCalls, l.Window, who))
	}
	return deny(StepRateLimit, sentences.Say(sentences.OverValueLimit, tool, who, unit.Format(l.MaxCents), l.Window, unit.Format(u.Cents)))
}

func limitKey(tool string, l Limit, user string, r ResourceRef) LimitKey {
	k := LimitKey{Tool: tool, Scope: l.Scope, Window: l.Window, MaxCalls: l.MaxCalls, MaxCents: l.MaxCents}
	kind, who := string(l.Scope), user
	if l.Scope == PerResource {
		k.Resource, kind, who = r, r.Kind, r.ID
	} else {
		k.UserID = user
	}
	k.Key = fmt.Sprintf("%s/%s/%s/%d", tool, kind, who, l.Window)
	return k
}
