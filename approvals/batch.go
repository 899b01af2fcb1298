// Batch decisions: an approver with many similar cards selects several in
// the inbox and approves or rejects them in one action. Each card still
// gets its own signed decision, bound to the args hash, version and expiry
// the inbox showed for it; each card's evidence is checked on its own, and
// the workflow judges each decision as it judges one from the card page.
// What was refused is named card by card.

package approvals

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

// BatchResult is one card's outcome in a batch decision.
type BatchResult struct {
	WorkflowID string
	// Text and Value name the card as the inbox showed it.
	Text, Value string
	// Outcome is what became of the decision, as the log says it:
	// "approved", "rejected", "counted" (an approval of a card that needs
	// more than one), "refused", "not-counted" (the card ended otherwise
	// first) or "sent" (nothing recorded yet), with Why.
	Outcome, Why string
}

// Word is the outcome as the inbox says it.
func (b BatchResult) Word() string { return strings.ReplaceAll(b.Outcome, "-", " ") }

// Batch outcomes besides the decision's own word.
const (
	batchRefused = "refused"
	batchCounted = "counted"
	// batchNotCounted: the card ended otherwise (another decision, its
	// expiry) before this one was judged.
	batchNotCounted = "not-counted"
	// batchSent: no outcome was recorded within the batch's wait.
	batchSent = "sent"
)

// maxBatchForm bounds a batch's form: 100 cards' IDs, hashes and versions
// fit many times over.
const maxBatchForm = 256 << 10

// decideMany signs and sends one decision per selected card, then waits
// once, for all of them together, for what the workflow made of each, and
// shows them in the inbox.
func (s *Server) decideMany(w http.ResponseWriter, r *http.Request, sess session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBatchForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "This form is too large: select at most "+strconv.Itoa(InboxSize)+" cards.", http.StatusRequestEntityTooLarge)
		return
	}
	if !s.csrfOK(sess, r.PostFormValue("csrf")) {
		http.Error(w, "This form has expired. Reload the page and try again.", http.StatusForbidden)
		return
	}
	decision := r.PostFormValue("decision")
	if decision != signoff.Approve && decision != signoff.Reject {
		http.Error(w, "Choose Approve selected or Reject selected.", http.StatusBadRequest)
		return
	}
	picked := r.PostForm["card"]
	if len(picked) == 0 || len(picked) > InboxSize {
		s.renderInbox(w, r, sess, nil, "Select the cards to decide first (at most "+strconv.Itoa(InboxSize)+").")
		return
	}
	ids := slices.Compact(slices.Sorted(slices.Values(picked)))
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	// The log's own clock: the rows the worker writes for these decisions
	// are stamped after it, whatever this server's clock says.
	var since time.Time
	if err := s.Pool.QueryRow(r.Context(), `SELECT now()`).Scan(&since); err != nil {
		s.fail(w, err)
		return
	}
	start := s.now()
	results := make([]BatchResult, len(ids))
	var sent []int
	for i, id := range ids {
		results[i] = BatchResult{WorkflowID: id, Outcome: batchRefused}
		c, err := s.load(r.Context(), id, sess)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && !c.Approver:
			results[i].Why = "not found among the cards you may decide"
			continue
		case err != nil:
			s.Logger.Warn("batch: load a card", zap.String("workflowId", id), zap.Error(err))
			results[i].Why = "it could not be read, so nothing was sent; try again"
			continue
		}
		results[i].Text, results[i].Value = c.Text, c.Value
		if why := s.sendOne(r, sess, c, decision, reason, start); why != "" {
			results[i].Why = why
			continue
		}
		sent = append(sent, i)
	}
	s.awaitMany(r, sess, results, sent, since)
	s.renderInbox(w, r, sess, results, "")
}

