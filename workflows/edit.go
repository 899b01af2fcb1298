package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// MaxEdits bounds the versions an edit can make of one card, so no
// approver can grow a call's history without end; the next edit is refused.
const MaxEdits = 5

// revise runs an approver's edit a on card k: the chain again on the
// edited args (edited), and, if it all passes, the card's next version
// (card.revised): a new args hash (the old one is refused from then on),
// value, approver role and evidence, and no approvals counted yet. An
// edit that fails is refused like any decision, audited with its code,
// and the card stays as it was (next is nil); one that finds a pinned
// tool no longer as accepted ends the card (codeChanged).
func (c *call) revise(k *card, a signoff.Approval) (*card, CallStatus, error) {
	refuse := func(code policy.Code, why string) (*card, CallStatus, error) {
		return nil, "", k.refuse([]refusal{{received: received{a: a}, code: code, why: "the edit was not applied: " + why, verified: true}}, 0, "", "")
	}
	e := c.edited(k, a)
	switch {
	case e.changed != "":
		k.changed = e.changed
		return nil, codeChanged, nil
	case e.code != "":
		return refuse(e.code, e.why)
	}
	action := e.nv.Args
	if len(e.pv.Action) > 0 {
		action = e.pv.Action
	}
	hash, err := signoff.ArgsHash(c.in.Tool, action)
	if err != nil {
		return nil, "", fmt.Errorf("hash the edited action: %w", err)
	}
	if hash == k.ArgsHash {
		return refuse(policy.CodeInvalidArguments, "it changes nothing that would run")
	}
	next := k.revised(e.nv, e.pv, action, hash)
	msg := sentences.Say(sentences.Edited, next.version, a.Approver.UserID, editSummary(a.Edit),
		c.settings.Policy.FormatValue(c.in.Tool, e.pv.ValueCents), c.settings.Policy.FormatValue(c.in.Tool, k.pending.ValueCents), strings.ReplaceAll(string(e.nv.ApproverRole), "_", " "))
	if a.Reason != "" {
		msg += sentences.Say(sentences.ApprovedSoFarNote, a.Reason)
	}
	intent, _ := policy.Intent(c.in.Tool, e.nv.Resource, action, next.d.intentRequester(c.in.Session.UserID))
	in := activities.ReviseInput{Verdict: e.nv, ValueCents: e.pv.ValueCents, PrevValueCents: k.pending.ValueCents, Intent: intent, Card: next.pending,
		Audit: activities.AuditInput{Key: fmt.Sprintf("edited-%d", next.version), Event: activities.EventEdited, Reason: policy.CodeOK, Message: msg,
			Args: action, Resource: e.nv.Resource, Value: next.d.value(), Approver: &a.Approver, Evidence: a.Evidence, Tool: c.in.Tool, Session: c.in.Session}}
	var res activities.ReviseResult
	if err := workflow.ExecuteActivity(bookkeeping(c.ctx, fmt.Sprintf("revise the card to version %d", next.version)), acts.Revise, in).Get(c.ctx, &res); err != nil {
		return nil, "", fmt.Errorf("revise the card: %w", err)
	}
	if res.Code != policy.CodeOK {
		return refuse(res.Code, res.Message)
	}
	workflow.GetLogger(c.ctx).Info("card edited", "version", next.version, "by", a.Approver.UserID, "approverRole", e.nv.ApproverRole)
	c.board.show(next)
	c.board.set(StatusPendingApproval, policy.CodeOK)
	c.books.notify(activities.CardEventPending, next.pending, "")
	return next, "", nil
}

// editCheck is the chain's answer to an edit: its verdict and dry run, or the
// code and why it is refused, or, for a pinned tool no longer as
// accepted, the note the card ends with (changed).
type editCheck struct {
	nv      policy.Verdict
	pv      activities.PreviewResult
	code    policy.Code
	why     string
	changed string
}

