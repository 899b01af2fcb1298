package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// firstCardVersion is a card's version until an approver edits it.
const firstCardVersion = 1

// signedApprovalsChange is a version marker every call records, at
// signedApprovalsVersion, its only supported value.
const (
	signedApprovalsChange                   = "signed-approvals"
	signedApprovalsVersion workflow.Version = 1
)

// Card versions in pending_action: a later state never yields to an earlier one.
const (
	cardPending = 1
	cardDecided = 2
	cardFinal   = 3
)

// approval puts the card up, waits for a decision that counts or for the
// timer, and runs the stored args once if approved.
func (c *call) approval(v policy.Verdict) (ToolCallResult, error) {
	ctx := c.ctx
	action := v.Args
	if c.decision.dryRun != nil {
		action = c.decision.dryRun.Action
		c.status.Card, c.status.ValueCents = c.decision.dryRun.Card, c.decision.dryRun.ValueCents
	} else {
		if c.decision.argValue != nil {
			c.status.ValueCents = *c.decision.argValue
		}
		if c.version >= shapeLean {
			// No dry run worded the card: it shows the exact action.
			c.status.Card = c.settings.Policy.CardText(c.in.Tool, action)
		}
	}
	hash, err := policy.ArgsHash(c.in.Tool, action)
	if err != nil {
		return ToolCallResult{}, fmt.Errorf("hash the action: %w", err)
	}
	held, err := c.approvalSettings(v)
	if err != nil {
		return ToolCallResult{}, err
	}
	ttl, trust := held.TTL, held.Trust
	upAt := workflow.Now(ctx)
	expires := upAt.Add(ttl)
	if held.Judging >= judgeVersioned {
		c.status.SignedVersion = firstCardVersion
	}
	c.status.ApproverRole, c.status.ArgsHash = v.ApproverRole, hash
	c.status.ExpiresAt = expires.UTC().Format(time.RFC3339)
	c.setStatus(StatusPendingApproval, policy.CodeOK)
	need := max(1, v.Approvals)
	c.status.ApprovalsNeeded = need
	card := activities.ProjectInput{Version: cardPending, Status: activities.CardPending, Tool: c.in.Tool, Session: c.in.Session, Resource: v.Resource,
		Args: action, ArgsHash: hash, Card: c.status.Card, ValueCents: c.status.ValueCents, ApproverRole: v.ApproverRole, ExpiresAt: c.status.ExpiresAt,
		Evidence: v.Evidence, Justification: policy.JustificationOf(v.Args), ApprovalsNeeded: need, CardVersion: firstCardVersion, SignedVersion: c.status.SignedVersion, Editable: v.Editable}
	if c.decision.requester.Known() {
		card.Requester = &c.decision.requester
	}
	if err := c.project(card); err != nil {
		return ToolCallResult{}, err
	}
	who := "a " + string(v.ApproverRole)
	if need > 1 {
		who = fmt.Sprintf("%d different people with the role %s", need, v.ApproverRole)
	}
	pending := c.result(StatusPendingApproval, policy.CodeOK, fmt.Sprintf("Waiting for %s to approve the card (until %s). Tell the person it is waiting; do not call again.",
		who, c.status.ExpiresAt), false, false, nil)
	c.ledger.first = c.outcome(pending)
	workflow.GetLogger(ctx).Info("waiting for approval", "tool", c.in.Tool, "approverRole", v.ApproverRole, "expiresAt", c.status.ExpiresAt)
	c.notify(activities.CardEventPending, card, "")

	escalateAfter := held.EscalateAfter
	if c.version < shapeLean {
		if escalateAfter, err = c.escalation(v, ttl); err != nil {
			return ToolCallResult{}, err
		}
	}
	g := guard{Rules: policy.Rules{Role: v.ApproverRole, EscalateTo: v.EscalateTo, Resource: v.Resource, ArgsHash: hash,
		Card: policy.Card{WorkflowID: c.key, RunID: c.status.RunID, ExpiresAt: c.status.ExpiresAt, Version: c.status.SignedVersion}, UpAt: upAt, Expires: expires,
		Keys: trust.Keys, Issuers: trust.Issuers, Evidence: v.Evidence, Need: need, Requester: c.in.Session.UserID,
		RequesterPerson: c.decision.requester, BySignIn: held.Judging >= judgeBySignIn, Action: action, Editable: v.Editable},
		escalateAfter: escalateAfter, pendingCard: card, version: firstCardVersion}
	c.card.signedLock = held.Judging >= judgeSignedLock
	c.card.judging = held.Judging
	if held.Judging >= judgeVersioned {
		c.card.seen = map[string]bool{}
	}
	wctx, cancel := workflow.WithCancel(ctx)
	g.startTimers(wctx, ttl, c.version >= shapeLean)
	var decision policy.Approval
	var ended CallStatus
	for {
		decision, ended, err = c.wait(&g)
		if err != nil || ended != "" || decision.Decision != policy.Edit {
			break
		}
		// An edit puts the card up again as a new version, or is refused,
		// or finds the tool no longer as accepted, which ends the card.
		if ended, err = c.revise(&g, &v, decision); err != nil || ended != "" {
			break
		}
	}
	cancel()
	if err != nil {
		return ToolCallResult{}, err
	}
	card, action, hash = g.pendingCard, g.Action, g.ArgsHash // the version that stands, with its approvals so far
	outcome := "approved"
	switch {
	case ended == codeLocked:
		outcome = "locked"
	case ended == StatusExpired:
		outcome = "expired"
	case ended == codeChanged:
		outcome = "definition_changed"
	case decision.Decision == policy.Reject:
		outcome = "rejected"
	}
	decided, by := activities.CardApproved, decision.Approver.UserID
	switch outcome {
	case "locked", "rejected":
		decided = activities.CardRejected
	case "expired":
		decided = activities.CardExpired
	case "definition_changed":
		decided = activities.CardFailed
	}
	if ended != "" {
		by = ""
	}
	decidedCard := card
	decidedCard.Status = decided
	c.notify(activities.CardEventDecided, decidedCard, by)
	c.countApproval(outcome)
	if ended == "" {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": c.metricTool(), "outcome": outcome}).
			Timer(MetricTimeToDecision).Record(workflow.Now(ctx).Sub(upAt))
	}
	var res ToolCallResult
	switch {
	case ended == codeLocked:
		res, err = c.end(card, StatusRejected, policy.CodeLocked, activities.EventRejected, nil,
			fmt.Sprintf("The card was locked after %d refused decisions, so nothing ran and nobody can approve it now. Tell the person; if the move is still needed, it takes a new call with a new toolCallId.", c.card.refused))
	case ended == codeChanged:
		res, err = c.end(card, StatusFailed, policy.CodeDefinitionChanged, activities.EventFailed, nil, g.changed)
	case ended == StatusExpired:
		res, err = c.end(card, StatusExpired, policy.CodeExpired, activities.EventExpired, nil,
			fmt.Sprintf("Nobody approved the card within %s, so nothing ran. If it is still needed, call %s again for a fresh preview.", ttl, c.in.Tool))
	case decision.Decision == policy.Reject:
		msg := fmt.Sprintf("%s rejected the card, so nothing ran. Do not propose it again unless the person asks.", decision.Approver.UserID)
		if note := sanitize.Text(decision.Reason); note != "" {
			msg = fmt.Sprintf("%s rejected the card, so nothing ran. Their note (result.note) says why: tell the person, and do not propose it again unless they ask.", decision.Approver.UserID)
			c.card.note, _ = json.Marshal(map[string]string{"note": note})
		}
		res, err = c.end(card, StatusRejected, policy.CodeRejected, activities.EventRejected, &decision, msg)
	default:
		res, err = c.approved(v, card, decision, action, hash)
	}
	if err != nil {
		return res, err
	}
	return res, c.drain(res.Status, res.Code)
}

