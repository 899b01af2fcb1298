// Package workflows holds ToolCall, the durable workflow that carries one
// tool call from proposal to outcome along the contract's (docs/contract.md) chain.
package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Settings are a deployment's choices. The workflow records the ones it
// uses in its history, so a replay or a redeploy never changes them.
type Settings struct {
	// Policy is the packs the worker gates (internal/packs). The chain's
	// verdict is recorded, so a pack changed under a call in flight never
	// changes what that call does.
	Policy *policy.Policy
	// ApprovalTTL is how long a card waits for a decision; 30 minutes when zero.
	ApprovalTTL time.Duration
	// ApprovalKeys verify decisions; with none, every decision is refused.
	ApprovalKeys signoff.ApprovalKeys
	// WithdrawKeys verify a requester's withdrawal alone (the MCP
	// server's keys), never another decision.
	WithdrawKeys signoff.ApprovalKeys
	// ApproverIssuers are the identity providers whose sign-ins an approval
	// may carry as evidence; with none, no card that needs evidence can be
	// decided.
	ApproverIssuers []string
	// EscalateAfter is the fraction of the TTL after which an unanswered
	// card is also offered to the next role up; 0 means DefaultEscalateAfter,
	// 1 or more means never.
	EscalateAfter float64
	// SignInTTL is how long a call waits for the person to sign in;
	// DefaultSignInTTL when zero.
	SignInTTL time.Duration
	// Webhooks says the worker has a webhook to tell about cards (the
	// Notify activity); recorded with the approval trust when a card goes up.
	Webhooks bool
}

// DefaultEscalateAfter escalates an unanswered card at half its TTL.
const DefaultEscalateAfter = 0.5

// DefaultApprovalTTL is the wait of docs/contract.md.
const DefaultApprovalTTL = 30 * time.Minute

// Register registers the workflows on the worker.
func Register(w worker.WorkflowRegistry, s Settings) {
	if s.Policy == nil {
		panic("workflows: Settings.Policy is nil; build it from the packs (internal/packs)")
	}
	w.RegisterWorkflowWithOptions(s.ToolCall, workflow.RegisterOptions{Name: WorkflowType})
}

var acts *activities.Activities

// ToolCall authorizes one tool call and, if allowed (or approved), runs it
// once as the signed-in person.
func (s Settings) ToolCall(ctx workflow.Context, in ToolCallInput) (ToolCallResult, error) {
	c, err := start(ctx, in, s)
	if err != nil {
		return ToolCallResult{}, err
	}
	res, err := c.run()
	if err != nil {
		return res, err
	}
	c.board.publish(res)
	c.books.awaitHooks()
	return res, workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// run carries the call along the contract's chain: its IDs, the decision
// (steps 0-7), the card when a person must approve, the execution; and,
// when the person must sign in first, the wait for it, after which the
// chain runs again, from the same input, with the new sign-in's credential.
func (c *call) run() (ToolCallResult, error) {
	if why := idProblem(c.key, c.in); why != "" {
		return c.denied(decision{verdict: policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeInvalidArguments, Step: policy.StepArguments,
			Message: sentences.Say(sentences.BadIDs, why)}})
	}
	for {
		d, res, err := c.decide()
		switch {
		case err != nil || d == nil && c.signIn.need == nil:
			return res, err
		case d != nil && d.verdict.Decision == policy.DecisionApprove:
			res, err = c.approval(*d)
		case d != nil:
			res, err = c.execute(*d, d.verdict.Args, "", nil)
		}
		if err != nil || c.signIn.need == nil {
			return res, err
		}
		credentialRef, res, err := c.signIn.await(c.ctx, c.settings.SignInTTL, c.board, c.books, c.claims.claim())
		if err != nil || credentialRef == "" {
			return res, err
		}
		c.up.signedIn, c.req.Session.CredentialRef = credentialRef, credentialRef
	}
}

// call is the state of one ToolCall run: what was asked, under which
// settings and shape, and the parts each phase uses: its claim on its
// ID, what it shows (board), writes (books) and acts as upstream (up),
// and its wait for a sign-in. The decision and the card are values of
// their own (decision, card), passed from phase to phase.
type call struct {
	ctx      workflow.Context
	in       ToolCallInput
	settings Settings
	req      policy.Request
	key      string
	shape    shape
	system   string
	claims   *claims
	board    *board
	books    *books
	up       *upstream
	signIn   signInWait
}

