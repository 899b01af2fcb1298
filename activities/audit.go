package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// AuditInput is one decision event.
type AuditInput struct {
	// Key names the event within its run; the same key never writes twice.
	Key     string          `json:"key"`
	Event   Event           `json:"event"`
	Reason  policy.Code     `json:"reason"`
	Tool    string          `json:"tool"`
	Session policy.Session  `json:"session"`
	Args    json.RawMessage `json:"args,omitempty"`
	// Resource is the one the call acted on, zero when it named none.
	Resource policy.ResourceRef `json:"resource,omitzero"`
	policy.EarlierResource
	Value    *int64           `json:"valueCents,omitempty"`
	Approver *policy.Identity `json:"approver,omitempty"`
	// ClaimedBy is the user ID a decision claimed without proof (its
	// signature did not verify, or it could not be read); it never fills
	// Approver.
	ClaimedBy string `json:"claimedBy,omitempty"`
	// Evidence is how a verified approver proved who they are.
	Evidence *signoff.AuthEvidence `json:"evidence,omitempty"`
	Message  string                `json:"message,omitempty"`
	// Claim, on a run's first write, claims the call for this run.
	Claim  *Claim          `json:"claim,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// Requester, on a decision row, is the person behind the call's
	// credential, whom its per-user limits count (admission reads it from
	// the vault); nil when the credential names none.
	Requester *signoff.Person `json:"requester,omitempty"`
}

// Audit appends one event to audit_log. Args and result are sanitized here,
// so no caller can forget; a retry or replay of the same key writes nothing.
func (a *Activities) Audit(ctx context.Context, in AuditInput) error {
	wf, run := workflowIDs(ctx)
	if in.Claim == nil && !ranNothing(in) {
		_, err := a.insertAudit(ctx, a.Pool, wf, run, in)
		return err
	}
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit it does nothing
	if in.Claim != nil {
		sr, err := claim(ctx, tx, wf, run, in.Claim, in.Tool, in.Session.UserID)
		if err != nil {
			return err
		}
		if sr != nil {
			_ = tx.Rollback(ctx)
			return a.secondRun(ctx, wf, sr)
		}
	}
	if _, err := a.insertEnd(ctx, tx, wf, run, in); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("audit: commit: %w", err)
	}
	return nil
}

// AuditAll appends several events of one run in one transaction (the
// refusals of a batch of decisions); each key still writes at most once.
func (a *Activities) AuditAll(ctx context.Context, in []AuditInput) error {
	wf, run := workflowIDs(ctx)
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit it does nothing
	for _, e := range in {
		if _, err := a.insertAudit(ctx, tx, wf, run, e); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("audit: commit: %w", err)
	}
	return nil
}

// ranNothing reports whether a call that ends with this row sent nothing
// upstream: its credential was refused at the exchange, which comes before
// any request to the tool.
func ranNothing(in AuditInput) bool {
	return in.Event == EventFailed && (in.Reason == policy.CodeCredentialUnavailable || in.Reason == policy.CodeStepUpRequired)
}

// insertEnd writes a row, and, when it ends a call that ran nothing after
// admission counted it against a limit, the released row that gives the
// reservation back, in the same transaction (docs/contract.md, Limits).
func (a *Activities) insertEnd(ctx context.Context, tx pgx.Tx, wf, run string, in AuditInput) (bool, error) {
	inserted, err := a.insertAudit(ctx, tx, wf, run, in)
	if err != nil || !inserted || !ranNothing(in) {
		return inserted, err
	}
	var admitted bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM audit_log WHERE workflow_id = $1 AND run_id = $2 AND event IN ('allowed', 'needs_approval'))`,
		wf, run).Scan(&admitted); err != nil {
		return false, fmt.Errorf("audit %s: admitted: %w", EventReleased, err)
	}
	if !admitted {
		return true, nil
	}
	rel := AuditInput{Key: "released", Event: EventReleased, Reason: in.Reason, Tool: in.Tool, Session: in.Session, Resource: in.EarlierResource.Or(in.Resource), Value: in.Value,
		Message: sentences.Say(sentences.Released)}
	_, err = a.insertAudit(ctx, tx, wf, run, rel)
	return true, err
}