// heldSettings are the deployment's choices a card is held to, recorded
// when it goes up, so a redeploy never changes a card in flight.
type heldSettings struct {
	TTL   time.Duration `json:"ttl"`
	Trust trust         `json:"trust"`
	// EscalateAfter is when the card is also offered to the next role up;
	// 0 when never.
	EscalateAfter time.Duration `json:"escalateAfter,omitempty"`
	// Judging is the rules its decisions are judged by: 0 (by user ID, a
	// rejection held to the approval's step-up) on cards recorded before
	// the field, then judgeBySignIn, judgeSignedLock, judgeVersioned and
	// judgeResourceScope.
	Judging judging `json:"judging,omitempty"`
}

// judging names the rules a card's decisions are judged by.
type judging int

const (
	// The zero value tells people apart by user ID, and a rejection needs
	// the approval's sign-in level and age (cards recorded before).
	_ judging = iota
	// judgeBySignIn tells people apart by the issuer and subject of their
	// sign-in as well (policy.SamePerson), and a rejection needs a
	// sign-in, never the approval's step-up (policy.CheckSignIn).
	judgeBySignIn
	// judgeSignedLock is judgeBySignIn, and only a refused decision whose
	// signature verifies counts towards the card's lock: one that does
	// not (unsigned, forged, undecodable) is audited up to
	// MaxUnsignedAudited and dropped past it, never ending the card.
	judgeSignedLock
	// judgeVersioned is judgeSignedLock, and a decision's signature names
	// the card's version (policy.Card.Version), so one signed for a
	// version an edit has replaced never counts on a later one; and a
	// signed decision counts once: received again, it is refused like an
	// unsigned payload, never towards the lock.
	judgeVersioned
	// judgeResourceScope is judgeVersioned, and a decision refused for a
	// resource its approver does not hold is audited resource_scope: a
	// card put up before says store_scope to its end (refusalCode).
	judgeResourceScope
)

