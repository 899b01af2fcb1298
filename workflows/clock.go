package workflows

import (
	"fmt"
	"time"

	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// clock is a card's timers: the expiry, and the escalation at
// escalateAfter (0: never). Both are set once and last across edits. When
// chained, the expiry timer starts only once the escalation has fired
// (each timer is an action, and most cards are decided before they
// escalate); ctx is what it starts under.
type clock struct {
	timer, escalation workflow.Future
	escalateAfter     time.Duration
	chained           bool
	ctx               workflow.Context
}

// rang is which of a card's timers fired.
type rang int

const (
	rangNone rang = iota
	rangExpiry
	rangEscalation
)

// start starts the expiry timer for ttl and, if the card escalates (to
// escalateTo after escalateAfter), the escalation timer, under ctx
// (cancelled when the wait is over); chained, the escalation timer alone,
// the expiry's following when it fires.
func (t *clock) start(ctx workflow.Context, ttl, escalateAfter time.Duration, escalateTo policy.Role, chained bool) {
	escalates := escalateAfter > 0 && escalateAfter < ttl
	t.escalateAfter, t.chained, t.ctx = escalateAfter, chained && escalates, ctx
	if !t.chained {
		t.timer = workflow.NewTimerWithOptions(ctx, ttl, workflow.TimerOptions{Summary: fmt.Sprintf("approval expires after %s", ttl)})
	}
	if escalates {
		t.escalation = workflow.NewTimerWithOptions(ctx, escalateAfter, workflow.TimerOptions{Summary: fmt.Sprintf("escalate to %s after %s", escalateTo, escalateAfter)})
	}
}

// add waits on the card's timers in sel, for a card that escalates to
// escalateTo now; what fired is set in the rang it returns.
func (t *clock) add(sel workflow.Selector, escalateTo policy.Role) *rang {
	fired := new(rang)
	if t.timer != nil {
		sel.AddFuture(t.timer, func(workflow.Future) { *fired = rangExpiry })
	}
	// A chained card waits on its escalation timer even when an edit has
	// routed it to a role with none above: the expiry follows that timer.
	if t.escalation != nil && (t.chained || escalateTo != "") {
		sel.AddFuture(t.escalation, func(workflow.Future) { *fired = rangEscalation })
	}
	return fired
}

// escalated is the escalation timer fired: never waited on again, and, when
// chained, the expiry timer started for what is left until expires (the
// expiry does not move). It reports false when nothing is left.
func (t *clock) escalated(expires time.Time) bool {
	t.escalation = nil
	if !t.chained {
		return true
	}
	left := expires.Sub(workflow.Now(t.ctx))
	if left <= 0 {
		return false
	}
	t.timer = workflow.NewTimerWithOptions(t.ctx, left, workflow.TimerOptions{Summary: fmt.Sprintf("approval expires at %s", expires.UTC().Format(time.RFC3339))})
	return true
}
