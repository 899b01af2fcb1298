package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// MaxEdits bounds the versions an edit can make of one card, so no
// approver can grow a call's history without end; the next edit is refused.
const MaxEdits = 5

// revise runs an approver's edit: the chain again on the edited args (the
// checks, a fresh dry run as the requester, the value against the hard
// limit and the routing, the limits with the new value), and, if it all
// passes, puts the card up as a new version: a new args hash (the old one
// is refused from then on), value, approver role and evidence, and no
// approvals counted yet. An edit that fails is refused like any decision,
// audited with its code, and the card stays as it was; one that finds a
// pinned tool no longer as accepted ends the card (codeChanged).
func (c *call) revise(g *guard, v *policy.Verdict, a policy.Approval) (CallStatus, error) {
	refuse := func(code policy.Code, why string) (CallStatus, error) {
		return "", c.refuseAll([]refusal{{received: received{a: a}, code: code, why: "the edit was not applied: " + why, verified: true}}, 0, "", "")
	}
	// A pinned tool (recorded so since the check before a card) found no
	// longer as accepted ends the card: no version of it can run.
	changed := func(err error, nv policy.Verdict) (CallStatus, bool) {
		code, msg, _, _ := upstreamFailure(err, true, c.system())
		if code != policy.CodeDefinitionChanged || nv.Tool == nil || !nv.Tool.Pinned {
			return "", false
		}
		g.changed = msg
		return codeChanged, true
	}
	if g.version > MaxEdits {
		return refuse(policy.CodeInvalidArguments, fmt.Sprintf("the card has been edited %d times, the most it takes; approve or reject it as it is", MaxEdits))
	}
	args, err := policy.ApplyEdit(v.Args, a.Edit, g.Editable)
	if err != nil {
		return refuse(policy.CodeInvalidArguments, err.Error())
	}
	nv := c.checkArgs(args, nil)
	var pv activities.PreviewResult
	if nv.Allowed() && nv.NeedsPreview {
		if pv, err = c.dryRun(nv, "dry run of the edited "+c.in.Tool); err != nil {
			if ended, ok := changed(err, nv); ok {
				return ended, nil
			}
			code, msg, _, _ := upstreamFailure(err, true, c.system())
			return refuse(code, "its dry run failed: "+msg)
		}
		if nv = c.checkArgs(args, &pv.ValueCents); nv.Allowed() && pv.Shortfall != "" {
			return refuse(policy.CodeUpstreamError, "nothing can be planned: "+pv.Shortfall)
		}
	}
	if nv.Allowed() && !nv.NeedsPreview && nv.Tool != nil && nv.Tool.Pinned {
		opts := readOptions("check that " + c.in.Tool + " is still defined as accepted")
		if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(c.ctx, localRead(opts)), acts.Accepted, c.previewInput(nv)).Get(c.ctx, nil); err != nil {
			if ended, ok := changed(err, nv); ok {
				return ended, nil
			}
			code, msg, _, _ := upstreamFailure(err, true, c.system())
			return refuse(code, "its tool could not be checked: "+msg)
		}
	}
	if !nv.NeedsPreview && nv.ValueCents != nil {
		pv.ValueCents = *nv.ValueCents // the value is an arg's, edited with the rest
	}
	switch {
	case !nv.Allowed():
		return refuse(nv.Code, nv.Message)
	case nv.Decision != policy.DecisionApprove || nv.NeedsPreview:
		return refuse(policy.CodeInvalidArguments, "an edit must leave a card for a person to decide")
	}
	action := nv.Args
	if len(pv.Action) > 0 {
		action = pv.Action
	}
	hash, err := policy.ArgsHash(c.in.Tool, action)
	if err != nil {
		return "", fmt.Errorf("hash the edited action: %w", err)
	}
	if hash == g.ArgsHash {
		return refuse(policy.CodeInvalidArguments, "it changes nothing that would run")
	}
	prev := c.status.ValueCents
	need := max(1, nv.Approvals)
	card := g.pendingCard
	card.Args, card.ArgsHash, card.Card, card.ValueCents, card.ApproverRole = action, hash, pv.Card, pv.ValueCents, nv.ApproverRole
	card.Evidence, card.ApprovalsNeeded, card.Approvals, card.CardVersion = nv.Evidence, need, nil, g.version+1
	card.Justification = policy.JustificationOf(nv.Args)
	if g.Card.Version > 0 {
		card.SignedVersion = card.CardVersion
	}
	if g.Escalated && nv.EscalateTo != "" {
		card.EscalatedTo = nv.EscalateTo
	}
	msg := fmt.Sprintf("Version %d: %s edited %s; %s (was %s), routed to the %s.", card.CardVersion, a.Approver.UserID, editSummary(a.Edit),
		c.settings.Policy.FormatValue(c.in.Tool, pv.ValueCents), c.settings.Policy.FormatValue(c.in.Tool, prev), strings.ReplaceAll(string(nv.ApproverRole), "_", " "))
	if a.Reason != "" {
		msg += " Their note: " + a.Reason
	}
	intent, _ := policy.Intent(c.in.Tool, nv.Resource, action, c.intentRequester())
	in := activities.ReviseInput{Verdict: nv, ValueCents: pv.ValueCents, PrevValueCents: prev, Intent: intent, Card: card,
		Audit: activities.AuditInput{Key: fmt.Sprintf("edited-%d", card.CardVersion), Event: activities.EventEdited, Reason: policy.CodeOK, Message: msg,
			Args: action, Resource: nv.Resource, Value: &pv.ValueCents, Approver: &a.Approver, Evidence: a.Evidence, Tool: c.in.Tool, Session: c.in.Session}}
	var res activities.ReviseResult
	if err := workflow.ExecuteActivity(bookkeeping(c.ctx, fmt.Sprintf("revise the card to version %d", card.CardVersion)), acts.Revise, in).Get(c.ctx, &res); err != nil {
		return "", fmt.Errorf("revise the card: %w", err)
	}
	if res.Code != policy.CodeOK {
		return refuse(res.Code, res.Message)
	}
	workflow.GetLogger(c.ctx).Info("card edited", "version", card.CardVersion, "by", a.Approver.UserID, "approverRole", nv.ApproverRole)
	*v = nv
	c.decision.dryRun = &pv
	g.Role, g.ArgsHash, g.Evidence, g.Need, g.Approvals, g.Action = nv.ApproverRole, hash, nv.Evidence, need, nil, action
	g.EscalateTo, g.version, g.pendingCard, g.Card.Version = nv.EscalateTo, card.CardVersion, card, card.SignedVersion
	c.status.Card, c.status.ValueCents, c.status.ApproverRole, c.status.ArgsHash = pv.Card, pv.ValueCents, nv.ApproverRole, hash
	c.status.ApprovalsNeeded, c.status.ApprovedBy, c.status.Version, c.status.EscalatedTo = need, nil, card.CardVersion, card.EscalatedTo
	c.status.resource, c.status.SignedVersion = nv.Resource, card.SignedVersion
	c.setStatus(StatusPendingApproval, policy.CodeOK)
	c.notify(activities.CardEventPending, card, "")
	return "", nil
}