func workflowIDs(ctx context.Context) (string, string) {
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID, info.WorkflowExecution.RunID
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// checkViolation is PostgreSQL's SQLSTATE for a row no partition takes,
// among others; noPartitionRoutine the server function that raises it for
// that (its message is in the server's language).
const (
	checkViolation     = "23514"
	noPartitionRoutine = "ExecFindPartition"
)

// insertAudit writes one row, or none when its (workflow, run, key) is
// written already: the table's insert trigger keeps the keys (audit_keys)
// and skips a row whose key is there, so no retry or replay writes twice.
func (a *Activities) insertAudit(ctx context.Context, db execer, workflowID, runID string, in AuditInput) (bool, error) {
	var args, result any
	if len(in.Args) > 0 {
		args = string(a.Sanitizer.Args(in.Args))
	}
	if len(in.Result) > 0 {
		result = string(a.Sanitizer.Result(in.Result))
	}
	var approverID, approverRole any
	if in.Approver != nil {
		approverID, approverRole = clean(in.Approver.UserID), clean(string(in.Approver.Role))
	}
	var issuer, subject, acr, authTime, via any
	if e := in.Evidence; e != nil && in.Approver != nil {
		issuer, subject, acr = clean(e.Issuer), clean(e.Subject), clean(e.ACR)
		if e.Via == signoff.ConfirmedInClient {
			via = e.Via
		}
		if t, err := time.Parse(time.RFC3339, e.AuthTime); err == nil {
			authTime = t
		}
	}
	var claimed any
	if in.ClaimedBy != "" {
		claimed = clean(in.ClaimedBy)
	}
	kind, id := resourceColumns(in.EarlierResource.Or(in.Resource))
	var requesterIssuer, requesterSubject any
	if p, named := person(in.Requester); named {
		requesterIssuer, requesterSubject = p.Issuer, p.Subject
	}
	tag, err := db.Exec(ctx, `
		INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, args, resource_kind, resource_id, value_cents,
		                       workflow_id, run_id, event_key, approver_id, approver_role, message, result, claimed_approver_id,
		                       approver_issuer, approver_subject, approver_acr, approver_auth_time, requester_issuer, requester_subject,
		                       approver_via)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $23, $10, $11, $12, $13, $14, $15, $16, $17::jsonb, $18, $19, $20, $21, $22, $24, $25, $26)`,
		in.Event, string(in.Reason), clean(in.Tool), clean(in.Session.UserID), clean(string(in.Session.Role)),
		clean(in.Session.SessionID), clean(in.Session.ConversationID), args, kind, in.Value,
		workflowID, runID, in.Key, approverID, approverRole, clean(in.Message), result, claimed, issuer, subject, acr, authTime, id,
		requesterIssuer, requesterSubject, via)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == checkViolation && pgErr.Routine == noPartitionRoutine {
			// The worker makes months ahead (audit_log_add_months); should it
			// have fallen behind, make them now, on another connection (an
			// attach never waits on this transaction's insert), and let the
			// activity retry.
			if _, merr := a.Pool.Exec(ctx, `SELECT audit_log_add_months()`); merr != nil {
				err = errors.Join(err, merr)
			}
			return false, fmt.Errorf("audit %s: no month of the audit log holds this row yet: %w", in.Event, err)
		}
		if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
			// Data the database refuses will be refused again: fail loudly, do not retry forever.
			return false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("audit %s: %v", in.Event, err), ErrBadInput, err)
		}
		return false, fmt.Errorf("audit %s: %w", in.Event, err)
	}
	return tag.RowsAffected() == 1, nil
}

// clean makes caller-supplied text safe to store and show: valid UTF-8, no
// NUL or other control characters, at most 200 characters.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "�")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return '�'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}

// resourceColumns are a resource's kind and ID as the tables hold them:
// NULL both when the call named none.
func resourceColumns(r policy.ResourceRef) (kind, id any) {
	if r.Kind == "" {
		return nil, nil
	}
	return clean(r.Kind), clean(r.ID)
}
