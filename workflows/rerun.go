package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// rerun answers a run whose first write found the call claimed by an
// earlier run of the same workflow ID. It never admits, audits the call or
// executes again: the earlier run's result comes back, or, when the earlier
// run asked for something else or ended without a result, the closed code
// idempotency_conflict (that refusal is this run's one audit row). Any
// other error passes through.
func (c *call) rerun(err error) (ToolCallResult, error) {
	var app *temporal.ApplicationError
	var sr activities.SecondRun
	if !errors.As(err, &app) || app.Type() != activities.ErrSecondRun || app.Details(&sr) != nil {
		return ToolCallResult{}, err
	}
	if !sr.Conflict && len(sr.Result) > 0 {
		var res ToolCallResult
		if json.Unmarshal(sr.Result, &res) == nil && res.Status != "" {
			c.board.status.Card = res.Card
			c.board.set(res.Status, res.Code.Canonical())
			return res, nil
		}
	}
	msg := sentences.Say(sentences.OtherCall)
	if !sr.Conflict {
		msg = sentences.Say(sentences.EarlierRun, sr.Ended)
	}
	c.board.set(StatusDenied, policy.CodeIdempotencyConflict)
	if err := c.books.audit(activities.AuditInput{Key: "idempotency-conflict", Event: activities.EventDenied, Reason: policy.CodeIdempotencyConflict,
		Message: msg, Args: c.in.Args, Resource: c.board.about(policy.Verdict{})}); err != nil {
		return ToolCallResult{}, err
	}
	return c.board.result(StatusDenied, policy.CodeIdempotencyConflict, msg, false, false, nil), nil
}

// claims is the call's claim on its ID: what was asked (fingerprint,
// policy.Fingerprint of its input), which its first write carries; the
// request as it stands (req: a sign-in changes its credential), which a
// duplicate is compared with; and how many duplicates asked for something
// else.
type claims struct {
	key, toolCallID, fingerprint string
	req                          *policy.Request
	conflicts                    int
}

// claim is the claim a run's first write carries.
func (cl *claims) claim() *activities.Claim {
	return &activities.Claim{Fingerprint: cl.fingerprint}
}

// conflicting answers a duplicate start that attached to this run (the
// firstOutcome Update carries its input): when it asks for another tool,
// other args or another session, it gets idempotency_conflict, audited
// (up to MaxRefusedDecisions times), never this call's outcome. An Update
// without input (older clients) is not compared.
func (cl *claims) conflicting(ctx workflow.Context, asked ToolCallInput) (*Outcome, error) {
	if asked.Tool == "" && asked.ToolCallID == "" && len(asked.Args) == 0 {
		return nil, nil
	}
	theirs := policy.Request{Tool: asked.Tool, Args: asked.Args, Session: asked.Session}
	if asked.ToolCallID == cl.toolCallID && policy.Fingerprint(theirs) == policy.Fingerprint(*cl.req) {
		return nil, nil
	}
	cl.conflicts++
	msg := sentences.Say(sentences.OtherCallInUse)
	if cl.conflicts <= MaxRefusedDecisions {
		err := workflow.ExecuteActivity(bookkeeping(ctx, "audit idempotency conflict"), acts.Audit, activities.AuditInput{
			Key: fmt.Sprintf("idempotency-conflict-%d", cl.conflicts), Event: activities.EventDenied, Reason: policy.CodeIdempotencyConflict,
			Message: msg, Args: asked.Args, Tool: asked.Tool, Session: asked.Session}).Get(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("audit idempotency conflict: %w", err)
		}
	}
	return &Outcome{ToolCallResult: ToolCallResult{Status: StatusDenied, Code: policy.CodeIdempotencyConflict, Message: msg,
		Result: json.RawMessage("{}"), IdempotencyKey: cl.key}}, nil
}