// sendOne signs and sends one card's decision as the inbox showed the
// card; it returns why it sent nothing, or "".
func (s *Server) sendOne(r *http.Request, sess session, c CardView, decision, reason string, at time.Time) string {
	switch {
	case !c.Pending:
		return "it no longer waits for a decision; open it to see why"
	case decision == signoff.Approve && c.YouAsked:
		return "you asked for it, so your approval does not count; it needs other people"
	case decision == signoff.Approve && c.YouApproved:
		return "you have approved it already; it needs another approver"
	case decision == signoff.Approve && !s.satisfies(sess, c.Evidence):
		return "approving it needs a fresher or stronger sign-in than yours (" + c.Evidence.ACR + ", within " + age(c.Evidence.MaxAgeSeconds) + "); open it to sign in again"
	}
	hash := r.PostFormValue("hash." + c.WorkflowID)
	card := signoff.CardRef{WorkflowID: c.WorkflowID, RunID: c.RunID, ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339), Version: c.SignedVersion}
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
	a := s.Signer.Sign(signoff.Approval{Decision: decision, ArgsHash: hash, Reason: reason, Approver: sess.User.Identity, Evidence: &ev},
		card, at.UTC().Format(time.RFC3339))
	if err := s.Temporal.SignalWorkflow(r.Context(), c.WorkflowID, c.RunID, workflows.ApprovalSignal, a); err != nil {
		s.Logger.Warn("approval signal failed", zap.String("workflowId", c.WorkflowID), zap.Error(err))
		return "it could not be sent; try again"
	}
	s.Logger.Info("decision sent", zap.String("workflowId", c.WorkflowID), zap.String("approver", sess.User.UserID), zap.String("decision", decision), zap.Bool("batch", true))
	return ""
}

// batchOutcomeSQL reads, for each card, what the log holds of this
// approver's decision since the batch began: its refusal, or the row that
// counted it; and where the card stands.
const batchOutcomeSQL = `SELECT p.workflow_id, p.status,
	coalesce((SELECT coalesce(a.message, a.reason) FROM audit_log a WHERE a.workflow_id = p.workflow_id AND a.run_id = p.run_id
		AND a.event = 'approval_refused' AND a.approver_id = $2 AND a.at >= $3 ORDER BY a.id DESC LIMIT 1), ''),
	coalesce((SELECT a.event FROM audit_log a WHERE a.workflow_id = p.workflow_id AND a.run_id = p.run_id
		AND a.event IN ('approval_counted', 'approved', 'rejected') AND a.approver_id = $2 AND a.at >= $3 ORDER BY a.id DESC LIMIT 1), '')
FROM pending_action p WHERE p.workflow_id = ANY($1)`

// awaitMany waits, within one DecisionWait for the whole batch, until the
// log says what became of each sent decision. An outcome is only ever what
// the log says: a card still waiting at the end is "sent", one that ended
// otherwise "not counted".
func (s *Server) awaitMany(r *http.Request, sess session, results []BatchResult, sent []int, since time.Time) {
	wait := s.DecisionWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	open := map[string]int{}
	for _, i := range sent {
		open[results[i].WorkflowID] = i
	}
	for len(open) > 0 {
		ids := slices.Collect(maps.Keys(open))
		rows, err := s.Pool.Query(ctx, batchOutcomeSQL, ids, sess.User.UserID, since)
		if err == nil {
			err = s.judgeBatchRows(rows, results, open)
		}
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("batch: read outcomes", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			for _, i := range open {
				results[i].Outcome, results[i].Why = batchSent, "no outcome was recorded yet; open it to see where it stands"
			}
			return
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// judgeBatchRows settles the cards whose outcome the rows show.
func (s *Server) judgeBatchRows(rows pgx.Rows, results []BatchResult, open map[string]int) error {
	defer rows.Close()
	for rows.Next() {
		var id, status, refusal, counted string
		if err := rows.Scan(&id, &status, &refusal, &counted); err != nil {
			return err
		}
		i, ok := open[id]
		if !ok {
			continue
		}
		switch {
		case refusal != "":
			results[i].Outcome, results[i].Why = batchRefused, strings.TrimPrefix(refusal, "Refused: ")
		case counted == string(activities.EventApprovalCounted):
			results[i].Outcome = batchCounted
		case counted != "":
			results[i].Outcome = counted
		case activities.CardStatus(status) != activities.CardPending:
			results[i].Outcome, results[i].Why = batchNotCounted, "the card ended otherwise ("+status+") before your decision counted"
		default:
			continue
		}
		delete(open, id)
	}
	return rows.Err()
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