// judgingNow is the rules a card put up by today's code is judged by.
const judgingNow = judgeResourceScope

// refusalCode is the code a card judged by j audits a refusal with: the
// closed set's, or the one the card's earlier refusals were audited with.
func refusalCode(j judging, code policy.Code) policy.Code {
	if j < judgeResourceScope && code == policy.CodeResourceScope {
		return policy.CodeStoreScope
	}
	return code
}

// approvalSettings records the settings a card is held to: in one side
// effect from shape 7, before that one by one (the TTL, then the trust;
// the escalation once the card was up).
func (c *call) approvalSettings(v policy.Verdict) (heldSettings, error) {
	set, frac := c.settings.ApprovalTTL, c.settings.EscalateAfter
	if set <= 0 {
		set = DefaultApprovalTTL
	}
	var held heldSettings
	if c.version >= shapeLean {
		now := heldSettings{TTL: set, Trust: c.settings.trust(), Judging: judgingNow}
		if v.EscalateTo != "" {
			now.EscalateAfter = escalateAfter(frac, set)
		}
		err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "approval TTL, keys, identity providers and escalation in force"}, func(workflow.Context) any {
			return now
		}).Get(&held)
		if err != nil {
			return held, fmt.Errorf("approval settings: %w", err)
		}
		c.ledger.hooks = held.Trust.Hooks
		return held, nil
	}
	if err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "approval TTL in force"}, func(workflow.Context) any {
		return set
	}).Get(&held.TTL); err != nil {
		return held, fmt.Errorf("approval TTL: %w", err)
	}
	// A marker every history has at its only supported value, so they all
	// replay (docs: versioning policy).
	workflow.GetVersion(c.ctx, signedApprovalsChange, signedApprovalsVersion, signedApprovalsVersion)
	var err error
	held.Trust, err = c.trust()
	return held, err
}

// escalateAfter is when a card with a TTL is also offered to the next role
// up, for the deployment's fraction: 0 (never) for 1 or more.
func escalateAfter(frac float64, ttl time.Duration) time.Duration {
	switch {
	case frac <= 0:
		return time.Duration(float64(ttl) * DefaultEscalateAfter)
	case frac >= 1:
		return 0
	}
	return time.Duration(float64(ttl) * frac)
}

