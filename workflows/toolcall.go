// Package workflows holds ToolCall, the durable workflow that carries one
// tool call from proposal to outcome along the contract's (docs/contract.md) chain.
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
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
	ApprovalKeys policy.ApprovalKeys
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
	c.finish(res)
	c.awaitHooks()
	return res, workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func (c *call) run() (ToolCallResult, error) {
	if why := c.idProblem(); why != "" {
		return c.denied(policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeInvalidArguments, Step: policy.StepArguments,
			Message: "The call's IDs cannot name it: " + why + ". Nothing ran; the agent backend must start it again with valid IDs."})
	}
	for {
		res, err := c.chain()
		if err != nil || c.signIn.need == nil {
			return res, err
		}
		// The person must sign in first: the chain runs again, from the
		// same input, with the credential of the new sign-in.
		resumed, res, err := c.awaitSignIn()
		if err != nil || !resumed {
			return res, err
		}
	}
}

// chain runs the contract's chain once. A call that needs a sign-in first
// returns with c.signIn.need set.
func (c *call) chain() (ToolCallResult, error) {
	v := c.check(nil)
	c.decision.facts = v.Tool
	if !v.Allowed() && v.Step == policy.StepCredential && c.needSignIn(v.Code, nil) {
		return ToolCallResult{}, nil
	}
	if v.Allowed() && v.NeedsPreview {
		pv, failed, err := c.preview(v)
		if err != nil || failed != nil || c.signIn.need != nil {
			return deref(failed), err
		}
		c.decision.dryRun = &pv
		v = c.check(&pv.ValueCents)
		if v.Allowed() && pv.Shortfall != "" {
			return c.failed(v, policy.CodeUpstreamError, fmt.Sprintf("Nothing can be planned: %s. Propose a smaller quantity, or tell the person.", pv.Shortfall), false, false)
		}
	}
	if v.Allowed() && v.Decision == policy.DecisionApprove && c.decision.dryRun == nil && v.Tool != nil && v.Tool.Pinned {
		if failed, err := c.accepted(v); err != nil || failed != nil {
			return deref(failed), err
		}
	}
	c.decision.argValue = v.ValueCents
	if v.Allowed() {
		var err error
		if v, err = c.admit(v); err != nil {
			return c.rerun(err)
		}
	}
	c.countDecision(v)
	if !v.Allowed() {
		return c.denied(v)
	}
	c.status.resource = v.Resource
	if v.Decision == policy.DecisionApprove {
		return c.approval(v)
	}
	return c.execute(v, v.Args, "")
}

func deref[T any](r *T) T {
	var zero T
	if r == nil {
		return zero
	}
	return *r
}

// call is the state of one ToolCall run.
type call struct {
	ctx      workflow.Context
	in       ToolCallInput
	settings Settings
	req      policy.Request
	status   Status
	key      string
	// version is the shape of the call (the "search-attributes" change).
	version workflow.Version
	// Each phase's state: what the chain decided, the sign-in the call
	// waits for, the card, and what the call has told others.
	decision decided
	signIn   signInWait
	card     cardState
	ledger   ledger
}

// decided is what the chain and admission settled for the call.
type decided struct {
	// fingerprint names what was asked (policy.Fingerprint of the input).
	fingerprint string
	// facts are the tool's spec facts recorded with the verdict.
	facts *policy.ToolFacts
	// argValue is the call's value when an arg holds it (the verdict's).
	argValue *int64
	// dryRun is the tool's dry run, once it ran.
	dryRun *activities.PreviewResult
	// requester is the person behind the call's credential, as admission
	// read it (unknown on calls admitted before it did).
	requester policy.Person
	// refusal is what admission's refusal tells the model beyond its
	// message: the equivalent card an already_pending call waits for, or
	// the tier a step_up_required caller lacks.
	refusal json.RawMessage
}

// signInWait is the call's wait for its person to sign in: what needs it,
// the rounds so far, the one deadline set at the first, and the
// credential a sign-in brought (the credential signal).
type signInWait struct {
	need          *signInNeed
	rounds        int
	timer         workflow.Future
	ttl           time.Duration
	expires       string
	credentialRef string
}

