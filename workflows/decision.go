package workflows

import (
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// decision is what the chain settled for a call, once: the verdict, the
// tool's spec facts recorded with it, the value an arg holds, the dry
// run, and what admission read. decide builds it and nothing changes it
// after: admission returns a new value (admitted), and so does an edit
// (card.revised), so whatever reads a decision reads what was settled.
type decision struct {
	verdict policy.Verdict
	// facts are the tool's spec facts recorded with the first verdict.
	facts *policy.ToolFacts
	// argValue is the call's value when an arg holds it (the verdict's).
	argValue *int64
	// dryRun is the tool's dry run, when one ran.
	dryRun *activities.PreviewResult
	// requester is the person behind the call's credential, as admission
	// read it (unknown on calls admitted before it did).
	requester signoff.Person
	// refusal is what a refusal tells the model beyond its message: the
	// equivalent card an already_pending call waits for, or the tier a
	// step_up_required caller lacks.
	refusal json.RawMessage
}

// value is the call's value: its dry run's, else an arg's.
func (d decision) value() *int64 {
	if d.dryRun == nil {
		return d.argValue
	}
	return &d.dryRun.ValueCents
}

// toolFacts are the spec facts the call acts on: those recorded with its
// verdict, never the live spec.
func (d decision) toolFacts() policy.ToolFacts {
	if d.facts != nil {
		return *d.facts
	}
	// Every call records its facts with its verdict; should one lack them,
	// it runs as the most careful tool would: once, and audited.
	return policy.ToolFacts{Tier: policy.TierWrite, Timeout: 15 * time.Second}
}

// intentRequester is who the call's intent is keyed by: user, unless the
// tool acts on something shared (then "", everyone's).
func (d decision) intentRequester(user string) string {
	if d.facts != nil && d.facts.PerRequester {
		return user
	}
	return ""
}

// admitted is d as admission (step 7) left it: the verdict stands, with
// the decision admission recorded (equal to the verdict's unless a limit
// refused), or is replaced by admission's refusal.
func (d decision) admitted(res activities.AdmitResult) decision {
	d.requester = deref(res.Requester)
	if !res.Allowed() {
		if res.Pending != nil {
			d.refusal, _ = json.Marshal(res.Pending)
		}
		if res.Unverified != nil {
			d.refusal, _ = json.Marshal(res.Unverified)
		}
		d.verdict = policy.Verdict{Decision: res.Decision, Code: res.Code, Message: res.Message, Step: res.Step}
		return d
	}
	d.verdict.Decision = res.Decision
	return d
}

// admitInput is what admission judges: the verdict, the value and the
// action that would run, and, for a card, the intent no equivalent card
// may already hold.
func (d decision) admitInput(tool string, session policy.Session, claim *activities.Claim, credentialRef string, ttl time.Duration) activities.AdmitInput {
	v := d.verdict
	in := activities.AdmitInput{Verdict: v, Tool: tool, Session: session, Claim: claim, CredentialRef: credentialRef}
	if d.dryRun != nil {
		in.ValueCents, in.Action = &d.dryRun.ValueCents, d.dryRun.Action
	} else {
		in.ValueCents = d.argValue
	}
	if v.Decision == policy.DecisionApprove {
		// One card per intent: an equivalent card already up ends this call.
		// The intent is what would run: the action, after session fill and the
		// dry run's choices (the assistant's justification is not part of it).
		args := v.Args
		if d.dryRun != nil && len(d.dryRun.Action) > 0 {
			args = d.dryRun.Action
		}
		if intent, err := policy.Intent(tool, v.Resource, args, d.intentRequester(session.UserID)); err == nil {
			in.Intent, in.TTLSeconds = intent, int64(ttl.Seconds())
		}
	}
	return in
}

func deref[T any](r *T) T {
	var zero T
	if r == nil {
		return zero
	}
	return *r
}