func start(ctx workflow.Context, in ToolCallInput, s Settings) (*call, error) {
	info := workflow.GetInfo(ctx)
	c := &call{ctx: ctx, in: in, settings: s, key: info.WorkflowExecution.ID, system: s.Policy.System(in.Tool),
		req: policy.Request{Tool: in.Tool, Args: in.Args, Session: in.Session}}
	c.claims = &claims{key: c.key, toolCallID: in.ToolCallID, fingerprint: policy.Fingerprint(c.req), req: &c.req}
	c.board = &board{ctx: ctx, policy: s.Policy, in: in, key: c.key, status: Status{Status: StatusDeciding, Tool: in.Tool, RunID: info.WorkflowExecution.RunID}}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (Status, error) { return c.board.status, nil }); err != nil {
		return nil, fmt.Errorf("status query: %w", err)
	}
	err := workflow.SetUpdateHandler(ctx, FirstOutcomeUpdate, func(ctx workflow.Context, asked ToolCallInput) (Outcome, error) {
		if conflict, err := c.claims.conflicting(ctx, asked); conflict != nil || err != nil {
			return deref(conflict), err
		}
		if err := workflow.Await(ctx, func() bool { return c.board.first != nil }); err != nil {
			return Outcome{}, err
		}
		return *c.board.first, nil
	})
	if err != nil {
		return nil, fmt.Errorf("first outcome update: %w", err)
	}
	c.shape = shapeOf(ctx)
	c.board.shape = c.shape
	c.books = &books{ctx: ctx, tool: in.Tool, session: in.Session, key: c.key, runID: info.WorkflowExecution.RunID, shape: c.shape, metricTool: metricTool(s.Policy, in.Tool)}
	c.up = &upstream{ctx: ctx, in: in, shape: c.shape}
	c.signIn.waits = c.shape.waitsForSignIn() && in.Session.UserID != ""
	return c, nil
}

// decide runs steps 0-7 once: the check, the dry run and the check at its
// value, a pinned tool's definition before a card, and admission. It
// returns the decision for a call that goes on to a card or to its
// execution; else it has ended the call (denied, failed) with res, or,
// with neither, the person must sign in first (c.signIn.need).
func (c *call) decide() (*decision, ToolCallResult, error) {
	v := c.check(c.req.Args, nil)
	d := decision{facts: v.Tool}
	if !v.Allowed() && v.Step == policy.StepCredential && c.signIn.ask(v.Code, nil, false, v) {
		return nil, ToolCallResult{}, nil
	}
	if v.Allowed() && v.NeedsPreview {
		pv, err := c.up.dryRun(v, "dry run of "+c.in.Tool)
		if err != nil {
			res, err := c.readFailed(d, v, err, true)
			return nil, res, err
		}
		d.dryRun = &pv
		v = c.check(c.req.Args, &pv.ValueCents)
		if v.Allowed() && pv.Shortfall != "" {
			res, err := c.failed(d, v, policy.CodeUpstreamError, sentences.Say(sentences.NothingPlanned, pv.Shortfall), false, false)
			return nil, res, err
		}
	}
	// A card without a dry run goes up only while the tool's MCP server
	// still defines it as a person accepted it.
	if v.Allowed() && v.Decision == policy.DecisionApprove && d.dryRun == nil && v.Tool != nil && v.Tool.Pinned {
		if err := c.up.accepted(v); err != nil {
			res, err := c.readFailed(d, v, err, false)
			return nil, res, err
		}
	}
	d.argValue, d.verdict = v.ValueCents, v
	if v.Allowed() {
		var err error
		if d, err = c.admit(d); err != nil {
			res, err := c.rerun(err)
			return nil, res, err
		}
	}
	countDecision(c.ctx, c.books.metricTool, d.verdict)
	if !d.verdict.Allowed() {
		res, err := c.denied(d)
		return nil, res, err
	}
	c.board.status.resource = d.verdict.Resource
	return &d, ToolCallResult{}, nil
}

// check runs steps 0-6 on args (the call's, or an edit's): 0-5 and a
// preview request for dry-run tools until their value is known. The
// verdict is recorded in the history, so a later change to the policy
// table never changes a call already in flight.
func (c *call) check(args json.RawMessage, value *int64) policy.Verdict {
	var v policy.Verdict
	req := c.req
	req.Args = args
	summary := "policy check, steps 0-5 (value pending the dry run)"
	if value != nil {
		summary = fmt.Sprintf("policy check, steps 0-6 at %s", c.settings.Policy.FormatValue(c.in.Tool, *value))
	}
	enc := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: summary}, func(workflow.Context) any { return c.settings.Policy.Check(req, value) })
	if err := enc.Get(&v); err != nil {
		return policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeInvalidArguments, Message: sentences.Say(sentences.CallUnreadable)}
	}
	return v
}