// escalation records when an unanswered card is also offered to the next
// role up: 0 when it never is (no role above, or a card recorded before
// escalation existed).
func (c *call) escalation(v policy.Verdict, ttl time.Duration) (time.Duration, error) {
	if c.version < shapeEscalation || v.EscalateTo == "" {
		return 0, nil
	}
	frac := c.settings.EscalateAfter
	var after time.Duration
	err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "escalation in force"}, func(workflow.Context) any {
		return escalateAfter(frac, ttl)
	}).Get(&after)
	if err != nil {
		return 0, fmt.Errorf("escalation: %w", err)
	}
	return after, nil
}

// escalate offers the card to the next role up as well, recorded and
// audited; the expiry does not move.
func (c *call) escalate(g *guard) error {
	g.Escalated = true
	c.status.EscalatedTo = g.EscalateTo
	msg := fmt.Sprintf("Nobody answered within %s: the card is also offered to the %s. It still expires at %s.",
		g.escalateAfter, g.EscalateTo, c.status.ExpiresAt)
	workflow.GetLogger(c.ctx).Info("card escalated", "to", g.EscalateTo)
	card := g.pendingCard
	card.EscalatedTo = g.EscalateTo
	if err := c.record(activities.AuditInput{Key: "escalated", Event: activities.EventEscalated, Reason: policy.CodeOK, Message: msg,
		Args: card.Args, Resource: card.Resource, Value: c.value()}, card, true); err != nil {
		return err
	}
	c.notify(activities.CardEventEscalated, card, "")
	return nil
}

// notify tells the webhook about the card, when one was in force as the
// card went up: delivered by an activity with retries, not waited for
// until the call ends (a slow receiver never holds a card up).
func (c *call) notify(event string, card activities.ProjectInput, decidedBy string) {
	if !c.ledger.hooks {
		return
	}
	ev := activities.CardEvent{Type: event, WorkflowID: c.key, RunID: c.status.RunID, CardVersion: max(1, card.CardVersion), Status: card.Status,
		Tool: c.in.Tool, Resource: card.Resource, ValueCents: card.ValueCents, Card: card.Card, ApproverRole: card.ApproverRole,
		EscalatedTo: card.EscalatedTo, ApprovalsNeeded: max(1, card.ApprovalsNeeded), ExpiresAt: card.ExpiresAt, DecidedBy: decidedBy}
	opts := workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: time.Minute, Summary: fmt.Sprintf("webhook %s v%d", event, ev.CardVersion),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrWebhookRefused, activities.ErrBadInput}}}
	c.ledger.sent = append(c.ledger.sent, workflow.ExecuteActivity(workflow.WithActivityOptions(c.ctx, opts), acts.Notify, ev))
}

// awaitHooks lets the card's deliveries finish (each is bounded by its
// retry policy) before the call ends; a failed one is logged.
func (c *call) awaitHooks() {
	for _, f := range c.ledger.sent {
		if err := f.Get(c.ctx, nil); err != nil {
			workflow.GetLogger(c.ctx).Warn("webhook not delivered", "error", err)
		}
	}
}

// trust is what a decision is checked against: the keys that may sign it
// and the identity providers whose sign-ins it may carry.
type trust struct {
	Keys    policy.ApprovalKeys `json:"keys"`
	Issuers []string            `json:"issuers"`
	// Hooks says card events go to the webhook (absent before webhooks).
	Hooks bool `json:"hooks,omitempty"`
}

// trust is the deployment's trust, as configured.
func (s Settings) trust() trust {
	return trust{Keys: s.ApprovalKeys, Issuers: s.ApproverIssuers, Hooks: s.Webhooks}
}

// trust records the deployment's trust in force when the card goes up, so
// a redeploy with other keys or providers never changes a card in flight.
func (c *call) trust() (trust, error) {
	t := c.settings.trust()
	var got trust
	if c.version < shapeEvidence {
		// Calls recorded before evidence recorded the keys alone.
		err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "approval keys in force"}, func(workflow.Context) any {
			return t.Keys
		}).Get(&got.Keys)
		if err != nil {
			return got, fmt.Errorf("approval keys: %w", err)
		}
		return got, nil
	}
	err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "approval keys and identity providers in force"}, func(workflow.Context) any {
		return t
	}).Get(&got)
	if err != nil {
		return got, fmt.Errorf("approval trust: %w", err)
	}
	c.ledger.hooks = got.Hooks
	return got, nil
}

