package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/workflow"
)

// firstCardVersion is a card's version until an approver edits it.
const firstCardVersion = 1

// Card versions in pending_action: a later state never yields to an earlier one.
const (
	cardPending = 1
	cardDecided = 2
	cardFinal   = 3
)

// codeLocked marks a wait that ended in a lock (a card then ends rejected,
// with code locked); codeChanged one that an edit ended on finding the
// tool's MCP server no longer defines it as accepted (the card then ends
// failed, definition_changed, as nothing can run).
const (
	codeLocked  CallStatus = "locked"
	codeChanged CallStatus = "definition_changed"
)

// card is a card up for a person to decide. It holds the decision it
// shows (d: the call's, or an edit's), the rules a decision must match to
// count on it (signoff.Rules, which signoff.Judge holds it to), the state
// written to pending_action, and its version, timers and tally; and it
// owns its steps: going up, waiting, judging, being revised (revised
// returns a new card) and closing. What it writes goes through the call's
// books; what it shows, to its board (board.show).
type card struct {
	signoff.Rules
	d       decision
	pending activities.CardRow
	// version counts the card's edits (firstCardVersion until the first).
	version int
	// escalatedTo is the role the card shows it was also offered to.
	escalatedTo policy.Role
	held        heldSettings
	clock       *clock
	tally       *tally
	// note is a rejection's note for the model; late the decisions read
	// after the one that ended the card; changed why it ended codeChanged.
	note    json.RawMessage
	late    []received
	changed string
	ctx     workflow.Context
	books   *books
	board   *board
}

// putUp shows the card, writes it, publishes it as the call's first
// outcome and tells the webhook.
func (k *card) putUp() error {
	k.board.show(k)
	k.board.set(StatusPendingApproval, policy.CodeOK)
	if err := k.books.project(k.pending); err != nil {
		return err
	}
	who := sentences.Say(sentences.ApproverOne, k.Role)
	if k.Need > 1 {
		who = sentences.Say(sentences.ApproversMany, k.Need, k.Role)
	}
	// The card is the outcome a caller waits for, even after a sign-in wait.
	k.board.first = k.board.outcome(k.board.result(StatusPendingApproval, policy.CodeOK, sentences.Say(sentences.PendingApproval, who, k.pending.ExpiresAt), false, false, nil))
	workflow.GetLogger(k.ctx).Info("waiting for approval", "tool", k.books.tool, "approverRole", k.Role, "expiresAt", k.pending.ExpiresAt)
	k.books.notify(activities.CardEventPending, k.pending, "")
	return nil
}

// startTimers starts the card's timers under ctx, cancelled once the
// wait is over.
func (k *card) startTimers(ctx workflow.Context, set Settings) error {
	after, err := k.books.shape.escalation(k.ctx, set, k.held, k.EscalateTo != "")
	if err != nil {
		return err
	}
	k.clock.start(ctx, k.held.TTL, after, k.EscalateTo, k.books.shape.lean())
	return nil
}

// wait returns the first decision that counts, or ends with
// StatusExpired or codeLocked. Every payload that arrives is judged: the
// refused ones are audited in one write per batch, up to the cap.
func (k *card) wait() (signoff.Approval, CallStatus, error) {
	ch := workflow.GetSignalChannel(k.ctx, ApprovalSignal)
	for {
		var batch []received
		sel := workflow.NewSelector(k.ctx)
		sel.AddReceive(ch, func(ch workflow.ReceiveChannel, _ bool) { batch = takeDecisions(ch, batchSize) })
		rang := k.clock.add(sel, k.EscalateTo)
		sel.Select(k.ctx)
		switch *rang {
		case rangExpiry:
			return signoff.Approval{}, StatusExpired, nil
		case rangEscalation:
			if k.EscalateTo != "" {
				if err := k.escalate(); err != nil {
					return signoff.Approval{}, "", err
				}
			}
			if !k.clock.escalated(k.Expires) {
				return signoff.Approval{}, StatusExpired, nil
			}
			continue
		}
		winner, late, err := k.judgeAll(batch, workflow.Now(k.ctx))
		switch {
		case err != nil:
			return signoff.Approval{}, "", err
		case winner != nil:
			return *winner, "", nil
		case late:
			return signoff.Approval{}, StatusExpired, nil
		case k.tally.refused > MaxRefusedDecisions:
			return signoff.Approval{}, codeLocked, nil
		}
	}
}

