package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// Claim names the call a run is about to act on, by the fingerprint of
// what was asked. The first write of every run carries it.
type Claim struct {
	Fingerprint string `json:"fingerprint"`
}

// SecondRun tells a run that an earlier run of its workflow ID claimed the
// call first: whether it asked for something else, and the earlier run's
// result when it has one.
type SecondRun struct {
	PriorRunID string `json:"priorRunId"`
	// Conflict is true when the earlier run asked for another tool, other
	// args or another session.
	Conflict bool `json:"conflict"`
	// Result is the earlier run's final result (a workflows.ToolCallResult),
	// empty when it ended without one.
	Result json.RawMessage `json:"result,omitempty"`
	// Ended says how the earlier run ended when it has no result.
	Ended string `json:"ended,omitempty"`
}

// claim records this run as the one acting on the call, or finds the run
// that already is. It runs inside the transaction of the run's first write.
func claim(ctx context.Context, tx pgx.Tx, wf, run string, c *Claim, tool, user string) (*SecondRun, error) {
	if c == nil {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO tool_calls (workflow_id, run_id, fingerprint, tool, user_id) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (workflow_id) DO NOTHING`, wf, run, c.Fingerprint, clean(tool), clean(user)); err != nil {
		return nil, fmt.Errorf("claim %s: %w", wf, err)
	}
	var prior, fingerprint string
	if err := tx.QueryRow(ctx, `SELECT run_id, fingerprint FROM tool_calls WHERE workflow_id = $1`, wf).Scan(&prior, &fingerprint); err != nil {
		return nil, fmt.Errorf("claim %s: %w", wf, err)
	}
	if prior == run {
		return nil, nil
	}
	return &SecondRun{PriorRunID: prior, Conflict: fingerprint != c.Fingerprint}, nil
}

// secondRun completes a SecondRun with the earlier run's result, read from
// Temporal, and returns it as the activity's (non-retryable) error.
func (a *Activities) secondRun(ctx context.Context, wf string, sr *SecondRun) error {
	if !sr.Conflict {
		sr.Ended = "its result could not be read"
		if a.Temporal != nil {
			var raw json.RawMessage
			if err := a.Temporal.GetWorkflow(ctx, wf, sr.PriorRunID).Get(ctx, &raw); err != nil {
				sr.Ended = endedWithout(err)
			} else {
				sr.Result, sr.Ended = raw, ""
			}
		}
	}
	a.Logger.Warn("a later run of a claimed call ID was refused", zap.String("workflowId", wf), zap.String("priorRunId", sr.PriorRunID), zap.Bool("conflict", sr.Conflict))
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s was claimed by run %s", wf, sr.PriorRunID), ErrSecondRun, nil, *sr)
}

// endedWithout says how a run ended without a result, for the model.
func endedWithout(err error) string {
	var terminated *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &terminated):
		return "it was terminated"
	case errors.As(err, &timeout):
		return "it timed out"
	case errors.As(err, &canceled):
		return "it was canceled"
	}
	return "it failed"
}