// cardState is the card's: the approved card an execution finishes, the
// approval's record written by the call's activity first, a rejection's
// note for the model, the decisions taken with the one that counted (refused
// at the end), and how many were refused. A card that locks on signed
// refusals alone (signedLock) counts the unsigned apart (unsigned), and
// how many of them were dropped past their cap unaudited.
type cardState struct {
	approved   *activities.ProjectInput
	before     *activities.RecordInput
	note       json.RawMessage
	late       []received
	refused    int
	signedLock bool
	unsigned   int
	dropped    int
	// seen holds the signatures (their bytes) of the signed decisions
	// judged so far, on a card where each counts once (judgeVersioned);
	// nil on earlier cards.
	seen map[string]bool
	// judging is the rules the card is judged by, as recorded when it
	// went up.
	judging judging
}

// ledger is what the call has told others: its first outcome, whether card
// events go to the webhook and the deliveries sent, and how many duplicates
// asked for something else.
type ledger struct {
	first     *Outcome
	hooks     bool
	sent      []workflow.Future
	conflicts int
}

func start(ctx workflow.Context, in ToolCallInput, s Settings) (*call, error) {
	c := &call{ctx: ctx, in: in, settings: s, key: workflow.GetInfo(ctx).WorkflowExecution.ID,
		req:    policy.Request{Tool: in.Tool, Args: in.Args, Session: in.Session},
		status: Status{Status: StatusDeciding, Tool: in.Tool, RunID: workflow.GetInfo(ctx).WorkflowExecution.RunID}}
	c.decision.fingerprint = policy.Fingerprint(c.req)
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (Status, error) { return c.status, nil }); err != nil {
		return nil, fmt.Errorf("status query: %w", err)
	}
	err := workflow.SetUpdateHandler(ctx, FirstOutcomeUpdate, func(ctx workflow.Context, asked ToolCallInput) (Outcome, error) {
		if conflict, err := c.conflicting(ctx, asked); conflict != nil || err != nil {
			return deref(conflict), err
		}
		if err := workflow.Await(ctx, func() bool { return c.ledger.first != nil }); err != nil {
			return Outcome{}, err
		}
		return *c.ledger.first, nil
	})
	if err != nil {
		return nil, fmt.Errorf("first outcome update: %w", err)
	}
	c.version = shape(ctx)
	return c, nil
}

// The shapes of a call, oldest first (docs: versioning policy; shape 3
// holds the shapes folded before any release). Code that differs between
// shapes compares c.version with these, never with a bare number.
const (
	// shapeEvidence: an approval's sign-in evidence is checked against
	// trusted identity providers, recorded with the keys.
	shapeEvidence workflow.Version = 4
	// shapeEscalation: an unanswered card escalates (a recorded fraction
	// of its TTL, a timer).
	shapeEscalation workflow.Version = 5
	// shapeSignInWait: a call that needs a sign-in waits for the
	// credential signal instead of ending.
	shapeSignInWait workflow.Version = 6
	// shapeLean: the call costs less (a dry run and the card's first write
	// in the workflow task, one record of the approval's settings, the
	// outcome written by the call's own activity, no upsert while
	// executing, one timer at a time), and records no version marker.
	shapeLean workflow.Version = 7
)

// currentShape is the shape of the calls this code starts.
const currentShape = shapeLean

// searchAttributesChange is the version marker in which calls of shapes 3-6
// recorded their shape.
const searchAttributesChange = "search-attributes"

// shape is the shape of the call, one version for all of it (docs:
// versioning policy). A new call is currentShape and records no marker, so
// it asks nothing of GetVersion (which would record a marker and an
// upsert). A replayed call of shapes 3-6 has its shape recorded as the
// searchAttributesChange marker; one without that marker is shapeLean.
// The next shape is to be recorded in the call's first side effect (the
// policy check), which a shapeLean call records without one.
func shape(ctx workflow.Context) workflow.Version {
	if !workflow.IsReplaying(ctx) {
		return currentShape
	}
	if v := workflow.GetVersion(ctx, searchAttributesChange, workflow.DefaultVersion, shapeSignInWait); v != workflow.DefaultVersion {
		return v
	}
	return currentShape
}