// readFailed ends a call whose read before the card failed (its dry run,
// or the check of a pinned tool's definition), or asks for a sign-in when
// one would let it go on.
func (c *call) readFailed(d decision, v policy.Verdict, err error, dryRun bool) (ToolCallResult, error) {
	code, msg, retryable, auth := upstreamFailure(err, true, c.system)
	if dryRun && unverified(err) {
		// Refused before the dry run read anything: a denial like
		// admission's, audited here since admission never saw the call.
		d.refusal, d.verdict = refusalResult(err, nil), policy.Verdict{Decision: policy.DecisionDeny, Code: code, Message: msg, Args: v.Args, Resource: v.Resource}
		return c.denied(d)
	}
	if c.signIn.ask(code, refusalResult(err, nil), false, v) {
		return ToolCallResult{}, nil
	}
	if !dryRun {
		return c.failed(d, v, code, msg, retryable, auth)
	}
	if code == policy.CodeUpstreamError {
		msg = sentences.Say(sentences.DryRunRefused, strings.TrimPrefix(msg, sentences.Say(sentences.UpstreamRefusedBy, sentences.Capital(c.system))))
	}
	res, ferr := c.failed(d, v, code, msg, retryable, auth)
	if ferr == nil && res.Status == StatusFailed {
		res.Result = refusalResult(err, res.Result)
	}
	return res, ferr
}

// failed ends a call that could not run, with its audit row.
func (c *call) failed(d decision, v policy.Verdict, code policy.Code, msg string, retryable, auth bool) (ToolCallResult, error) {
	c.board.set(StatusFailed, code)
	if err := c.books.audit(activities.AuditInput{Key: "outcome", Event: activities.EventFailed, Reason: code, Message: msg, Args: v.Args, Resource: v.Resource, Value: d.value(), Claim: c.claims.claim()}); err != nil {
		return c.rerun(err)
	}
	return c.board.result(StatusFailed, code, msg, retryable, auth, nil), nil
}

// admit runs step 7 on the recorded verdict against the audit log, which
// writes the decision row: the decision it returns stands unless a limit
// refuses it. Admission is keyed by run, so a repeat returns the recorded
// decision; it retries until PostgreSQL answers, so an error here is a bug.
func (c *call) admit(d decision) (decision, error) {
	var res activities.AdmitResult
	ttl := c.settings.ApprovalTTL
	in := d.admitInput(c.in.Tool, c.in.Session, c.claims.claim(), c.up.credential(), ttl)
	if err := workflow.ExecuteLocalActivity(localBookkeeping(c.ctx, "admit"), acts.Admit, in).Get(c.ctx, &res); err != nil {
		return d, fmt.Errorf("admit: %w", err)
	}
	return d.admitted(res), nil
}

// idProblem says why the call's IDs cannot name it: they must be valid and
// the workflow ID (key) must be the one they make, so an ID maps back to
// one pair.
func idProblem(key string, in ToolCallInput) string {
	if why := policy.CallIDProblem(in.Session.ConversationID, in.ToolCallID); why != "" {
		return why
	}
	if want := WorkflowID(in.Session.ConversationID, in.ToolCallID); key != want {
		return fmt.Sprintf("the workflow ID %q is not %q", key, want)
	}
	return ""
}

// denied ends a call the chain refused (d.verdict says why), audited
// unless a rate limit refused it.
func (c *call) denied(d decision) (ToolCallResult, error) {
	v := d.verdict
	about := c.board.about(v)
	c.board.status.resource = about
	c.board.set(StatusDenied, v.Code)
	workflow.GetLogger(c.ctx).Info("denied", "tool", c.in.Tool, "code", v.Code)
	if v.Step < policy.StepRateLimit {
		args := v.Args
		if len(args) == 0 {
			args = c.in.Args
		}
		err := c.books.audit(activities.AuditInput{Key: "decision", Event: activities.EventDenied, Reason: v.Code, Message: v.Message,
			Args: args, Resource: about, Claim: c.claims.claim()})
		if err != nil {
			return c.rerun(err)
		}
	}
	return c.board.result(StatusDenied, v.Code, v.Message, false, v.AuthRequired, d.refusal), nil
}
