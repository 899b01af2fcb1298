package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/signoff"
)

// CardRow is one state of a card for the pending_action projection.
type CardRow struct {
	Version  int                `json:"version"`
	Status   CardStatus         `json:"status"`
	Tool     string             `json:"tool"`
	Session  policy.Session     `json:"session"`
	Resource policy.ResourceRef `json:"resource,omitzero"`
	policy.EarlierResource
	Args         json.RawMessage  `json:"args"`
	ArgsHash     string           `json:"argsHash"`
	Card         string           `json:"card"`
	ValueCents   int64            `json:"valueCents"`
	ApproverRole policy.Role      `json:"approverRole"`
	ExpiresAt    string           `json:"expiresAt"`
	Reason       string           `json:"reason,omitempty"`
	DecidedBy    *policy.Identity `json:"decidedBy,omitempty"`
	DecidedAt    string           `json:"decidedAt,omitempty"`
	Note         string           `json:"note,omitempty"`
	Result       json.RawMessage  `json:"result,omitempty"`
	// Evidence is the sign-in the card's approver needs.
	Evidence *policy.Requirement `json:"evidence,omitempty"`
	// Justification is the assistant's own words on why it proposes the call.
	Justification string `json:"justification,omitempty"`
	// EscalatedTo is the role an unanswered card was also offered to.
	EscalatedTo policy.Role `json:"escalatedTo,omitempty"`
	// ApprovalsNeeded is how many distinct approvers the card needs (0: one).
	ApprovalsNeeded int `json:"approvalsNeeded,omitempty"`
	// Approvals are the approvals counted so far, before the last.
	Approvals []ApprovalMark `json:"approvals,omitempty"`
	// CardVersion counts the card's versions: 1, then one more per edit.
	CardVersion int `json:"cardVersion,omitempty"`
	// SignedVersion is the version a decision's signature names: the
	// CardVersion on cards that sign theirs, 0 on cards from before.
	SignedVersion int `json:"signedVersion,omitempty"`
	// Editable are the args an approver may change.
	Editable []string `json:"editable,omitempty"`
	// Requester is the person behind the requester's credential, when the
	// vault names one.
	Requester *signoff.Person `json:"requester,omitempty"`
}

// ApprovalMark is one approval counted on a card that needs several, with
// the issuer and subject of the approver's sign-in.
type ApprovalMark struct {
	UserID  string      `json:"userId"`
	Role    policy.Role `json:"role"`
	At      string      `json:"at"`
	Issuer  string      `json:"iss,omitempty"`
	Subject string      `json:"sub,omitempty"`
}

// Project writes the card's state to pending_action. A write older than the
// stored version changes nothing, so retries and late writes are harmless.
// A pending card written again by its run takes the new expiry: the write
// runs in the workflow task that puts the card up, and a retried task
// holds the card to a later one.
func (a *Activities) Project(ctx context.Context, in CardRow) error {
	wf, run := workflowIDs(ctx)
	return a.project(ctx, a.Pool, wf, run, in)
}