// check runs steps 0-6 (0-5 and a preview request for dry-run tools until
// their value is known). The verdict is recorded in the history, so a later
// change to the policy table never changes a call already in flight.
func (c *call) check(value *int64) policy.Verdict {
	var v policy.Verdict
	req := c.req
	summary := "policy check, steps 0-5 (value pending the dry run)"
	if value != nil {
		summary = fmt.Sprintf("policy check, steps 0-6 at %s", c.settings.Policy.FormatValue(c.in.Tool, *value))
	}
	enc := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: summary}, func(workflow.Context) any { return c.settings.Policy.Check(req, value) })
	if err := enc.Get(&v); err != nil {
		return policy.Verdict{Decision: policy.DecisionDeny, Code: policy.CodeInvalidArguments, Message: "The call could not be read. Check the arguments and call again."}
	}
	return v
}

// preview runs the tool's read-only dry run as the user. A failure ends the call.
func (c *call) preview(v policy.Verdict) (activities.PreviewResult, *ToolCallResult, error) {
	pv, err := c.dryRun(v, "dry run of "+c.in.Tool)
	if err == nil {
		return pv, nil, nil
	}
	failure := err
	code, msg, retryable, auth := upstreamFailure(failure, true, c.system())
	if unverified(failure) {
		// Refused before the dry run read anything: a denial like
		// admission's, audited here since admission never saw the call.
		c.decision.refusal = refusalResult(failure, nil)
		res, err := c.denied(policy.Verdict{Decision: policy.DecisionDeny, Code: code, Message: msg, Args: v.Args, Resource: v.Resource})
		return pv, &res, err
	}
	if !unverified(failure) && c.needSignIn(code, refusalResult(failure, nil)) {
		return pv, &ToolCallResult{}, nil
	}
	if code == policy.CodeUpstreamError {
		msg = "The dry run could not plan this: " + strings.TrimPrefix(msg, sentence(c.system())+" refused the call: ")
	}
	res, err := c.failed(v, code, msg, retryable, auth)
	if err == nil && res.Status == StatusFailed {
		res.Result = refusalResult(failure, res.Result)
	}
	return pv, &res, err
}

// accepted checks, before a card without a dry run goes up, that the
// tool's MCP server still defines it as a person accepted it: a changed
// definition ends the call before anyone is asked to approve it.
func (c *call) accepted(v policy.Verdict) (*ToolCallResult, error) {
	opts := readOptions("check that " + c.in.Tool + " is still defined as accepted")
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(c.ctx, localRead(opts)), acts.Accepted, c.previewInput(v)).Get(c.ctx, nil)
	if err == nil {
		return nil, nil
	}
	code, msg, retryable, auth := upstreamFailure(err, true, c.system())
	if c.needSignIn(code, refusalResult(err, nil)) {
		return &ToolCallResult{}, nil
	}
	res, err := c.failed(v, code, msg, retryable, auth)
	return &res, err
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

// failed ends a call that could not run, with its audit row.
func (c *call) failed(v policy.Verdict, code policy.Code, msg string, retryable, auth bool) (ToolCallResult, error) {
	c.setStatus(StatusFailed, code)
	if err := c.audit(activities.AuditInput{Key: "outcome", Event: activities.EventFailed, Reason: code, Message: msg, Args: v.Args, Resource: v.Resource, Value: c.value(), Claim: c.claim()}); err != nil {
		return c.rerun(err)
	}
	return c.result(StatusFailed, code, msg, retryable, auth, nil), nil
}

// admit runs step 7 on the recorded verdict against the audit log, which
// writes the decision row. The verdict stands unless a limit refuses it.
// Admission retries until PostgreSQL answers, so an error here is a bug.
func (c *call) admit(v policy.Verdict) (policy.Verdict, error) {
	var res activities.AdmitResult
	in := activities.AdmitInput{Verdict: v, Tool: c.in.Tool, Session: c.in.Session, Claim: c.claim(), CredentialRef: c.credential()}
	if c.decision.dryRun != nil {
		in.ValueCents, in.Action = &c.decision.dryRun.ValueCents, c.decision.dryRun.Action
	} else {
		in.ValueCents = c.decision.argValue
	}
	if v.Decision == policy.DecisionApprove {
		// One card per intent: an equivalent card already up ends this call.
		// The intent is what would run: the action, after session fill and the
		// dry run's choices (the assistant's justification is not part of it).
		args := v.Args
		if c.decision.dryRun != nil && len(c.decision.dryRun.Action) > 0 {
			args = c.decision.dryRun.Action
		}
		if intent, err := policy.Intent(c.in.Tool, v.Resource, args, c.intentRequester()); err == nil {
			in.Intent, in.TTLSeconds = intent, int64(c.settings.ApprovalTTL.Seconds())
		}
	}
	// Admission is keyed by run, so a repeat returns the recorded decision.
	f := workflow.ExecuteLocalActivity(localBookkeeping(c.ctx, "admit"), acts.Admit, in)
	if err := f.Get(c.ctx, &res); err != nil {
		return v, fmt.Errorf("admit: %w", err)
	}
	c.decision.requester = deref(res.Requester)
	if !res.Allowed() {
		if res.Pending != nil {
			c.decision.refusal, _ = json.Marshal(res.Pending)
		}
		if res.Unverified != nil {
			c.decision.refusal, _ = json.Marshal(res.Unverified)
		}
		return policy.Verdict{Decision: res.Decision, Code: res.Code, Message: res.Message, Step: res.Step}, nil
	}
	// Calls recorded when admission answered with a whole verdict carried the
	// decision there; it equals the recorded one unless a limit refused.
	v.Decision = res.Decision
	return v, nil
}