// checkArgs runs steps 0-6 on other args of the same call (an edit's),
// recorded like check.
func (c *call) checkArgs(args json.RawMessage, value *int64) policy.Verdict {
	saved := c.req.Args
	c.req.Args = args
	defer func() { c.req.Args = saved }()
	return c.check(value)
}

// dryRun runs the tool's dry run as the requester and returns its error
// instead of ending the call.
func (c *call) dryRun(v policy.Verdict, summary string) (activities.PreviewResult, error) {
	var pv activities.PreviewResult
	opts := readOptions(summary)
	in := c.previewInput(v)
	if c.version >= shapeLean {
		// A dry run changes nothing upstream: it runs in the workflow task.
		err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(c.ctx, localRead(opts)), acts.Preview, in).Get(c.ctx, &pv)
		return pv, err
	}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, opts), acts.Preview, in).Get(c.ctx, &pv)
	return pv, err
}

// readOptions are a read's before a card goes up (a dry run, a check of
// a tool's accepted definition): retried a few times within a minute, never
// when refused.
func readOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: 15 * time.Second, ScheduleToCloseTimeout: time.Minute, Summary: summary,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 4,
			NonRetryableErrorTypes: []string{activities.ErrCredential, activities.ErrUpstream, activities.ErrBadInput}}}
}

// localRead runs a read with opts in the workflow task itself.
func localRead(opts workflow.ActivityOptions) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout,
		RetryPolicy: opts.RetryPolicy, Summary: opts.Summary}
}

// previewInput is who a read before the card acts as, and on what.
func (c *call) previewInput(v policy.Verdict) activities.PreviewInput {
	return activities.PreviewInput{Acting: c.acting(v, v.Args)}
}

// acting is who the call acts as upstream, on args, under verdict v: the
// same for a dry run, a check before a card and the call itself.
func (c *call) acting(v policy.Verdict, args json.RawMessage) activities.Acting {
	s := c.in.Session
	return activities.Acting{Tool: c.in.Tool, Args: args, Resource: v.Resource, UserID: s.UserID, CredentialRef: c.credential(),
		Role: s.Role, Resources: s.Resources, RequiredTier: v.RequesterTier, RequiredMaxAgeSeconds: v.RequesterMaxAgeSeconds,
		AskedAt: c.askedAt(), Verified: v.Verified, ConversationID: s.ConversationID}
}

// editSummary says what an edit changes, as "quantity to 60", in key order.
func editSummary(edit json.RawMessage) string {
	canon, err := policy.Canonical(edit)
	if err != nil {
		return "the card"
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "the card"
	}
	var parts []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return "the card"
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "the card"
		}
		parts = append(parts, fmt.Sprintf("%v to %s", k, v))
	}
	return strings.Join(parts, ", ")
}
