package workflows

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// MaxRefusedDecisions is how many refused decisions a card takes, each one
// audited. The next refused decision locks the card: it ends rejected with
// code locked, and nothing can approve it afterwards.
const MaxRefusedDecisions = 20

// MaxUnsignedAudited is how many refused payloads whose signature does not
// verify (unsigned, forged, undecodable), or that repeat a signed decision
// the card has judged, a card audits one by one; past it they are dropped,
// and counted in one row when the card ends. They never count towards the
// lock: anyone who may signal the workflow could send them, and only a
// signed decision, once, can end a card.
const MaxUnsignedAudited = 20

// batchSize bounds the decisions read in one wake-up, so a flood never
// holds a workflow task past the SDK's deadlock detector (1 s); the rest
// wait in the channel for the next turn of the loop.
const batchSize = 64

// codeLocked marks a wait that ended in a lock (a card then ends rejected,
// with code locked); codeChanged one that an edit ended on finding the
// tool's MCP server no longer defines it as accepted (the card then ends
// failed, definition_changed, as nothing can run).
const (
	codeLocked  CallStatus = "locked"
	codeChanged CallStatus = "definition_changed"
)

// guard is a card's wait: the rules a decision must match to count on it
// (policy.Rules, which policy.Judge holds it to), and the card, its
// version and its timers.
type guard struct {
	policy.Rules
	// escalateAfter is when the card is offered Rules.EscalateTo too (0:
	// never).
	escalateAfter time.Duration
	pendingCard   activities.ProjectInput
	// version counts the card's edits (firstCardVersion until the first).
	version int
	// timer ends the wait at the expiry; escalation fires at escalateAfter.
	// Both are set once and last across edits. When chained, the expiry
	// timer starts only once the escalation has fired (each timer is an
	// action, and most cards are decided before they escalate); timerCtx
	// is what it starts under.
	timer, escalation workflow.Future
	chained           bool
	timerCtx          workflow.Context
	// changed tells the model why the card ended codeChanged.
	changed string
}

// startTimers starts the card's expiry timer and, if it escalates, its
// escalation timer, under ctx (cancelled when the wait is over); chained,
// the escalation timer alone, the expiry's following when it fires.
func (g *guard) startTimers(ctx workflow.Context, ttl time.Duration, chained bool) {
	escalates := g.escalateAfter > 0 && g.escalateAfter < ttl
	g.chained, g.timerCtx = chained && escalates, ctx
	if !g.chained {
		g.timer = workflow.NewTimerWithOptions(ctx, ttl, workflow.TimerOptions{Summary: fmt.Sprintf("approval expires after %s", ttl)})
	}
	if escalates {
		g.escalation = workflow.NewTimerWithOptions(ctx, g.escalateAfter, workflow.TimerOptions{Summary: fmt.Sprintf("escalate to %s after %s", g.EscalateTo, g.escalateAfter)})
	}
}

// startExpiry starts a chained card's expiry timer, for what is left of its
// TTL: the expiry does not move. It reports false when nothing is left.
func (g *guard) startExpiry() bool {
	left := g.Expires.Sub(workflow.Now(g.timerCtx))
	if left <= 0 {
		return false
	}
	g.timer = workflow.NewTimerWithOptions(g.timerCtx, left, workflow.TimerOptions{Summary: fmt.Sprintf("approval expires at %s", g.Expires.UTC().Format(time.RFC3339))})
	return true
}

// received is one payload of the approval signal: a decision, or why the
// payload is not one.
type received struct {
	a   policy.Approval
	bad string
}

// refusal is a received payload that does not count, and why; repeat
// says it is a signed decision the card had already judged.
type refusal struct {
	received
	code     policy.Code
	why      string
	verified bool
	repeat   bool
}