// edited runs the chain on the args edit a makes to card k: the checks, a
// fresh dry run as the requester, the value against the hard limit and
// the routing, and a pinned tool's definition.
func (c *call) edited(k *card, a signoff.Approval) editCheck {
	// A pinned tool (recorded so since the check before a card) found no
	// longer as accepted ends the card: no version of it can run.
	failed := func(err error, nv policy.Verdict, what string) editCheck {
		code, msg, _, _ := upstreamFailure(err, true, c.system)
		if code == policy.CodeDefinitionChanged && nv.Tool != nil && nv.Tool.Pinned {
			return editCheck{changed: msg}
		}
		return editCheck{code: code, why: what + msg}
	}
	if k.version > MaxEdits {
		return editCheck{code: policy.CodeInvalidArguments, why: fmt.Sprintf("the card has been edited %d times, the most it takes; approve or reject it as it is", MaxEdits)}
	}
	args, err := signoff.ApplyEdit(k.d.verdict.Args, a.Edit, k.Editable)
	if err != nil {
		return editCheck{code: policy.CodeInvalidArguments, why: err.Error()}
	}
	e := editCheck{nv: c.check(args, nil)}
	if e.nv.Allowed() && e.nv.NeedsPreview {
		if e.pv, err = c.up.dryRun(e.nv, "dry run of the edited "+c.in.Tool); err != nil {
			return failed(err, e.nv, "its dry run failed: ")
		}
		if e.nv = c.check(args, &e.pv.ValueCents); e.nv.Allowed() && e.pv.Shortfall != "" {
			return editCheck{code: policy.CodeUpstreamError, why: "nothing can be planned: " + e.pv.Shortfall}
		}
	}
	if e.nv.Allowed() && !e.nv.NeedsPreview && e.nv.Tool != nil && e.nv.Tool.Pinned {
		if err := c.up.accepted(e.nv); err != nil {
			return failed(err, e.nv, "its tool could not be checked: ")
		}
	}
	if !e.nv.NeedsPreview && e.nv.ValueCents != nil {
		e.pv.ValueCents = *e.nv.ValueCents // the value is an arg's, edited with the rest
	}
	switch {
	case !e.nv.Allowed():
		return editCheck{code: e.nv.Code, why: e.nv.Message}
	case e.nv.Decision != policy.DecisionApprove || e.nv.NeedsPreview:
		return editCheck{code: policy.CodeInvalidArguments, why: "an edit must leave a card for a person to decide"}
	}
	return e
}

// revised is k's next version, for the edited verdict nv and dry run pv,
// naming action (its hash hash): what it shows, routes and needs changes,
// its approvals start again; its timers, tally and expiry stay.
func (k *card) revised(nv policy.Verdict, pv activities.PreviewResult, action json.RawMessage, hash string) *card {
	next := *k
	next.d.verdict, next.d.dryRun = nv, &pv
	need := max(1, nv.Approvals)
	p := k.pending
	p.Args, p.ArgsHash, p.Card, p.ValueCents, p.ApproverRole = action, hash, pv.Card, pv.ValueCents, nv.ApproverRole
	p.Evidence, p.ApprovalsNeeded, p.Approvals, p.CardVersion = nv.Evidence, need, nil, k.version+1
	p.Justification = policy.JustificationOf(nv.Args)
	if k.Card.Version > 0 {
		p.SignedVersion = p.CardVersion
	}
	if k.Escalated && nv.EscalateTo != "" {
		p.EscalatedTo = nv.EscalateTo
	}
	next.pending, next.version, next.escalatedTo = p, p.CardVersion, p.EscalatedTo
	next.Role, next.ArgsHash, next.Evidence, next.Need, next.Approvals, next.Action = nv.ApproverRole, hash, nv.Evidence, need, nil, action
	next.EscalateTo, next.Card.Version, next.ConfirmInClient = nv.EscalateTo, p.SignedVersion, nv.ConfirmInClient
	return &next
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