// intentRequester is who the call's intent is keyed by: its user, unless
// the tool acts on something shared (then "", everyone's).
func (c *call) intentRequester() string {
	if c.decision.facts != nil && c.decision.facts.PerRequester {
		return c.in.Session.UserID
	}
	return ""
}

// idProblem says why the call's IDs cannot name it: they must be valid and
// the workflow ID must be the one they make, so an ID maps back to one pair.
func (c *call) idProblem() string {
	if why := policy.CallIDProblem(c.in.Session.ConversationID, c.in.ToolCallID); why != "" {
		return why
	}
	if want := WorkflowID(c.in.Session.ConversationID, c.in.ToolCallID); c.key != want {
		return fmt.Sprintf("the workflow ID %q is not %q", c.key, want)
	}
	return ""
}

// askedAt is when the call was asked (its run started), RFC 3339: a
// requester tier's maximum age is measured back from it.
func (c *call) askedAt() string {
	return workflow.GetInfo(c.ctx).WorkflowStartTime.UTC().Format(time.RFC3339)
}

// claim is the claim a run's first write carries.
func (c *call) claim() *activities.Claim {
	return &activities.Claim{Fingerprint: c.decision.fingerprint}
}

// credential is the credential the call acts with: the session's, or the
// one a sign-in sent since.
func (c *call) credential() string {
	if c.signIn.credentialRef != "" {
		return c.signIn.credentialRef
	}
	return c.in.Session.CredentialRef
}

func (c *call) denied(v policy.Verdict) (ToolCallResult, error) {
	c.status.resource = c.resourceForAudit(v)
	c.setStatus(StatusDenied, v.Code)
	workflow.GetLogger(c.ctx).Info("denied", "tool", c.in.Tool, "code", v.Code)
	if v.Step < policy.StepRateLimit {
		err := c.audit(activities.AuditInput{Key: "decision", Event: activities.EventDenied, Reason: v.Code, Message: v.Message,
			Args: c.argsForAudit(v), Resource: c.resourceForAudit(v), Claim: c.claim()})
		if err != nil {
			return c.rerun(err)
		}
	}
	return c.result(StatusDenied, v.Code, v.Message, false, v.AuthRequired, c.decision.refusal), nil
}

func (c *call) argsForAudit(v policy.Verdict) json.RawMessage {
	if len(v.Args) > 0 {
		return v.Args
	}
	return c.in.Args
}

// resourceForAudit is the resource a refused call was about: the one it
// named, else the session's (policy.ResourceAbout), so "what happened at
// this resource" finds it.
func (c *call) resourceForAudit(v policy.Verdict) policy.ResourceRef {
	if v.Resource.Kind != "" {
		return v.Resource
	}
	return c.settings.Policy.ResourceAbout(c.in.Tool, c.in.Args, c.in.Session)
}