// judgeAll judges a batch at time now: approvals towards a quorum are
// counted, refusals audited; the first decision that ends the wait wins,
// and what follows it is kept for drain. late says one came after the
// expiry.
func (k *card) judgeAll(batch []received, now time.Time) (winner *signoff.Approval, late bool, err error) {
	var refused []refusal
	var counted []signoff.Approval
	for i, r := range batch {
		if winner != nil {
			k.late = append(k.late, batch[i:]...)
			break
		}
		f := k.tally.once(k.judge(r, now))
		if f.code == policy.CodeOK {
			if r.a.Decision == signoff.Approve && len(k.Approvals)+1 < k.Need {
				// One of the approvals the card needs: counted, not yet enough.
				k.Approvals = append(k.Approvals, r.a)
				counted = append(counted, r.a)
				continue
			}
			winner = &batch[i].a
			continue
		}
		late = late || f.code == policy.CodeExpired
		refused = append(refused, f)
	}
	if err := k.refuse(refused, 0, "", ""); err != nil {
		return nil, false, err
	}
	return winner, late, k.countApprovals(counted, now)
}

// judge decides whether one payload counts on the card at time now.
func (k *card) judge(r received, now time.Time) refusal {
	if r.bad != "" {
		return refusal{received: r, code: policy.CodeInvalidArguments, why: r.bad}
	}
	if r.a.Decision == signoff.Withdraw && !k.Withdrawable {
		return refusal{received: r, code: policy.CodeInvalidArguments, why: notWithdrawable}
	}
	j := signoff.Judge(k.Rules, r.a, now)
	return refusal{received: r, code: j.Code, why: j.Why, verified: j.Verified}
}

// notWithdrawable is why a card put up before withdrawals refuses one: the
// words its code gave a decision it did not know, so a card in flight
// judges it as it would have, unverified, never towards its lock.
const notWithdrawable = `decision must be "approve", "reject" or "edit", not "withdraw"`

// countApprovals records the approvals counted towards the card's quorum,
// each with its approver and evidence, and the card showing them so far.
func (k *card) countApprovals(counted []signoff.Approval, now time.Time) error {
	for i, a := range counted {
		n := len(k.Approvals) - len(counted) + i + 1
		who := a.Approver
		p := signoff.PersonOf(a)
		k.pending.Approvals = append(k.pending.Approvals, activities.ApprovalMark{UserID: who.UserID, Role: who.Role,
			At: now.UTC().Format(time.RFC3339), Issuer: p.Issuer, Subject: p.Subject})
		k.board.show(k)
		msg := sentences.Say(sentences.ApprovedSoFar, n, k.Need, who.UserID, k.Need-n)
		if a.Reason != "" {
			msg += sentences.Say(sentences.ApprovedSoFarNote, a.Reason)
		}
		workflow.GetLogger(k.ctx).Info("approval counted", "approver", who.UserID, "of", k.Need)
		key := fmt.Sprintf("approval-%d", n)
		if k.version > firstCardVersion {
			key = fmt.Sprintf("v%d-approval-%d", k.version, n)
		}
		if err := k.books.record(activities.AuditInput{Key: key, Event: activities.EventApprovalCounted, Reason: policy.CodeOK, Message: msg,
			Args: k.pending.Args, Resource: k.pending.Resource, Value: k.d.value(), Approver: &who, Evidence: a.Evidence}, k.pending, false); err != nil {
			return err
		}
	}
	return nil
}

// escalate offers the card to the next role up as well, recorded and
// audited; the expiry does not move.
func (k *card) escalate() error {
	k.Escalated, k.escalatedTo = true, k.EscalateTo
	k.board.show(k)
	msg := sentences.Say(sentences.Escalated, k.clock.escalateAfter, k.EscalateTo, k.pending.ExpiresAt)
	workflow.GetLogger(k.ctx).Info("card escalated", "to", k.EscalateTo)
	shown := k.pending
	shown.EscalatedTo = k.EscalateTo
	if err := k.books.record(activities.AuditInput{Key: "escalated", Event: activities.EventEscalated, Reason: policy.CodeOK, Message: msg,
		Args: shown.Args, Resource: shown.Resource, Value: k.d.value()}, shown, true); err != nil {
		return err
	}
	k.books.notify(activities.CardEventEscalated, shown, "")
	return nil
}

// outcome names how a wait that returned a and ended ended, as the
// approvals metric counts it.
func (k *card) outcome(a signoff.Approval, ended CallStatus) string {
	switch {
	case ended == codeLocked:
		return "locked"
	case ended == StatusExpired:
		return "expired"
	case ended == codeChanged:
		return "definition_changed"
	case a.Decision == signoff.Reject:
		return "rejected"
	case a.Decision == signoff.Withdraw:
		return "withdrawn"
	}
	return "approved"
}

