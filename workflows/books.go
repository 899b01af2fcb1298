package workflows

import (
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// books is what a call writes and tells others: its audit rows and card
// states, each keyed so a repeat writes nothing twice, and the webhook's
// deliveries. Every row names the call's tool and session.
type books struct {
	ctx     workflow.Context
	tool    string
	session policy.Session
	key     string
	runID   string
	shape   shape
	// metricTool labels the call's metrics (metricTool).
	metricTool string
	// hooks says card events go to the webhook: recorded with the trust
	// when a card goes up. sent are the deliveries so far.
	hooks bool
	sent  []workflow.Future
}

// audit writes one audit row.
func (b *books) audit(in activities.AuditInput) error {
	in.Tool, in.Session = b.tool, b.session
	if err := workflow.ExecuteActivity(bookkeeping(b.ctx, "audit "+string(in.Event)), acts.Audit, in).Get(b.ctx, nil); err != nil {
		return fmt.Errorf("audit %s: %w", in.Event, err)
	}
	return nil
}

// auditAll writes rows (refused decisions) in one local write.
func (b *books) auditAll(rows []activities.AuditInput) error {
	if len(rows) == 0 {
		return nil
	}
	if err := workflow.ExecuteLocalActivity(localBookkeeping(b.ctx, fmt.Sprintf("audit %d refused decisions", len(rows))), acts.AuditAll, rows).Get(b.ctx, nil); err != nil {
		return fmt.Errorf("audit refused decisions: %w", err)
	}
	return nil
}

// record writes an audit row and the card state it leads to, together,
// locally when the event cannot depend on the task's time (an expiry, a
// result already in history); a decision's acceptance depends on it, so
// its record runs only after the task that accepted it is complete.
func (b *books) record(in activities.AuditInput, card activities.CardRow, local bool) error {
	in.Tool, in.Session = b.tool, b.session
	rec := activities.RecordInput{Audit: in, Card: card}
	var f workflow.Future
	if local {
		f = workflow.ExecuteLocalActivity(localBookkeeping(b.ctx, "record "+string(in.Event)), acts.Record, rec)
	} else {
		f = workflow.ExecuteActivity(bookkeeping(b.ctx, "record "+string(in.Event)), acts.Record, rec)
	}
	if err := f.Get(b.ctx, nil); err != nil {
		return fmt.Errorf("record %s: %w", in.Event, err)
	}
	return nil
}

// project writes a card as it goes up (shape.write says how).
func (b *books) project(card activities.CardRow) error {
	if err := b.shape.write(b.ctx, "card "+string(card.Status), acts.Project, card).Get(b.ctx, nil); err != nil {
		return fmt.Errorf("project card: %w", err)
	}
	return nil
}

// notify tells the webhook about the card, when one was in force as the
// card went up: delivered by an activity with retries, not waited for
// until the call ends (a slow receiver never holds a card up).
func (b *books) notify(event string, card activities.CardRow, decidedBy string) {
	if !b.hooks {
		return
	}
	ev := activities.CardEvent{Type: event, WorkflowID: b.key, RunID: b.runID, CardVersion: max(1, card.CardVersion), Status: card.Status,
		Tool: b.tool, Resource: card.Resource, ValueCents: card.ValueCents, Card: card.Card, ApproverRole: card.ApproverRole,
		EscalatedTo: card.EscalatedTo, ApprovalsNeeded: max(1, card.ApprovalsNeeded), ExpiresAt: card.ExpiresAt, DecidedBy: decidedBy}
	opts := workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: time.Minute, Summary: fmt.Sprintf("webhook %s v%d", event, ev.CardVersion),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrWebhookRefused, activities.ErrBadInput}}}
	b.sent = append(b.sent, workflow.ExecuteActivity(workflow.WithActivityOptions(b.ctx, opts), acts.Notify, ev))
}

// awaitHooks lets the card's deliveries finish (each is bounded by its
// retry policy) before the call ends; a failed one is logged.
func (b *books) awaitHooks() {
	for _, f := range b.sent {
		if err := f.Get(b.ctx, nil); err != nil {
			workflow.GetLogger(b.ctx).Warn("webhook not delivered", "error", err)
		}
	}
}

// bookkeepingTimeout bounds one attempt of the audit, admission and dry-run
// activities.
const bookkeepingTimeout = 15 * time.Second

// localBookkeeping runs keyed bookkeeping in the workflow task itself.
func localBookkeeping(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: bookkeepingTimeout, Summary: summary,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadInput}},
	})
}

// bookkeeping options: audit and admission are keyed for dedup, so they
// retry until PostgreSQL answers; nothing is dropped while it is down.
func bookkeeping(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: bookkeepingTimeout, Summary: summary,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadInput}},
	})
}