// end closes a card that will not run: rejected or expired.
func (c *call) end(card activities.ProjectInput, status CallStatus, code policy.Code, event activities.Event, by *policy.Approval, msg string) (ToolCallResult, error) {
	c.setStatus(status, code)
	in := activities.AuditInput{Key: string(event), Event: event, Reason: code, Message: msg, Args: card.Args, Resource: card.Resource, Value: c.value()}
	// An expiry or a lock does not depend on when the task runs: record it locally.
	local := status == StatusExpired || code == policy.CodeLocked
	card.Version, card.Status = cardFinal, status.card()
	if by != nil {
		in.Approver, in.Evidence, card.DecidedBy, card.Note = &by.Approver, by.Evidence, &by.Approver, by.Reason
		// The row carries the note as the model got it, for the evals export.
		in.Result = c.card.note
		card.DecidedAt = workflow.Now(c.ctx).UTC().Format(time.RFC3339)
	}
	if err := c.record(in, card, local); err != nil {
		return ToolCallResult{}, err
	}
	return c.result(status, code, msg, false, false, c.card.note), nil
}

// record writes an audit row and the card state it leads to, together,
// locally when the event cannot depend on the
// task's time (an expiry, a result already in history); a decision's
// acceptance depends on it, so its record runs only after the task that
// accepted it is complete.
func (c *call) record(in activities.AuditInput, card activities.ProjectInput, local bool) error {
	in.Tool, in.Session = c.in.Tool, c.in.Session
	rec := activities.RecordInput{Audit: in, Card: card}
	var f workflow.Future
	if local {
		f = workflow.ExecuteLocalActivity(localBookkeeping(c.ctx, "record "+string(in.Event)), acts.Record, rec)
	} else {
		f = workflow.ExecuteActivity(bookkeeping(c.ctx, "record "+string(in.Event)), acts.Record, rec)
	}
	if err := f.Get(c.ctx, nil); err != nil {
		return fmt.Errorf("record %s: %w", in.Event, err)
	}
	return nil
}

// approved records the approval and runs exactly the stored action, once.
func (c *call) approved(v policy.Verdict, card activities.ProjectInput, a policy.Approval, action json.RawMessage, hash string) (ToolCallResult, error) {
	if h, err := policy.ArgsHash(c.in.Tool, action); err != nil || h != hash {
		return ToolCallResult{}, fmt.Errorf("stored args changed after the card was shown (hash %s, card %s)", h, hash)
	}
	card.Version, card.Status, card.DecidedBy, card.Note = cardDecided, "approved", &a.Approver, a.Reason
	card.DecidedAt = workflow.Now(c.ctx).UTC().Format(time.RFC3339)
	approved := activities.AuditInput{Key: "approved", Event: activities.EventApproved, Reason: policy.CodeOK, Args: action, Resource: v.Resource,
		Value: c.value(), Approver: &a.Approver, Evidence: a.Evidence, Message: a.Reason, Tool: c.in.Tool, Session: c.in.Session}
	// The call's own activity writes the approval first: it is scheduled
	// only once the task that accepted the approval is complete.
	c.card.before = &activities.RecordInput{Audit: approved, Card: card}
	c.card.approved = &card
	return c.execute(v, action, hash) // it records the outcome with the card
}

// project writes the pending card. From shape 7 the write runs in the workflow task that puts it up: should that task fail, its
// retry writes the card again, expiry and all (the write replaces a
// pending card's expiry).
func (c *call) project(card activities.ProjectInput) error {
	var f workflow.Future
	if c.version >= shapeLean {
		f = workflow.ExecuteLocalActivity(localBookkeeping(c.ctx, "card "+string(card.Status)), acts.Project, card)
	} else {
		f = workflow.ExecuteActivity(bookkeeping(c.ctx, "card "+string(card.Status)), acts.Project, card)
	}
	if err := f.Get(c.ctx, nil); err != nil {
		return fmt.Errorf("project card: %w", err)
	}
	return nil
}