// execute runs the authorized args upstream, once unless the tool is idempotent.
func (c *call) execute(v policy.Verdict, args json.RawMessage, argsHash string) (ToolCallResult, error) {
	spec := c.toolFacts()
	c.setStatus(StatusExecuting, "")
	opts := workflow.ActivityOptions{StartToCloseTimeout: spec.Timeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, Summary: c.in.Tool + " upstream"}
	if spec.Idempotent {
		opts.ScheduleToCloseTimeout = 4*spec.Timeout + 15*time.Second
		opts.RetryPolicy = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 4,
			NonRetryableErrorTypes: []string{activities.ErrCredential, activities.ErrUpstream, activities.ErrBadInput}}
	}
	in := activities.CallInput{Acting: c.acting(v, args), IdempotencyKey: c.key, ArgsHash: argsHash, Before: c.card.before}
	executed := activities.AuditInput{Key: "outcome", Event: activities.EventExecuted, Reason: policy.CodeOK, Args: args, Resource: v.Resource, Value: c.value()}
	if c.version >= shapeLean && spec.Tier != policy.TierRead {
		after := executed
		after.Tool, after.Session = c.in.Tool, c.in.Session
		in.After = &activities.OutcomeRecord{Audit: after}
		if c.card.approved != nil {
			card := *c.card.approved
			card.Version, card.Status = cardFinal, activities.CardStatusAfter(activities.EventExecuted)
			in.After.Card = &card
		}
	}
	var res activities.CallResult
	var call workflow.Future
	if spec.Idempotent {
		// A repeated idempotent call is harmless: run it in the workflow task.
		call = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(c.ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout, RetryPolicy: opts.RetryPolicy,
			Summary: opts.Summary}), acts.CallTool, in)
	} else {
		call = workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, opts), acts.CallTool, in)
	}
	err := call.Get(c.ctx, &res)
	if err != nil {
		code, msg, retryable, auth := upstreamFailure(err, spec.Idempotent, c.system())
		// The credential is exchanged before anything is sent upstream, so a
		// call refused for it ran nothing and may wait for a sign-in.
		if !unverified(err) && c.needSignIn(code, refusalResult(err, nil)) {
			return ToolCallResult{}, nil
		}
		workflow.GetLogger(c.ctx).Warn("tool call failed", "tool", c.in.Tool, "code", code)
		c.setStatus(StatusFailed, code)
		if c.card.before != nil {
			// The call may have died before writing the approval: write it (keyed, so never twice).
			if err := c.record(c.card.before.Audit, c.card.before.Card, true); err != nil {
				return ToolCallResult{}, err
			}
		}
		if err := c.recordOutcome(activities.AuditInput{Key: "outcome", Event: activities.EventFailed, Reason: code, Message: msg, Args: args, Resource: v.Resource, Value: c.value()}); err != nil {
			return ToolCallResult{}, err
		}
		res := c.result(StatusFailed, code, msg, retryable, auth, refusalResult(err, nil))
		if unverified(err) {
			res.Card = "" // a refusal for the caller's tier says nothing of the action
		}
		return res, nil
	}
	c.setStatus(StatusExecuted, policy.CodeOK)
	// Reads are audited by their decision row alone; calls that change
	// something also get an executed row, which the call's activity wrote
	// unless it could not.
	if spec.Tier != policy.TierRead && !res.Recorded {
		executed.Result = res.Result
		if err := c.recordOutcome(executed); err != nil {
			return ToolCallResult{}, err
		}
	}
	workflow.GetLogger(c.ctx).Info("executed", "tool", c.in.Tool)
	done := "Done. Quote the result to the person in your own words."
	if c.status.Version > 1 {
		done = "Done, as an approver edited it: what ran is in the result, and it differs from what you proposed. Tell the person what ran, in your own words."
	}
	return c.result(StatusExecuted, policy.CodeOK, done, false, false, res.Result), nil
}

// unverified says an activity refused the call for the caller's verified
// tier: the model asks for a factor, never for a sign-in.
func unverified(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrUnverified
}

// toolFacts are the spec facts the call acts on: those recorded with its
// verdict, never the live spec.
func (c *call) toolFacts() policy.ToolFacts {
	if c.decision.facts != nil {
		return *c.decision.facts
	}
	// Every call records its facts with its verdict; should one lack them,
	// it runs as the most careful tool would: once, and audited.
	return policy.ToolFacts{Tier: policy.TierWrite, Timeout: 15 * time.Second}
}

// recordOutcome records how an execution ended: the audit row, and the
// approved card's final state in the same local write (the result is
// already in history, so a repeat changes nothing).
func (c *call) recordOutcome(in activities.AuditInput) error {
	if c.card.approved == nil {
		return c.audit(in)
	}
	card := *c.card.approved
	card.Version, card.Status, card.Result = cardFinal, activities.CardStatusAfter(in.Event), in.Result
	return c.record(in, card, true)
}