// wait returns the first decision that counts, or ends with
// StatusExpired or codeLocked. Every payload that arrives is judged: the
// refused ones are audited in one write per batch, up to the cap.
func (c *call) wait(g *guard) (policy.Approval, CallStatus, error) {
	ch := workflow.GetSignalChannel(c.ctx, ApprovalSignal)
	for {
		var batch []received
		expired, escalate := false, false
		sel := workflow.NewSelector(c.ctx)
		sel.AddReceive(ch, func(ch workflow.ReceiveChannel, _ bool) { batch = takeDecisions(ch, batchSize) })
		if g.timer != nil {
			sel.AddFuture(g.timer, func(workflow.Future) { expired = true })
		}
		// A chained card waits on its escalation timer even when an edit has
		// routed it to a role with none above: the expiry follows that timer.
		if g.escalation != nil && (g.chained || g.EscalateTo != "") {
			sel.AddFuture(g.escalation, func(workflow.Future) { escalate = true })
		}
		sel.Select(c.ctx)
		if expired {
			return policy.Approval{}, StatusExpired, nil
		}
		if escalate {
			g.escalation = nil // fired: never waited on again
			if g.EscalateTo != "" {
				if err := c.escalate(g); err != nil {
					return policy.Approval{}, "", err
				}
			}
			if g.chained && !g.startExpiry() {
				return policy.Approval{}, StatusExpired, nil
			}
			continue
		}
		now := workflow.Now(c.ctx)
		var refused []refusal
		var counted []policy.Approval
		var winner *policy.Approval
		late := false
		for i, r := range batch {
			if winner != nil {
				c.card.late = append(c.card.late, batch[i:]...)
				break
			}
			f := c.once(g.judge(r, now))
			if f.code == policy.CodeOK {
				if r.a.Decision == policy.Approve && len(g.Approvals)+1 < g.Need {
					// One of the approvals the card needs: counted, not yet enough.
					g.Approvals = append(g.Approvals, r.a)
					counted = append(counted, r.a)
					continue
				}
				winner = &batch[i].a
				continue
			}
			late = late || f.code == policy.CodeExpired
			refused = append(refused, f)
		}
		if err := c.refuseAll(refused, 0, "", ""); err != nil {
			return policy.Approval{}, "", err
		}
		if err := c.countApprovals(g, counted, now); err != nil {
			return policy.Approval{}, "", err
		}
		switch {
		case winner != nil:
			return *winner, "", nil
		case late:
			return policy.Approval{}, StatusExpired, nil
		case c.card.refused > MaxRefusedDecisions:
			return policy.Approval{}, codeLocked, nil
		}
	}
}

// judge decides whether one payload counts on the card at time now.
func (g guard) judge(r received, now time.Time) refusal {
	if r.bad != "" {
		return refusal{received: r, code: policy.CodeInvalidArguments, why: r.bad}
	}
	j := policy.Judge(g.Rules, r.a, now)
	return refusal{received: r, code: j.Code, why: j.Why, verified: j.Verified}
}

// once lets a signed decision count once on a card that keeps track
// (judgeVersioned): received again, the same signature is refused as a
// repeat, which never counts towards the lock, whether it was counted,
// refused or edited the card the first time.
func (c *call) once(f refusal) refusal {
	if c.card.seen == nil || !f.verified || f.code == policy.CodeExpired {
		return f
	}
	// By the signature's bytes: base64 has more than one spelling of them.
	sig, _ := base64.StdEncoding.DecodeString(f.a.Signature)
	if c.card.seen[string(sig)] {
		return refusal{received: f.received, code: policy.CodeInvalidArguments, verified: true, repeat: true,
			why: "this signed decision was received before, and a decision counts once"}
	}
	c.card.seen[string(sig)] = true
	return f
}

// countApprovals records the approvals counted towards a card's quorum,
// each with its approver and evidence, and the card showing them so far.
func (c *call) countApprovals(g *guard, counted []policy.Approval, now time.Time) error {
	for i, a := range counted {
		n := len(g.Approvals) - len(counted) + i + 1
		who := a.Approver
		p := policy.PersonOf(a)
		g.pendingCard.Approvals = append(g.pendingCard.Approvals, activities.ApprovalMark{UserID: who.UserID, Role: who.Role,
			At: now.UTC().Format(time.RFC3339), Issuer: p.Issuer, Subject: p.Subject})
		c.status.ApprovedBy = append(c.status.ApprovedBy, who.UserID)
		msg := fmt.Sprintf("Approval %d of %d: %s approved; the card waits for %d more.", n, g.Need, who.UserID, g.Need-n)
		if a.Reason != "" {
			msg += " Their note: " + a.Reason
		}
		workflow.GetLogger(c.ctx).Info("approval counted", "approver", who.UserID, "of", g.Need)
		key := fmt.Sprintf("approval-%d", n)
		if g.version > firstCardVersion {
			key = fmt.Sprintf("v%d-approval-%d", g.version, n)
		}
		if err := c.record(activities.AuditInput{Key: key, Event: activities.EventApprovalCounted, Reason: policy.CodeOK, Message: msg,
			Args: g.pendingCard.Args, Resource: g.pendingCard.Resource, Value: c.value(), Approver: &who, Evidence: a.Evidence}, g.pendingCard, false); err != nil {
			return err
		}
	}
	return nil
}

