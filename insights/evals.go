package insights

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
)

// EvalSchema names the shape of an evals line (docs/evals.schema.json).
const EvalSchema = "toolgate.evals/v1"

// EvalRecord is one model-facing decision: one call as the model saw it
// and how it ended. No user, session or conversation: the ID is a hash,
// args and texts pass the sanitizer again.
type EvalRecord struct {
	Schema string `json:"schema"`
	// ID is stable for a call (a hash of its workflow and run IDs), so
	// exports of overlapping periods can be joined.
	ID   string    `json:"id"`
	At   time.Time `json:"at"`
	Tool string    `json:"tool"`
	// Args are the call's args after the session filled them, sanitized.
	Args json.RawMessage `json:"args"`
	// Decision is what the chain decided: allow, approve, deny, or
	// sign_in (the call waited for the person to sign in).
	Decision string `json:"decision"`
	// Code and Message are what the model was told at the decision.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Outcome is how the call ended (executed, denied, rejected, expired,
	// failed), or pending; OutcomeCode is its code.
	Outcome     string `json:"outcome"`
	OutcomeCode string `json:"outcomeCode"`
	// OutcomeInferred marks an allowed read reported executed: a read that
	// succeeds writes no outcome row (its history has it), so one with no
	// failure row is taken to have run (one still in flight at the export
	// is reported so too).
	OutcomeInferred bool `json:"outcomeInferred,omitempty"`
	// Card is there for calls that waited for a person.
	Card *EvalCard `json:"card,omitempty"`
}

// EvalCard is a card's fate: what the approver decided and said.
type EvalCard struct {
	ValueCents int64 `json:"valueCents"`
	// Versions counts the card's versions (edits re-run the dry run).
	Versions int `json:"versions"`
	// Decision is approved, rejected, expired or locked (still pending: "").
	Decision     string `json:"decision"`
	ApproverRole string `json:"approverRole,omitempty"`
	// Note is the approver's note, sanitized ("" when none).
	Note string `json:"note"`
	// RefusedDecisions counts decisions refused on the way (wrong role,
	// hash, evidence...).
	RefusedDecisions int `json:"refusedDecisions"`
	// DecisionSeconds is the time from the card going up to its decision.
	DecisionSeconds *float64 `json:"decisionSeconds,omitempty"`
}

// exportSQL reads every row of the calls first decided since $1, grouped
// by call in order.
const exportSQL = `SELECT a.workflow_id, a.run_id, a.at, a.event, a.reason, a.tool, a.args, a.value_cents, coalesce(a.approver_role, ''), coalesce(a.message, ''), a.result
FROM audit_log a
WHERE (a.workflow_id, a.run_id) IN (SELECT d.workflow_id, d.run_id FROM audit_log d
                                    WHERE d.event IN ('allowed', 'needs_approval', 'denied', 'awaiting_sign_in') AND d.at >= $1)
ORDER BY a.workflow_id, a.run_id, a.id`

// ExportEvals writes one JSON line per model-facing decision first made at
// or after since, and returns how many it wrote.
func (r Reader) ExportEvals(ctx context.Context, since time.Time, w io.Writer) (int, error) {
	rows, err := r.Pool.Query(ctx, exportSQL, since)
	if err != nil {
		return 0, fmt.Errorf("export evals: %w", err)
	}
	defer rows.Close()
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	var cur *EvalRecord
	var key string
	var upAt time.Time
	n := 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		if spec, ok := r.Policy.Spec(cur.Tool); ok && spec.Tier == policy.TierRead && cur.Decision == "allow" && cur.Outcome == "pending" {
			cur.Outcome, cur.OutcomeCode, cur.OutcomeInferred = "executed", string(policy.CodeOK), true
		}
		n++
		return enc.Encode(cur)
	}
	for rows.Next() {
		var wf, run, event, reason, tool, role, message string
		var at time.Time
		var args, result []byte
		var value *int64
		if err := rows.Scan(&wf, &run, &at, &event, &reason, &tool, &args, &value, &role, &message, &result); err != nil {
			return n, fmt.Errorf("export evals: %w", err)
		}
		reason = string(policy.Code(reason).Canonical())
		if wf+"\x00"+run != key {
			if err := flush(); err != nil {
				return n, err
			}
			key, cur = wf+"\x00"+run, nil
		}
		if cur == nil {
			decision, ok := map[string]string{"allowed": "allow", "needs_approval": "approve", "denied": "deny", "awaiting_sign_in": "sign_in"}[event]
			if !ok {
				continue // rows of a call decided before the period
			}
			sum := sha256.Sum256([]byte(wf + "/" + run))
			cur = &EvalRecord{Schema: EvalSchema, ID: hex.EncodeToString(sum[:8]), At: at.UTC(), Tool: tool, Args: sanitizedArgs(args), Decision: decision,
				Code: reason, Message: sanitize.Text(message), Outcome: "pending", OutcomeCode: ""}
			if event == "denied" {
				cur.Outcome, cur.OutcomeCode = "denied", reason
			}
		}
		switch event {
		case "needs_approval", "edited":
			if cur.Card == nil {
				cur.Card = &EvalCard{}
			}
			cur.Card.Versions++
			if value != nil {
				cur.Card.ValueCents = *value
			}
			upAt = at
		case "approval_refused":
			if cur.Card != nil {
				cur.Card.RefusedDecisions++
			}
		case "approved", "rejected", "expired":
			if cur.Card == nil {
				cur.Card = &EvalCard{}
			}
			d := event
			if reason == "locked" {
				d = "locked"
			}
			cur.Card.Decision, cur.Card.ApproverRole = d, role
			if note := noteOf(event, message, result); note != "" {
				cur.Card.Note = note
			}
			if !upAt.IsZero() && event != "expired" {
				s := at.Sub(upAt).Seconds()
				cur.Card.DecisionSeconds = &s
			}
			if event != "approved" {
				cur.Outcome, cur.OutcomeCode = event, reason
			}
		case "executed", "failed":
			cur.Outcome, cur.OutcomeCode = event, reason
		case "awaiting_sign_in":
			if cur.Decision != "sign_in" {
				cur.Outcome = "pending"
			}
		case "allowed", "denied":
			if cur.Decision == "sign_in" { // the chain ran again after the sign-in
				cur.Outcome, cur.OutcomeCode = "pending", ""
				if event == "denied" {
					cur.Outcome, cur.OutcomeCode = "denied", reason
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("export evals: %w", err)
	}
	if err := flush(); err != nil {
		return n, err
	}
	return n, out.Flush()
}

// noteOf finds an approver's note: an approval carries it as its message,
// a rejection in its result (result.note, as the model got it).
func noteOf(event, message string, result []byte) string {
	switch event {
	case "approved":
		return sanitize.Text(message)
	case "rejected":
		var r struct {
			Note string `json:"note"`
		}
		if json.Unmarshal(result, &r) == nil {
			return sanitize.Text(r.Note)
		}
	}
	return ""
}

func sanitizedArgs(args []byte) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage(`{}`)
	}
	return (sanitize.Sanitizer{}).Args(args)
}