func (a *Activities) project(ctx context.Context, db execer, wf, run string, in CardRow) error {
	var decidedBy, decidedRole, decidedAt, result any
	if in.DecidedBy != nil {
		decidedBy, decidedRole, decidedAt = clean(in.DecidedBy.UserID), clean(string(in.DecidedBy.Role)), in.DecidedAt
	}
	if len(in.Result) > 0 {
		result = string(a.Sanitizer.Result(in.Result))
	}
	var acr, maxAge any
	if in.Evidence != nil {
		acr, maxAge = in.Evidence.ACR, in.Evidence.MaxAgeSeconds
	}
	kind, id := resourceColumns(in.EarlierResource.Or(in.Resource))
	var reqIssuer, reqSubject any
	if p := in.Requester; p != nil && p.Known() {
		reqIssuer, reqSubject = clean(p.Issuer), clean(p.Subject)
	}
	_, err := db.Exec(ctx, `
		INSERT INTO pending_action (workflow_id, run_id, version, tool, requested_by, requester_role, resource_kind, resource_id, args, args_hash, card,
		                            value_cents, approver_role, reason, status, expires_at, decided_by, decided_role, decided_at, decision_note, result,
		                            required_acr, required_max_age_seconds, justification, escalated_role, approvals_needed, approvals, card_version, editable,
		                            requester_issuer, requester_subject, signed_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $31, $8::jsonb, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20::jsonb, $21, $22, $23, $24, $25, $26::jsonb, $27, $28,
		        $29, $30, $32)
		ON CONFLICT (workflow_id) DO UPDATE SET
		  run_id = EXCLUDED.run_id, version = EXCLUDED.version, status = EXCLUDED.status,
		  args = EXCLUDED.args, args_hash = EXCLUDED.args_hash, card = EXCLUDED.card, value_cents = EXCLUDED.value_cents,
		  approver_role = EXCLUDED.approver_role, required_acr = EXCLUDED.required_acr,
		  required_max_age_seconds = EXCLUDED.required_max_age_seconds, approvals_needed = EXCLUDED.approvals_needed,
		  card_version = EXCLUDED.card_version, signed_version = EXCLUDED.signed_version,
		  expires_at = CASE WHEN EXCLUDED.version = 1 AND pending_action.version = 1 AND pending_action.run_id = EXCLUDED.run_id
		                    THEN EXCLUDED.expires_at ELSE pending_action.expires_at END,
		  decided_by = coalesce(EXCLUDED.decided_by, pending_action.decided_by),
		  decided_role = coalesce(EXCLUDED.decided_role, pending_action.decided_role),
		  decided_at = coalesce(EXCLUDED.decided_at, pending_action.decided_at),
		  decision_note = coalesce(EXCLUDED.decision_note, pending_action.decision_note),
		  result = coalesce(EXCLUDED.result, pending_action.result), updated_at = now(),
		  escalated_role = coalesce(EXCLUDED.escalated_role, pending_action.escalated_role),
		  approvals = EXCLUDED.approvals
		WHERE pending_action.version <= EXCLUDED.version`,
		wf, run, in.Version, clean(in.Tool), clean(in.Session.UserID), clean(string(in.Session.Role)), kind,
		string(a.Sanitizer.Args(in.Args)), in.ArgsHash, in.Card, in.ValueCents, string(in.ApproverRole), clean(in.Reason), in.Status,
		in.ExpiresAt, decidedBy, decidedRole, decidedAt, nullIfEmpty(clean(in.Note)), result, acr, maxAge, nullIfEmpty(sanitize.Text(clean(in.Justification))), nullIfEmpty(string(in.EscalatedTo)),
		max(1, in.ApprovalsNeeded), approvalMarks(in.Approvals), max(1, in.CardVersion), in.Editable, reqIssuer, reqSubject, id, in.SignedVersion)
	if err != nil {
		return fmt.Errorf("project card %s: %w", in.Status, err)
	}
	// The card's intent is held while it is pending (with the card's own
	// expiry) and released when it ends.
	switch in.Status {
	case CardPending:
		_, err = db.Exec(ctx, `UPDATE pending_intents SET expires_at = $3 WHERE workflow_id = $1 AND run_id = $2`, wf, run, in.ExpiresAt)
	case CardApproved:
	default:
		_, err = db.Exec(ctx, `DELETE FROM pending_intents WHERE workflow_id = $1 AND run_id = $2`, wf, run)
	}
	if err != nil {
		return fmt.Errorf("project card %s: intent: %w", in.Status, err)
	}
	return nil
}

// approvalMarks is the approvals column: the marks with their IDs
// cleaned, or NULL when there are none. Every write carries the whole list
// of its version, so an edit's new version clears the old one's marks.
func approvalMarks(marks []ApprovalMark) any {
	if len(marks) == 0 {
		return nil
	}
	out := make([]ApprovalMark, len(marks))
	for i, m := range marks {
		out[i] = ApprovalMark{UserID: clean(m.UserID), Role: policy.Role(clean(string(m.Role))), At: m.At, Issuer: clean(m.Issuer), Subject: clean(m.Subject)}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// RecordInput is one decision event and the card state it leads to,
// written together.
type RecordInput struct {
	Audit AuditInput `json:"audit"`
	Card  CardRow    `json:"card"`
}

// Record appends the audit row and moves the card in one transaction. The
// row is keyed by event: when its key is already written, so is the card
// state it led to, and a repeat writes nothing (not even a card state of
// the same version that says otherwise, as a failed outcome would after
// the call's own activity had recorded it executed).
func (a *Activities) Record(ctx context.Context, in RecordInput) error {
	wf, run := workflowIDs(ctx)
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit it does nothing
	inserted, err := a.insertEnd(ctx, tx, wf, run, in.Audit)
	if err != nil {
		return err
	}
	if !inserted {
		return nil
	}
	if err := a.project(ctx, tx, wf, run, in.Card); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("record: commit: %w", err)
	}
	return nil
}
