// Package workflows holds ToolCall, the durable workflow that carries one
// tool call from proposal to outcome along DESIGN.md's chain.
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Wire names of DESIGN.md.
const (
	TaskQueue      = "toolgate"
	WorkflowType   = "ToolCall"
	StatusQuery    = "status"
	ApprovalSignal = "approval"
)

// Result statuses and in-flight statuses of the status query.
const (
	StatusDeciding        = "deciding"
	StatusPendingApproval = "pending_approval"
	StatusExecuting       = "executing"
	StatusExecuted        = "executed"
	StatusDenied          = "denied"
	StatusRejected        = "rejected"
	StatusExpired         = "expired"
	StatusFailed          = "failed"
)

// WorkflowID is the ID of the call's workflow and its idempotency key.
func WorkflowID(conversationID, toolCallID string) string {
	return "toolcall-" + conversationID + "-" + toolCallID
}

// ToolCallInput is what an agent backend sends: the proposed call and the session.
type ToolCallInput struct {
	Tool       string          `json:"tool"`
	ToolCallID string          `json:"toolCallId"`
	Args       json.RawMessage `json:"args"`
	Session    policy.Session  `json:"session"`
}

// ToolCallResult is the outcome. Business outcomes complete the workflow
// normally; a workflow failure means a bug.
type ToolCallResult struct {
	Status         string          `json:"status"`
	Code           policy.Code     `json:"code"`
	Message        string          `json:"message"`
	Retryable      bool            `json:"retryable"`
	AuthRequired   bool            `json:"authRequired"`
	Result         json.RawMessage `json:"result"`
	Card           string          `json:"card"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// Status answers the status query.
type Status struct {
	Status       string      `json:"status"`
	Tool         string      `json:"tool"`
	Card         string      `json:"card"`
	ValueCents   int64       `json:"valueCents"`
	ApproverRole policy.Role `json:"approverRole"`
	ExpiresAt    string      `json:"expiresAt"`
	ArgsHash     string      `json:"argsHash"`
}

// Register registers the workflows on the worker.
func Register(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(ToolCall, workflow.RegisterOptions{Name: WorkflowType})
}

var acts *activities.Activities

// ToolCall authorizes one tool call and, if allowed, runs it once as the
// signed-in person.
func ToolCall(ctx workflow.Context, in ToolCallInput) (ToolCallResult, error) {
	c, err := start(ctx, in)
	if err != nil {
		return ToolCallResult{}, err
	}
	v := c.check()
	if v.Allowed() {
		if v, err = c.admit(); err != nil {
			return ToolCallResult{}, err
		}
	}
	if !v.Allowed() {
		return c.denied(v)
	}
	if v.Decision == policy.DecisionApprove {
		return c.denied(policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeToolDenied, Step: policy.StepNotDenied,
			Message: fmt.Sprintf("%s needs a person's approval, and approvals are not enabled in this deployment. Do not retry; tell the person.", in.Tool)})
	}
	return c.execute(v)
}

// call is the state of one ToolCall run.
type call struct {
	ctx    workflow.Context
	in     ToolCallInput
	req    policy.Request
	status Status
	key    string
}

func start(ctx workflow.Context, in ToolCallInput) (*call, error) {
	c := &call{ctx: ctx, in: in, key: workflow.GetInfo(ctx).WorkflowExecution.ID,
		req:    policy.Request{Tool: in.Tool, Args: in.Args, Session: in.Session},
		status: Status{Status: StatusDeciding, Tool: in.Tool}}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (Status, error) { return c.status, nil }); err != nil {
		return nil, fmt.Errorf("status query: %w", err)
	}
	return c, nil
}

// check runs steps 0-6. The verdict is recorded in the history, so a later
// change to the policy table never changes a call already in flight.
func (c *call) check() policy.Verdict {
	var v policy.Verdict
	req := c.req
	enc := workflow.SideEffect(c.ctx, func(workflow.Context) any { return policy.Default().Check(req, nil) })
	if err := enc.Get(&v); err != nil {
		return policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeInvalidArguments, Message: "The call could not be read. Check the arguments and call again."}
	}
	return v
}

// admit runs step 7 against the audit log and records the decision row.
// Admission retries until PostgreSQL answers, so an error here is a bug.
func (c *call) admit() (policy.Verdict, error) {
	var v policy.Verdict
	if err := workflow.ExecuteActivity(bookkeeping(c.ctx), acts.Admit, activities.AdmitInput{Request: c.req}).Get(c.ctx, &v); err != nil {
		return v, fmt.Errorf("admit: %w", err)
	}
	return v, nil
}

func (c *call) denied(v policy.Verdict) (ToolCallResult, error) {
	c.status.Status = StatusDenied
	workflow.GetLogger(c.ctx).Info("denied", "tool", c.in.Tool, "code", v.Code)
	if v.Step < policy.StepRateLimit {
		err := c.audit(activities.AuditInput{Key: "decision", Event: activities.EventDenied, Reason: v.Code, Message: v.Message, Args: c.argsForAudit(v), StoreID: v.StoreID})
		if err != nil {
			return ToolCallResult{}, err
		}
	}
	return c.result(StatusDenied, v.Code, v.Message, false, v.AuthRequired, nil), nil
}

func (c *call) argsForAudit(v policy.Verdict) json.RawMessage {
	if len(v.Args) > 0 {
		return v.Args
	}
	return c.in.Args
}

// execute runs the authorized args upstream, once unless the tool is idempotent.
func (c *call) execute(v policy.Verdict) (ToolCallResult, error) {
	spec, _ := policy.Default().Spec(c.in.Tool)
	c.status.Status = StatusExecuting
	opts := workflow.ActivityOptions{StartToCloseTimeout: spec.Timeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}}
	if spec.Idempotent {
		opts.ScheduleToCloseTimeout = 4*spec.Timeout + 15*time.Second
		opts.RetryPolicy = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 4,
			NonRetryableErrorTypes: []string{activities.ErrCredential, activities.ErrUpstream, activities.ErrBadInput}}
	}
	in := activities.CallInput{Tool: c.in.Tool, Args: v.Args, StoreID: v.StoreID, UserID: c.in.Session.UserID,
		CredentialRef: c.in.Session.CredentialRef, IdempotencyKey: c.key}
	var res activities.CallResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, opts), acts.CallTool, in).Get(c.ctx, &res)
	if err != nil {
		code, msg, retryable, auth := upstreamFailure(err, spec)
		workflow.GetLogger(c.ctx).Warn("tool call failed", "tool", c.in.Tool, "code", code)
		c.status.Status = StatusFailed
		if err := c.audit(activities.AuditInput{Key: "outcome", Event: activities.EventFailed, Reason: code, Message: msg, Args: v.Args, StoreID: v.StoreID}); err != nil {
			return ToolCallResult{}, err
		}
		return c.result(StatusFailed, code, msg, retryable, auth, nil), nil
	}
	c.status.Status = StatusExecuted
	if err := c.audit(activities.AuditInput{Key: "outcome", Event: activities.EventExecuted, Reason: policy.CodeOK, Args: v.Args, StoreID: v.StoreID, Result: res.Result}); err != nil {
		return ToolCallResult{}, err
	}
	workflow.GetLogger(c.ctx).Info("executed", "tool", c.in.Tool)
	return c.result(StatusExecuted, policy.CodeOK, "Done. Quote the result to the person in your own words.", false, false, res.Result), nil
}

// upstreamFailure turns an activity error into a code and a note for the model.
func upstreamFailure(err error, spec policy.ToolSpec) (policy.Code, string, bool, bool) {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if spec.Idempotent {
			return policy.CodeTimeout, "The store system did not answer in time. It is safe to call again with the same arguments.", true, false
		}
		return policy.CodeTimeout, "The store system did not answer in time, so it is unknown whether this took effect. Do not call again; tell the person to check before trying again.", false, false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case activities.ErrCredential:
			return policy.CodeCredentialUnavailable, "The person's sign-in could not be used (expired or revoked). Ask them to sign in again, then call again with the same arguments.", false, true
		case activities.ErrUnavailable:
			if spec.Idempotent {
				return policy.CodeUpstreamUnavailable, "The store system is unavailable right now. Call again in a minute with the same arguments.", true, false
			}
			return policy.CodeUpstreamUnavailable, "The store system is unavailable right now and it is unknown whether this took effect. Do not call again; tell the person to check shortly.", false, false
		case activities.ErrUpstream:
			return policy.CodeUpstreamError, fmt.Sprintf("The store system refused the call: %s. Fix the request if you can; otherwise tell the person.", app.Message()), false, false
		}
	}
	return policy.CodeUpstreamError, "The call failed in an unexpected way. Do not retry; tell the person.", false, false
}

func (c *call) audit(in activities.AuditInput) error {
	in.Tool, in.Session = c.in.Tool, c.in.Session
	if err := workflow.ExecuteActivity(bookkeeping(c.ctx), acts.Audit, in).Get(c.ctx, nil); err != nil {
		return fmt.Errorf("audit %s: %w", in.Event, err)
	}
	return nil
}

func (c *call) result(status string, code policy.Code, msg string, retryable, auth bool, result json.RawMessage) ToolCallResult {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	return ToolCallResult{Status: status, Code: code, Message: msg, Retryable: retryable, AuthRequired: auth,
		Result: result, Card: c.status.Card, IdempotencyKey: c.key}
}

// bookkeeping options: audit and admission are keyed for dedup, so they
// retry until PostgreSQL answers; nothing is dropped while it is down.
func bookkeeping(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadInput}},
	})
}
