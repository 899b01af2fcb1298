package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Start starts the call's workflow without waiting for an outcome, or
// attaches to it while it runs. Once the call has ended, a start of its ID
// makes a run that answers with the first outcome (or idempotency_conflict)
// and does nothing else. Start does not compare the input with a running
// call's; Call does.
func Start(ctx context.Context, c client.Client, p *policy.Policy, taskQueue string, in ToolCallInput) (client.WorkflowRun, error) {
	if err := checkIDs(in); err != nil {
		return nil, err
	}
	in.Args = p.RedactPII(in.Tool, in.Args)
	id := WorkflowID(in.Session.ConversationID, in.ToolCallID)
	run, err := c.ExecuteWorkflow(ctx, startOptions(p, id, taskQueue, in), WorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return c.GetWorkflow(ctx, id, ""), nil
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	return run, nil
}

// Call starts the call's workflow (or attaches to it) and returns its first
// outcome in one round trip, using Update-with-Start: the final result
// when it needs no person, or the pending card. run.Get waits for the end.
//
// The Update carries the input: a duplicate that attaches to a call asking
// for something else (another tool, other args, another session) gets
// idempotency_conflict, never that call's outcome; and an ended call's ID
// starts a run that answers with the first outcome or the conflict.
func Call(ctx context.Context, c client.Client, p *policy.Policy, taskQueue string, in ToolCallInput, opts ...StartOption) (Outcome, client.WorkflowRun, error) {
	if err := checkIDs(in); err != nil {
		return Outcome{}, nil, err
	}
	in.Args = p.RedactPII(in.Tool, in.Args)
	id := WorkflowID(in.Session.ConversationID, in.ToolCallID)
	start := startOptions(p, id, taskQueue, in)
	for _, o := range opts {
		o(&start)
	}
	op := c.NewWithStartWorkflowOperation(start, WorkflowType, in)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: FirstOutcomeUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{in}},
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// The call already ended: its final result is its outcome.
		run := c.GetWorkflow(ctx, id, "")
		var res ToolCallResult
		if err := run.Get(ctx, &res); err != nil {
			return Outcome{}, nil, fmt.Errorf("%s: %w", id, err)
		}
		return Outcome{ToolCallResult: res}, run, nil
	}
	if err != nil {
		return Outcome{}, nil, fmt.Errorf("start %s: %w", id, err)
	}
	var out Outcome
	if err := h.Get(ctx, &out); err != nil {
		return Outcome{}, nil, fmt.Errorf("first outcome of %s: %w", id, err)
	}
	if out.Code == policy.CodeIdempotencyConflict {
		return out, nil, nil // the run belongs to another call: no handle to its result
	}
	return out, c.GetWorkflow(ctx, id, h.RunID()), nil
}

// checkIDs refuses IDs that cannot name a call before anything starts.
func checkIDs(in ToolCallInput) error {
	if why := policy.CallIDProblem(in.Session.ConversationID, in.ToolCallID); why != "" {
		return fmt.Errorf("%s: together they name the call and its idempotency key", why)
	}
	return nil
}

// SendDecision sends a person's decision on the card a call shows now, signed
// by signer for that run, expiry and version. An empty args hash is filled
// from the card; a hash the card no longer shows is refused here rather
// than signed for today's version. (A hash that edits led back to is the
// card's again, and is signed for today's version: the operator decides on
// what the card shows now.)
func SendDecision(ctx context.Context, c client.Client, workflowID string, a signoff.Approval, signer signoff.Signer) error {
	v, err := c.QueryWorkflow(ctx, workflowID, "", StatusQuery)
	if err != nil {
		return fmt.Errorf("read the card of %s: %w", workflowID, err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		return err
	}
	if st.Status != StatusPendingApproval {
		return fmt.Errorf("%s is %s, not pending approval", workflowID, st.Status)
	}
	switch {
	case a.ArgsHash == "":
		a.ArgsHash = st.ArgsHash
	case a.ArgsHash != st.ArgsHash:
		return fmt.Errorf("%s now shows another card (version %d, args hash %s): read it again and decide on what it shows", workflowID, max(1, st.Version), st.ArgsHash)
	}
	a = signer.Sign(a, st.CardRef(workflowID), time.Now().UTC().Format(time.RFC3339))
	if err := c.SignalWorkflow(ctx, workflowID, st.RunID, ApprovalSignal, a); err != nil {
		return fmt.Errorf("signal %s: %w", workflowID, err)
	}
	return nil
}

// Resume carries a call that waits for the person to sign in on, with the
// credential of their new sign-in. It refuses a call that is not waiting,
// so a credential is never left in a history for nothing.
func Resume(ctx context.Context, c client.Client, workflowID, credentialRef string) error {
	if _, err := DecodeCredential(mustJSON(CredentialInput{CredentialRef: credentialRef})); err != nil {
		return err
	}
	v, err := c.QueryWorkflow(ctx, workflowID, "", StatusQuery)
	if err != nil {
		return fmt.Errorf("read the status of %s: %w", workflowID, err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		return err
	}
	if st.Status != StatusAwaitingSignIn {
		return fmt.Errorf("%s is %s, not awaiting a sign-in", workflowID, st.Status)
	}
	if err := c.SignalWorkflow(ctx, workflowID, st.RunID, CredentialSignal, CredentialInput{CredentialRef: credentialRef}); err != nil {
		return fmt.Errorf("signal %s: %w", workflowID, err)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// CardRef names the card a status shows, for signing a decision on it.
func (s Status) CardRef(workflowID string) signoff.CardRef {
	return signoff.CardRef{WorkflowID: workflowID, RunID: s.RunID, ExpiresAt: s.ExpiresAt, Version: s.SignedVersion}
}

// CardRef names the card an outcome shows, for signing a decision on it.
func (o Outcome) CardRef() signoff.CardRef {
	return signoff.CardRef{WorkflowID: o.IdempotencyKey, RunID: o.RunID, ExpiresAt: o.ExpiresAt, Version: o.SignedVersion}
}

// StartOption adds to how Call starts a call.
type StartOption func(*client.StartWorkflowOptions)

// StartedBy records the person who asks for the call (the issuer and
// subject of their sign-in) in its memo (RequesterMemo), for readers that
// must tell people apart where user IDs may be shared: the MCP server's
// status tool shows a call to the person who started it alone.
func StartedBy(p signoff.Person) StartOption {
	return func(o *client.StartWorkflowOptions) {
		if p.Known() {
			o.Memo = map[string]any{RequesterMemo: p}
		}
	}
}

// startOptions attach duplicates to the existing call, never run one twice,
// and make the call findable and readable in Temporal Web from its start.
func startOptions(p *policy.Policy, id, taskQueue string, in ToolCallInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A closed ID starts a run that finds the call claimed: it answers
		// with the first outcome, or idempotency_conflict if it asks for
		// something else, and never admits, audits or executes again.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: StartAttributes(p, in),
		StaticSummary:         StaticSummary(p, in),
		// When this client shares its process with a worker on the queue,
		// the first workflow task comes back with the start.
		EnableEagerStart: true,
	}
}
