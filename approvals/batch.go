// Batch decisions: an approver with many similar cards selects several in
// the inbox and approves or rejects them in one action. Each card still
// gets its own signed decision, bound to the args hash, version and expiry
// the inbox showed for it; each card's evidence is checked on its own, and
// the workflow judges each decision as it judges one from the card page.
// What was refused is named card by card.

package approvals

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

// BatchResult is one card's outcome in a batch decision.
type BatchResult struct {
	WorkflowID string
	// Text and Value name the card as the inbox showed it.
	Text, Value string
	// Outcome is what became of the decision: "approved", "rejected",
	// "counted" (an approval of a card that needs more than one), or
	// "refused", with Why.
	Outcome, Why string
}

// Batch outcomes.
const (
	batchRefused = "refused"
	batchCounted = "counted"
)

// decideMany signs and sends one decision per selected card, then waits
// for each card's outcome and shows them all in the inbox.
func (s *Server) decideMany(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.csrfOK(sess, r.PostFormValue("csrf")) {
		http.Error(w, "This form has expired. Reload the page and try again.", http.StatusForbidden)
		return
	}
	decision := r.PostFormValue("decision")
	if decision != policy.Approve && decision != policy.Reject {
		http.Error(w, "Choose Approve selected or Reject selected.", http.StatusBadRequest)
		return
	}
	ids := slices.Compact(slices.Sorted(slices.Values(r.PostForm["card"])))
	if len(ids) == 0 || len(ids) > InboxSize {
		s.renderInbox(w, r, sess, nil, "Select the cards to decide first (at most "+strconv.Itoa(InboxSize)+").")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	start := s.now()
	results := make([]BatchResult, len(ids))
	sent := make([]Card, len(ids))
	for i, id := range ids {
		results[i] = BatchResult{WorkflowID: id, Outcome: batchRefused}
		c, err := s.load(r.Context(), id, sess)
		if errors.Is(err, pgx.ErrNoRows) {
			results[i].Why = "not found among the cards you may decide"
			continue
		}
		if err != nil {
			s.fail(w, err)
			return
		}
		results[i].Text, results[i].Value = c.Text, c.Value
		if why := s.sendOne(r, sess, c, decision, reason, start); why != "" {
			results[i].Why = why
			continue
		}
		sent[i] = c
	}
	for i, c := range sent {
		if c.WorkflowID == "" {
			continue
		}
		results[i].Outcome, results[i].Why = s.outcomeOf(r, sess, c, decision, start)
	}
	s.renderInbox(w, r, sess, results, "")
}

// sendOne signs and sends one card's decision as the inbox showed the
// card; it returns why it sent nothing, or "".
func (s *Server) sendOne(r *http.Request, sess session, c Card, decision, reason string, at time.Time) string {
	switch {
	case !c.Pending:
		return "it no longer waits for a decision; open it to see why"
	case decision == policy.Approve && !s.satisfies(sess, c.Evidence):
		return "approving it needs a fresher or stronger sign-in than yours (" + c.Evidence.ACR + ", within " + age(c.Evidence.MaxAgeSeconds) + "); open it to sign in again"
	}
	hash := r.PostFormValue("hash." + c.WorkflowID)
	card := policy.Card{WorkflowID: c.WorkflowID, RunID: c.RunID, ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339), Version: c.SignedVersion}
	if card.Version > 0 {
		seen, err := strconv.Atoi(r.PostFormValue("version." + c.WorkflowID))
		if err != nil || seen < 1 || seen > card.Version {
			return "the form does not say which version of it you saw; reload the inbox"
		}
		card.Version = seen
	}
	if hash == "" {
		return "the form does not say which args you saw; reload the inbox"
	}
	ev := sess.Evidence
	a := s.Signer.Sign(policy.Approval{Decision: decision, ArgsHash: hash, Reason: reason, Approver: sess.User.Identity, Evidence: &ev},
		card, at.UTC().Format(time.RFC3339))
	if err := s.Temporal.SignalWorkflow(r.Context(), c.WorkflowID, c.RunID, workflows.ApprovalSignal, a); err != nil {
		s.Logger.Warn("approval signal failed", zap.String("workflowId", c.WorkflowID), zap.Error(err))
		return "it could not be sent; try again"
	}
	s.Logger.Info("decision sent", zap.String("workflowId", c.WorkflowID), zap.String("approver", sess.User.UserID), zap.String("decision", decision), zap.Bool("batch", true))
	return ""
}

// outcomeOf waits for what the workflow made of one sent decision.
func (s *Server) outcomeOf(r *http.Request, sess session, c Card, decision string, since time.Time) (string, string) {
	if refused := s.awaitOutcome(r.Context(), c.WorkflowID, sess.User.UserID, since); refused != 0 {
		why := "the workflow refused it"
		_ = s.Pool.QueryRow(r.Context(), `SELECT coalesce(message, reason) FROM audit_log WHERE id = $1 AND workflow_id = $2 AND event = 'approval_refused'`,
			refused, c.WorkflowID).Scan(&why)
		return batchRefused, strings.TrimPrefix(why, "Refused: ")
	}
	if decision == policy.Approve && c.ApprovalsNeeded > 1 && len(c.Approvals)+1 < c.ApprovalsNeeded {
		return batchCounted, ""
	}
	return decision + "d", ""
}

// renderInbox shows the inbox, with a batch's outcomes or an error above it.
func (s *Server) renderInbox(w http.ResponseWriter, r *http.Request, sess session, batch []BatchResult, problem string) {
	cards, err := s.Inbox(r.Context(), sess.User.Role, sess.User.Resources)
	if err != nil {
		s.fail(w, err)
		return
	}
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	}
	s.render(w, status, "inbox.html", pageData{Title: "Cards to decide", User: &sess.User, CSRF: s.csrf(sess), Cards: cards, Batch: batch, Error: problem})
}