// decided tells the webhook and the metrics how the card was decided.
func (k *card) decided(a signoff.Approval, ended CallStatus) {
	outcome := k.outcome(a, ended)
	shown, by := k.pending, a.Approver.UserID
	shown.Status = activities.CardApproved
	switch outcome {
	case "locked", "rejected":
		shown.Status = activities.CardRejected
	case "expired":
		shown.Status = activities.CardExpired
	case "definition_changed":
		shown.Status = activities.CardFailed
	case "withdrawn":
		shown.Status = activities.CardWithdrawn
	}
	if ended != "" {
		by = ""
	}
	k.books.notify(activities.CardEventDecided, shown, by)
	countApproval(k.ctx, k.books.metricTool, outcome)
	if ended == "" && a.Decision != signoff.Withdraw {
		workflow.GetMetricsHandler(k.ctx).WithTags(map[string]string{"tool": k.books.metricTool, "outcome": outcome}).
			Timer(MetricTimeToDecision).Record(workflow.Now(k.ctx).Sub(k.UpAt))
	}
}

// close ends a card that will not run, as its wait ended (a rejection a,
// a lock, an expiry, a changed definition).
func (k *card) close(a signoff.Approval, ended CallStatus) (ToolCallResult, error) {
	switch {
	case ended == codeLocked:
		return k.end(StatusRejected, policy.CodeLocked, activities.EventRejected, nil,
			sentences.Say(sentences.Locked, k.tally.refused))
	case ended == codeChanged:
		return k.end(StatusFailed, policy.CodeDefinitionChanged, activities.EventFailed, nil, k.changed)
	case ended == StatusExpired:
		return k.end(StatusExpired, policy.CodeExpired, activities.EventExpired, nil,
			sentences.Say(sentences.Expired, k.held.TTL, k.books.tool))
	}
	k.note = noteOf(a.Reason)
	if a.Decision == signoff.Withdraw {
		msg := sentences.Say(sentences.Withdrawn, a.Approver.UserID)
		if k.note != nil {
			msg = sentences.Say(sentences.WithdrawnWithNote, a.Approver.UserID)
		}
		return k.end(StatusWithdrawn, policy.CodeWithdrawn, activities.EventWithdrawn, &a, msg)
	}
	msg := sentences.Say(sentences.Rejected, a.Approver.UserID)
	if k.note != nil {
		msg = sentences.Say(sentences.RejectedWithNote, a.Approver.UserID)
	}
	return k.end(StatusRejected, policy.CodeRejected, activities.EventRejected, &a, msg)
}

// noteOf is a decision's reason as the result's note for the model,
// sanitized; nil when it has none.
func noteOf(reason string) json.RawMessage {
	note := sanitize.Text(reason)
	if note == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]string{"note": note})
	return b
}

// end records a card that will not run as ended with status and code.
func (k *card) end(status CallStatus, code policy.Code, event activities.Event, by *signoff.Approval, msg string) (ToolCallResult, error) {
	k.board.set(status, code)
	in := activities.AuditInput{Key: string(event), Event: event, Reason: code, Message: msg, Args: k.pending.Args, Resource: k.pending.Resource, Value: k.d.value()}
	// An expiry or a lock does not depend on when the task runs: record it locally.
	local := status == StatusExpired || code == policy.CodeLocked
	final := k.pending
	final.Version, final.Status = cardFinal, status.card()
	if by != nil {
		in.Approver, in.Evidence, final.DecidedBy, final.Note = &by.Approver, by.Evidence, &by.Approver, by.Reason
		// The row carries the note as the model got it, for the evals export.
		in.Result = k.note
		final.DecidedAt = workflow.Now(k.ctx).UTC().Format(time.RFC3339)
	}
	if err := k.books.record(in, final, local); err != nil {
		return ToolCallResult{}, err
	}
	return k.board.result(status, code, msg, false, false, k.note), nil
}

// approvedCard is what an approved card's execution writes: the approval,
// by the call's own activity first, and the card it finishes.
type approvedCard struct {
	before activities.RecordInput
	card   activities.CardRow
}

// approve is the record of approval a: exactly the stored action, which
// must still hash to what the card showed.
func (k *card) approve(a signoff.Approval) (*approvedCard, error) {
	if h, err := signoff.ArgsHash(k.books.tool, k.Action); err != nil || h != k.ArgsHash {
		return nil, fmt.Errorf("stored args changed after the card was shown (hash %s, card %s)", h, k.ArgsHash)
	}
	decided := k.pending
	decided.Version, decided.Status, decided.DecidedBy, decided.Note = cardDecided, "approved", &a.Approver, a.Reason
	decided.DecidedAt = workflow.Now(k.ctx).UTC().Format(time.RFC3339)
	approved := activities.AuditInput{Key: "approved", Event: activities.EventApproved, Reason: policy.CodeOK, Args: k.Action, Resource: k.d.verdict.Resource,
		Value: k.d.value(), Approver: &a.Approver, Evidence: a.Evidence, Message: a.Reason, Tool: k.books.tool, Session: k.books.session}
	return &approvedCard{before: activities.RecordInput{Audit: approved, Card: decided}, card: decided}, nil
}
