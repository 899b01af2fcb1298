package workflows

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// execute runs args upstream under decision d as the person, once unless
// the tool is idempotent: hash is the approved card's args hash, and ap
// its records (nil for a call without a card).
func (c *call) execute(d decision, args json.RawMessage, hash string, ap *approvedCard) (ToolCallResult, error) {
	spec := d.toolFacts()
	c.board.set(StatusExecuting, "")
	in := activities.CallInput{Acting: c.up.acting(d.verdict, args), IdempotencyKey: c.key, ArgsHash: hash}
	executed := activities.AuditInput{Key: "outcome", Event: activities.EventExecuted, Reason: policy.CodeOK, Args: args, Resource: d.verdict.Resource, Value: d.value()}
	if ap != nil {
		in.Before = &ap.before
	}
	if c.shape.lean() && spec.Tier != policy.TierRead {
		after := executed
		after.Tool, after.Session = c.in.Tool, c.in.Session
		in.After = &activities.OutcomeRecord{Audit: after}
		if ap != nil {
			card := ap.card
			card.Version, card.Status = cardFinal, activities.CardStatusAfter(activities.EventExecuted)
			in.After.Card = &card
		}
	}
	var res activities.CallResult
	if err := callTool(c.ctx, spec, c.in.Tool, in).Get(c.ctx, &res); err != nil {
		return c.executeFailed(d, args, ap, spec, err)
	}
	c.board.set(StatusExecuted, policy.CodeOK)
	// Reads are audited by their decision row alone; calls that change
	// something also get an executed row, which the call's activity wrote
	// unless it could not.
	if spec.Tier != policy.TierRead && !res.Recorded {
		executed.Result = res.Result
		if err := c.books.recordOutcome(ap, executed); err != nil {
			return ToolCallResult{}, err
		}
	}
	workflow.GetLogger(c.ctx).Info("executed", "tool", c.in.Tool)
	done := sentences.Say(sentences.Done)
	if c.board.status.Version > 1 {
		done = sentences.Say(sentences.DoneAsEdited)
	}
	return c.board.result(StatusExecuted, policy.CodeOK, done, false, false, res.Result), nil
}

// callTool runs the CallTool activity for a tool with spec: an idempotent
// one in the workflow task, retried (a repeat is harmless); any other as
// an activity with one attempt.
func callTool(ctx workflow.Context, spec policy.ToolFacts, tool string, in activities.CallInput) workflow.Future {
	opts := workflow.ActivityOptions{StartToCloseTimeout: spec.Timeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, Summary: tool + " upstream"}
	if !spec.Idempotent {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), acts.CallTool, in)
	}
	opts.ScheduleToCloseTimeout = 4*spec.Timeout + 15*time.Second
	opts.RetryPolicy = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 4,
		NonRetryableErrorTypes: []string{activities.ErrCredential, activities.ErrUpstream, activities.ErrBadInput}}
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout, RetryPolicy: opts.RetryPolicy,
		Summary: opts.Summary}), acts.CallTool, in)
}

// executeFailed ends a call whose execution failed with err, or asks for a
// sign-in when nothing was sent upstream and nothing was approved (an
// approved card runs with the credential it was approved with, or not at
// all).
func (c *call) executeFailed(d decision, args json.RawMessage, ap *approvedCard, spec policy.ToolFacts, err error) (ToolCallResult, error) {
	code, msg, retryable, auth := upstreamFailure(err, spec.Idempotent, c.system)
	// The credential is exchanged before anything is sent upstream, so a
	// call refused for it ran nothing and may wait for a sign-in.
	if !unverified(err) && c.signIn.ask(code, refusalResult(err, nil), ap != nil, d.verdict) {
		return ToolCallResult{}, nil
	}
	workflow.GetLogger(c.ctx).Warn("tool call failed", "tool", c.in.Tool, "code", code)
	c.board.set(StatusFailed, code)
	if ap != nil {
		// The call may have died before writing the approval: write it (keyed, so never twice).
		if err := c.books.record(ap.before.Audit, ap.before.Card, true); err != nil {
			return ToolCallResult{}, err
		}
	}
	if err := c.books.recordOutcome(ap, activities.AuditInput{Key: "outcome", Event: activities.EventFailed, Reason: code, Message: msg, Args: args, Resource: d.verdict.Resource, Value: d.value()}); err != nil {
		return ToolCallResult{}, err
	}
	res := c.board.result(StatusFailed, code, msg, retryable, auth, refusalResult(err, nil))
	if unverified(err) {
		res.Card = "" // a refusal for the caller's tier says nothing of the action
	}
	return res, nil
}

