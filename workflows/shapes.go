package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// shape is the shape of a call, one version for all of it (docs:
// versioning policy). Everything that differs between the shapes of
// calls still in flight is here: the rest of the package asks a shape
// what it does (lean, waitsForSignIn, read, write, held), never compares
// versions.
type shape workflow.Version

// The shapes of a call, oldest first (shape 3 holds the shapes folded
// before any release).
const (
	// shapeEvidence: an approval's sign-in evidence is checked against
	// trusted identity providers, recorded with the keys.
	shapeEvidence shape = 4
	// shapeEscalation: an unanswered card escalates (a recorded fraction
	// of its TTL, a timer).
	shapeEscalation shape = 5
	// shapeSignInWait: a call that needs a sign-in waits for the
	// credential signal instead of ending.
	shapeSignInWait shape = 6
	// shapeLean: the call costs less (a dry run and the card's first write
	// in the workflow task, one record of the approval's settings, the
	// outcome written by the call's own activity, no upsert while
	// executing, one timer at a time), and records no version marker.
	shapeLean shape = 7
)

// currentShape is the shape of the calls this code starts.
const currentShape = shapeLean

// searchAttributesChange is the version marker in which calls of shapes 3-6
// recorded their shape.
const searchAttributesChange = "search-attributes"

// signedApprovalsChange is a version marker calls of shapes 3-6 recorded,
// at signedApprovalsVersion, its only supported value.
const (
	signedApprovalsChange                   = "signed-approvals"
	signedApprovalsVersion workflow.Version = 1
)

// shapeOf is the shape of the call. A new call is currentShape and records
// no marker, so it asks nothing of GetVersion (which would record a marker
// and an upsert). A replayed call of shapes 3-6 has its shape recorded as
// the searchAttributesChange marker; one without that marker is shapeLean.
// The next shape is to be recorded in the call's first side effect (the
// policy check), which a shapeLean call records without one.
func shapeOf(ctx workflow.Context) shape {
	if !workflow.IsReplaying(ctx) {
		return currentShape
	}
	if v := workflow.GetVersion(ctx, searchAttributesChange, workflow.DefaultVersion, workflow.Version(shapeSignInWait)); v != workflow.DefaultVersion {
		return shape(v)
	}
	return currentShape
}

// lean says the call is shapeLean: a card without a dry run shows its
// action, the expiry timer waits for the escalation's, an outcome is
// written by the call's own activity, and executing upserts nothing.
func (s shape) lean() bool { return s >= shapeLean }

// waitsForSignIn says a call that needs a sign-in waits for one.
func (s shape) waitsForSignIn() bool { return s >= shapeSignInWait }

// read runs a read before the card (a dry run): in the workflow task from
// shapeLean, as an activity before.
func (s shape) read(ctx workflow.Context, opts workflow.ActivityOptions, activity, in any) workflow.Future {
	if s.lean() {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localRead(opts)), activity, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, in)
}

// write runs a card's first write: from shapeLean in the workflow task
// that puts it up (should that task fail, its retry writes the card again,
// expiry and all), as an activity before.
func (s shape) write(ctx workflow.Context, summary string, activity, in any) workflow.Future {
	if s.lean() {
		return workflow.ExecuteLocalActivity(localBookkeeping(ctx, summary), activity, in)
	}
	return workflow.ExecuteActivity(bookkeeping(ctx, summary), activity, in)
}

// held records the settings a card is held to: in one side effect from
// shapeLean; before that one by one (the TTL, a marker, then the trust:
// the keys alone before shapeEvidence). escalates says the card has a role
// to escalate to.
func (s shape) held(ctx workflow.Context, set Settings, escalates bool) (heldSettings, error) {
	ttl, frac := set.ApprovalTTL, set.EscalateAfter
	if ttl <= 0 {
		ttl = DefaultApprovalTTL
	}
	var held heldSettings
	if s.lean() {
		now := heldSettings{TTL: ttl, Trust: set.trust(), Judging: judgingNow}
		if escalates {
			now.EscalateAfter = escalateAfter(frac, ttl)
		}
		err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "approval TTL, keys, identity providers and escalation in force"}, func(workflow.Context) any {
			return now
		}).Get(&held)
		if err != nil {
			return held, fmt.Errorf("approval settings: %w", err)
		}
		return held, nil
	}
	if err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "approval TTL in force"}, func(workflow.Context) any {
		return ttl
	}).Get(&held.TTL); err != nil {
		return held, fmt.Errorf("approval TTL: %w", err)
	}
	// A marker every history has at its only supported value, so they all
	// replay (docs: versioning policy).
	workflow.GetVersion(ctx, signedApprovalsChange, signedApprovalsVersion, signedApprovalsVersion)
	t := set.trust()
	if s < shapeEvidence {
		err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "approval keys in force"}, func(workflow.Context) any {
			return t.Keys
		}).Get(&held.Trust.Keys)
		if err != nil {
			return held, fmt.Errorf("approval keys: %w", err)
		}
		return held, nil
	}
	err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "approval keys and identity providers in force"}, func(workflow.Context) any {
		return t
	}).Get(&held.Trust)
	if err != nil {
		return held, fmt.Errorf("approval trust: %w", err)
	}
	return held, nil
}

// escalation is when a card that is up is also offered to the next role
// up: from shapeLean as held records it; before, recorded now, and 0 when
// it never is (no role above, or a shape before escalation).
func (s shape) escalation(ctx workflow.Context, set Settings, held heldSettings, escalates bool) (time.Duration, error) {
	if s.lean() {
		return held.EscalateAfter, nil
	}
	if s < shapeEscalation || !escalates {
		return 0, nil
	}
	frac, ttl := set.EscalateAfter, held.TTL
	var after time.Duration
	err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "escalation in force"}, func(workflow.Context) any {
		return escalateAfter(frac, ttl)
	}).Get(&after)
	if err != nil {
		return 0, fmt.Errorf("escalation: %w", err)
	}
	return after, nil
}

// escalateAfter is when a card with a TTL is also offered to the next role
// up, for the deployment's fraction: 0 (never) for 1 or more.
func escalateAfter(frac float64, ttl time.Duration) time.Duration {
	switch {
	case frac <= 0:
		return time.Duration(float64(ttl) * DefaultEscalateAfter)
	case frac >= 1:
		return 0
	}
	return time.Duration(float64(ttl) * frac)
}
