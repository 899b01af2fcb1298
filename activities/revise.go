package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
)

// ReviseInput is an approver's edit that passed the chain again: the new
// version's verdict, value and intent, its audit row and the card it puts up.
type ReviseInput struct {
	Verdict        policy.Verdict `json:"verdict"`
	ValueCents     int64          `json:"valueCents"`
	PrevValueCents int64          `json:"prevValueCents"`
	Intent         string         `json:"intent,omitempty"`
	Audit          AuditInput     `json:"audit"`
	Card           CardRow        `json:"card"`
}

// ReviseResult says whether the edit stands: ok, or the code and message
// of what refused it (a limit, an equivalent card already up).
type ReviseResult struct {
	Code    policy.Code `json:"code"`
	Message string      `json:"message,omitempty"`
}

// Revise is step 7 for an edited card: under the same bucket locks as
// Admit, the limits are counted with the card's new value in place of its
// old one; the card's intent moves to the new version's; and the edit's
// audit row and the new card version are written together. A retry finds
// its row and changes nothing.
func (a *Activities) Revise(ctx context.Context, in ReviseInput) (ReviseResult, error) {
	wf, run := workflowIDs(ctx)
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return ReviseResult{}, fmt.Errorf("revise: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a committed tx ignores it
	// The card's requester, as admission named them: their per-user limits
	// count their own calls.
	who := in.Card.Requester
	if err := lockBuckets(ctx, tx, in.Verdict.Limits, who); err != nil {
		return ReviseResult{}, fmt.Errorf("revise: %w", err)
	}
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM audit_log WHERE workflow_id = $1 AND run_id = $2 AND event_key = $3`, wf, run, in.Audit.Key).Scan(&one)
	if err == nil {
		return ReviseResult{Code: policy.CodeOK}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ReviseResult{}, fmt.Errorf("revise: look up the edit: %w", err)
	}
	usage := make([]policy.Usage, 0, len(in.Verdict.Limits))
	for _, k := range in.Verdict.Limits {
		// Every other call the bucket holds; the card itself is counted
		// once, at its new value, by Admit, whether or not the window still
		// holds the row that admitted it.
		u, err := countUsageExcept(ctx, tx, k, who, wf, run)
		if err != nil {
			return ReviseResult{}, err
		}
		usage = append(usage, u)
	}
	if v := policy.Admit(in.Verdict, &in.ValueCents, usage); v.Decision == policy.DecisionDeny {
		return ReviseResult{Code: v.Code, Message: v.Message}, nil
	}
	if in.Intent != "" && in.Verdict.Tool != nil && in.Verdict.Tool.PerRequester && in.Card.Requester != nil && in.Card.Requester.Known() {
		// Keyed as admission keyed the card's first version.
		in.Intent = intentOf(in.Card.Tool, in.Verdict.Resource, in.Card.Args, *in.Card.Requester, in.Intent)
	}
	if in.Intent != "" {
		held, err := claimIntent(ctx, tx, wf, run, in.Intent, 0, a.running)
		if err != nil {
			return ReviseResult{}, err
		}
		if held != nil {
			return ReviseResult{Code: policy.CodeAlreadyPending, Message: fmt.Sprintf("an equivalent card is already waiting, until %s", held.ExpiresAt)}, nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM pending_intents WHERE workflow_id = $1 AND run_id = $2 AND intent <> $3`, wf, run, in.Intent); err != nil {
			return ReviseResult{}, fmt.Errorf("revise: release the old intent: %w", err)
		}
	}
	if _, err := a.insertAudit(ctx, tx, wf, run, in.Audit); err != nil {
		return ReviseResult{}, err
	}
	if err := a.project(ctx, tx, wf, run, in.Card); err != nil {
		return ReviseResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return ReviseResult{}, fmt.Errorf("revise: commit: %w", err)
	}
	return ReviseResult{Code: policy.CodeOK}, nil
}