// recordOutcome records how an execution ended: the audit row, and an
// approved card's final state in the same local write (the result is
// already in history, so a repeat changes nothing).
func (b *books) recordOutcome(ap *approvedCard, in activities.AuditInput) error {
	if ap == nil {
		return b.audit(in)
	}
	card := ap.card
	card.Version, card.Status, card.Result = cardFinal, activities.CardStatusAfter(in.Event), in.Result
	return b.record(in, card, true)
}

// refusalResult is the result of a call the upstream refused: the
// candidates an unknown ID may stand for, so the model can ask the person
// which one they mean; or, for a sign-in below the tool's requester tier,
// the tier needed and the tier held; else def.
func refusalResult(err error, def json.RawMessage) json.RawMessage {
	var app *temporal.ApplicationError
	var up activities.StepUp
	var short activities.Unverified
	if errors.As(err, &app) && app.Type() == activities.ErrUnverified && app.HasDetails() && app.Details(&short) == nil {
		if b, err := json.Marshal(short); err == nil {
			return b
		}
	}
	if errors.As(err, &app) && app.Type() == activities.ErrStepUp && app.HasDetails() && app.Details(&up) == nil {
		if b, err := json.Marshal(up); err == nil {
			return b
		}
	}
	var r activities.UpstreamRefusal
	if !errors.As(err, &app) || app.Type() != activities.ErrUpstream || !app.HasDetails() || app.Details(&r) != nil || len(r.Candidates) == 0 {
		return def
	}
	b, err := json.Marshal(map[string]any{"error": r.Code, "candidates": r.Candidates})
	if err != nil {
		return def
	}
	return b
}

// unverified says an activity refused the call for the caller's verified
// tier: the model asks for a factor, never for a sign-in.
func unverified(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrUnverified
}

// upstreamFailure turns an activity error into a code and a note for the
// model, naming the upstream as system (e.g. "the member portal").
func upstreamFailure(err error, idempotent bool, system string) (policy.Code, string, bool, bool) {
	sys := sentences.Capital(system)
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if idempotent {
			return policy.CodeTimeout, sentences.Say(sentences.TimedOutSafe, sys), true, false
		}
		return policy.CodeTimeout, sentences.Say(sentences.TimedOutUnknown, sys), false, false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case activities.ErrCredential:
			return policy.CodeCredentialUnavailable, sentences.Say(sentences.SignInUnusable), false, true
		case activities.ErrUnverified:
			var u activities.Unverified
			if app.HasDetails() && app.Details(&u) == nil {
				return policy.CodeStepUpRequired, u.Message(system), false, false
			}
			return policy.CodeStepUpRequired, sentences.Say(sentences.NotVerified), false, false
		case activities.ErrStepUp:
			return policy.CodeStepUpRequired, sentences.Say(sentences.StrongerSignIn), false, true
		case activities.ErrUnavailable:
			// A tool's own note is for a read; a write keeps the warning
			// that it may have taken effect.
			var note activities.UnavailableNote
			if idempotent && app.HasDetails() && app.Details(&note) == nil && note.Note != "" {
				return policy.CodeUpstreamUnavailable, sentences.Say(sentences.UnavailableNote, sys, note.Note), true, false
			}
			if idempotent {
				return policy.CodeUpstreamUnavailable, sentences.Say(sentences.Unavailable, sys), true, false
			}
			return policy.CodeUpstreamUnavailable, sentences.Say(sentences.UnavailableUnknown, sys), false, false
		case activities.ErrDefinitionChanged:
			return policy.CodeDefinitionChanged, sentences.Say(sentences.DefinitionChanged, sys), false, false
		case activities.ErrUpstream:
			return policy.CodeUpstreamError, sentences.Say(sentences.UpstreamRefused, sys, app.Message()), false, false
		}
	}
	return policy.CodeUpstreamError, sentences.Say(sentences.FailedUnexpectedly), false, false
}