// system is how messages to the model name the call's upstream: its pack's
// own name for it.
func (c *call) system() string { return c.settings.Policy.System(c.in.Tool) }

// sentence is s with its first letter upper-case, to begin a sentence.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// upstreamFailure turns an activity error into a code and a note for the
// model, naming the upstream as system (e.g. "the member portal").
func upstreamFailure(err error, idempotent bool, system string) (policy.Code, string, bool, bool) {
	sys := sentence(system)
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if idempotent {
			return policy.CodeTimeout, sys + " did not answer in time. It is safe to call again with the same arguments.", true, false
		}
		return policy.CodeTimeout, sys + " did not answer in time, so it is unknown whether this took effect. Do not call again; tell the person to check before trying again.", false, false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case activities.ErrCredential:
			return policy.CodeCredentialUnavailable, "The person's sign-in could not be used (expired, revoked, or it does not hold what the session claims). Ask them to sign in again, then call again with the same arguments.", false, true
		case activities.ErrUnverified:
			var u activities.Unverified
			if app.HasDetails() && app.Details(&u) == nil {
				return policy.CodeStepUpRequired, u.Message(system), false, false
			}
			return policy.CodeStepUpRequired, "The caller is not verified for this. Do not do it another way; tell the caller.", false, false
		case activities.ErrStepUp:
			return policy.CodeStepUpRequired, "This tool needs a stronger sign-in than the person's (result: requiredTier, heldTier). Do not retry: ask the person to sign in again with the stronger method, then call again with the same arguments.", false, true
		case activities.ErrUnavailable:
			// A tool's own note is for a read; a write keeps the warning
			// that it may have taken effect.
			var note activities.UnavailableNote
			if idempotent && app.HasDetails() && app.Details(&note) == nil && note.Note != "" {
				return policy.CodeUpstreamUnavailable, sys + " is unavailable right now. " + note.Note, true, false
			}
			if idempotent {
				return policy.CodeUpstreamUnavailable, sys + " is unavailable right now. Call again in a minute with the same arguments.", true, false
			}
			return policy.CodeUpstreamUnavailable, sys + " is unavailable right now and it is unknown whether this took effect. Do not call again; tell the person to check shortly.", false, false
		case activities.ErrDefinitionChanged:
			return policy.CodeDefinitionChanged, sys + " now defines this tool otherwise than a person accepted, so it was not run. Do not call it again; tell the person that an operator must read and accept its new definition first.", false, false
		case activities.ErrUpstream:
			return policy.CodeUpstreamError, fmt.Sprintf("%s refused the call: %s. Fix the request if you can; otherwise tell the person.", sys, app.Message()), false, false
		}
	}
	return policy.CodeUpstreamError, "The call failed in an unexpected way. Do not retry; tell the person.", false, false
}

func (c *call) audit(in activities.AuditInput) error {
	in.Tool, in.Session = c.in.Tool, c.in.Session
	if err := workflow.ExecuteActivity(bookkeeping(c.ctx, "audit "+string(in.Event)), acts.Audit, in).Get(c.ctx, nil); err != nil {
		return fmt.Errorf("audit %s: %w", in.Event, err)
	}
	return nil
}

func (c *call) result(status CallStatus, code policy.Code, msg string, retryable, auth bool, result json.RawMessage) ToolCallResult {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	return ToolCallResult{Status: status, Code: code, Message: msg, Retryable: retryable, AuthRequired: auth,
		Result: result, Card: c.status.Card, IdempotencyKey: c.key}
}

// finish publishes the final result as the first outcome when nothing came before it.
func (c *call) finish(res ToolCallResult) {
	if c.ledger.first == nil {
		c.ledger.first = c.outcome(res)
	}
}

func (c *call) outcome(res ToolCallResult) *Outcome {
	return &Outcome{ToolCallResult: res, ValueCents: c.status.ValueCents, ApproverRole: c.status.ApproverRole,
		ExpiresAt: c.status.ExpiresAt, ArgsHash: c.status.ArgsHash, RunID: c.status.RunID, SignedVersion: c.status.SignedVersion}
}

func (c *call) value() *int64 {
	if c.decision.dryRun == nil {
		return c.decision.argValue
	}
	return &c.decision.dryRun.ValueCents
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