// takeDecisions reads up to max payloads from the signal channel. A payload
// the data converter cannot decode (not JSON, or encrypted with a key this
// worker lacks) is dropped by the SDK while receiving; the channel's length
// before and after counts it, so it is refused like any other bad decision.
func takeDecisions(ch workflow.ReceiveChannel, max int) []received {
	var out []received
	for ch.Len() > 0 && len(out) < max {
		before := ch.Len()
		var raw json.RawMessage
		ok := ch.ReceiveAsync(&raw)
		dropped := before - ch.Len()
		if ok {
			dropped--
		}
		for range dropped {
			out = append(out, received{bad: "the payload could not be decoded: it is not JSON, or it is encrypted with a key this worker does not hold"})
		}
		if !ok {
			break
		}
		a, err := policy.DecodeApproval(raw)
		if err != nil {
			out = append(out, received{bad: err.Error()})
			continue
		}
		out = append(out, received{a: a})
	}
	return out
}

// refuseAll audits refused decisions in one write, up to the cap; past it
// they are counted, not written one by one. While the card waits (summary
// is empty) a signedLock card counts and caps the unverified apart; once it
// has ended (summary says when) one row counts the ones past either cap.
func (c *call) refuseAll(refused []refusal, unread int, summary string, summaryCode policy.Code) error {
	var rows []activities.AuditInput
	over := unread
	for _, f := range refused {
		c.countApproval("refused_" + string(f.code)) // the closed set's code, whatever the row says
		f.code = refusalCode(c.card.judging, f.code)
		key := ""
		switch {
		case c.card.signedLock && (!f.verified || f.repeat) && summary == "":
			if c.card.unsigned++; c.card.unsigned > MaxUnsignedAudited {
				c.card.dropped++
				continue
			}
			key = fmt.Sprintf("refused-unsigned-%d", c.card.unsigned)
		default:
			if c.card.refused++; c.card.refused > MaxRefusedDecisions {
				over++
				continue
			}
			key = fmt.Sprintf("refused-%d", c.card.refused)
		}
		workflow.GetLogger(c.ctx).Warn("approval refused", "code", f.code, "verified", f.verified)
		row := activities.AuditInput{Key: key, Event: activities.EventApprovalRefused, Reason: f.code,
			Message: "Refused: " + f.why, Resource: c.status.resource, Value: c.value(), Tool: c.in.Tool, Session: c.in.Session}
		if f.verified {
			who := f.a.Approver
			row.Approver, row.Evidence = &who, f.a.Evidence
		} else {
			row.ClaimedBy = f.a.Approver.UserID
		}
		rows = append(rows, row)
	}
	if over > 0 && summary != "" {
		rows = append(rows, activities.AuditInput{Key: "refused-past-cap", Event: activities.EventApprovalRefused, Reason: summaryCode,
			Message:  fmt.Sprintf("%d more decisions arrived %s and are not audited one by one (past the cap of %d, or left unread once the card ended); none counted", over, summary, MaxRefusedDecisions),
			Resource: c.status.resource, Value: c.value(), Tool: c.in.Tool, Session: c.in.Session})
	}
	if c.card.dropped > 0 && summary != "" {
		rows = append(rows, activities.AuditInput{Key: "refused-unsigned-past-cap", Event: activities.EventApprovalRefused, Reason: policy.CodeCredentialUnavailable,
			Message:  fmt.Sprintf("%d more payloads whose signature did not verify (unsigned, forged or undecodable), or that repeated a signed decision, arrived and were dropped unaudited, past the cap of %d; none counted, nor towards the lock", c.card.dropped, MaxUnsignedAudited),
			Resource: c.status.resource, Value: c.value(), Tool: c.in.Tool, Session: c.in.Session})
		c.card.dropped = 0
	}
	if len(rows) == 0 {
		return nil
	}
	if err := workflow.ExecuteLocalActivity(localBookkeeping(c.ctx, fmt.Sprintf("audit %d refused decisions", len(rows))), acts.AuditAll, rows).Get(c.ctx, nil); err != nil {
		return fmt.Errorf("audit refused decisions: %w", err)
	}
	return nil
}

// drain refuses the decisions that arrived after the card ended.
func (c *call) drain(final CallStatus, code policy.Code) error {
	if code == policy.CodeOK {
		code = policy.CodeInvalidArguments
	}
	ch := workflow.GetSignalChannel(c.ctx, ApprovalSignal)
	pending := append(c.card.late, takeDecisions(ch, batchSize)...)
	c.card.late = nil
	// Past one batch nothing more is read: the card has ended, and what is
	// left is counted in the summary row unread.
	unread := ch.Len()
	refused := make([]refusal, 0, len(pending))
	for _, r := range pending {
		f := refusal{received: r, code: code, why: "the card is no longer pending (it is " + string(final) + ")"}
		if r.bad != "" {
			f.code, f.why = policy.CodeInvalidArguments, r.bad
		}
		refused = append(refused, f)
	}
	return c.refuseAll(refused, unread, "after the card was "+string(final), code)
}
