// Package approvals is the card UI: approvers sign in, see the cards routed
// to their role over their resources, and approve or reject them. Each decision
// is signed here and verified by the worker before it counts.
package approvals

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

//go:embed templates/*.html static/*
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"short": func(s string) string { return s[:min(12, len(s))] },
	"words": func(s string) string { return strings.ReplaceAll(s, "_", " ") },
	"label": func(s string) string {
		s = strings.ReplaceAll(s, "_", " ")
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock":   func(t time.Time) string { return t.UTC().Format("15:04 UTC, 2 Jan") },
	"age":     age,
	"fields":  policy.CardFields,
}).ParseFS(assets, "templates/*.html"))

// value writes a card's value in its tool's pack's unit; a tool whose
// calls have no value says so, never $0.00.
func (s *Server) value(tool string, cents int64) string {
	if s.Policy == nil || !s.Policy.Valued(tool) {
		return "none"
	}
	return s.Policy.FormatValue(tool, cents)
}

// roleLabel is a role as its pack labels it, the role's own name when no
// pack does.
func (s *Server) roleLabel(role string) string {
	if s.Policy != nil {
		for _, r := range s.Policy.Roles() {
			if string(r.Name) == role && r.Label != "" {
				return r.Label
			}
		}
	}
	return strings.ReplaceAll(role, "_", " ")
}

// age says a whole number of hours or minutes in words.
func age(sec int64) string {
	switch {
	case sec%3600 == 0 && sec >= 3600:
		return fmt.Sprintf("%d hours", sec/3600)
	case sec%60 == 0:
		return fmt.Sprintf("%d minutes", sec/60)
	}
	return fmt.Sprintf("%d seconds", sec)
}

// Server serves the card UI.
type Server struct {
	// Policy is the deployment's packs: how each tool's values are written.
	Policy *policy.Policy
	// Pool reads pending_action and audit_log (as the app role).
	Pool *pgxpool.Pool
	// Temporal sends the approval signal.
	Temporal client.Client
	// Auth signs people in with OpenID Connect.
	Auth *Auth
	// Signer signs each decision; the worker trusts its public key.
	Signer signoff.Signer
	// SessionKey signs session cookies and CSRF tokens.
	SessionKey []byte
	// SecureCookies marks cookies Secure even when the card UI's public URL
	// (its registered callback) is not https; an https one always does.
	SecureCookies bool
	Logger        *zap.Logger
	// DecisionWait bounds how long a decision waits to show its outcome.
	DecisionWait time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// TemporalWeb is Temporal Web's base URL (TOOLGATE_TEMPORAL_WEB_URL) and
	// Namespace the calls' namespace, for links to a call's history; no
	// link when the URL is unset.
	TemporalWeb, Namespace string
	// Auditor reads the audit log for the insights page, through the
	// auditor's login (SELECT on audit_log and nothing else); unset, the
	// page answers that it is not set up.
	Auditor insights.Reader
}

// secureCookies says whether cookies are Secure: asked for, or the card
// UI is reached over https (a browser there never sends them in the clear).
func (s *Server) secureCookies() bool {
	return s.SecureCookies || s.Auth != nil && strings.HasPrefix(strings.ToLower(s.Auth.cfg.RedirectURL), "https://")
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	static, _ := fs.Sub(assets, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /signin", s.signIn)
	mux.HandleFunc("GET /auth/callback", s.callback)
	mux.HandleFunc("POST /auth/backchannel-logout", s.backChannelLogout)
	mux.HandleFunc("POST /signout", s.signedIn(s.signOut))
	mux.HandleFunc("GET /signed-out", s.signedOut)
	mux.HandleFunc("GET /{$}", s.signedIn(s.inbox))
	mux.HandleFunc("GET /cards/{id}", s.signedIn(s.card))
	mux.HandleFunc("GET /cards/{id}"+workflows.ConfirmSuffix, s.signedIn(s.card))
	mux.HandleFunc("GET /cards/{id}"+workflows.SignInSuffix, s.signInForCall)
	mux.HandleFunc("POST /cards/{id}/decision", s.signedIn(s.decide))
	mux.HandleFunc("POST /cards/{id}/withdraw", s.signedIn(s.withdraw))
	mux.HandleFunc("POST /cards/batch", s.signedIn(s.decideMany))
	mux.HandleFunc("GET /insights", s.signedIn(s.insightsPage))
	mux.HandleFunc("GET /insights/calls", s.signedIn(func(w http.ResponseWriter, r *http.Request, _ session) {
		http.Redirect(w, r, "/insights/calls/"+url.PathEscape(strings.TrimSpace(r.URL.Query().Get("id"))), http.StatusSeeOther)
	}))
	mux.HandleFunc("GET /insights/calls/{id}", s.signedIn(s.storyPage))
	mux.HandleFunc("GET /register", s.signedIn(s.registerPage))
	return securityHeaders(mux)
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type handler func(w http.ResponseWriter, r *http.Request, sess session)

func (s *Server) signedIn(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.sessionOf(r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/signin?next="+urlQuery(localPath(r.URL.Path)), http.StatusSeeOther)
				return
			}
			http.Error(w, "Your sign-in has ended. Sign in again.", http.StatusUnauthorized)
			return
		}
		h(w, r, sess)
	}
}

type pageData struct {
	Title string
	User  *User
	CSRF  string
	Error string
	// Next is where a sign-in page leads.
	Next  string
	Cards []CardView
	// Mine are the signed-in person's own requests that wait for a person.
	Mine  []CardView
	Card  *CardView
	Flash string
	// Batch is each card's outcome of a batch decision.
	Batch []BatchResult
}

func (s *Server) render(w http.ResponseWriter, status int, name string, d any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, d); err != nil {
		s.Logger.Error("render", zap.String("page", name), zap.Error(err))
	}
}

// CardView is one pending_action row as an approver sees it.
type CardView struct {
	WorkflowID string
	Tool       string
	Text       string
	ValueCents int64
	// Value is ValueCents in the tool's pack's unit, or "none" for a tool
	// whose calls have no value.
	Value string
	// RoutedTo is the card's approver role as the pack labels it.
	RoutedTo    string
	RequestedBy string
	Reason      string
	// Resource is the one the call acts on; Kind "" when none.
	Resource     policy.ResourceRef
	ApproverRole string
	ArgsHash     string
	Status       activities.CardStatus
	ExpiresAt    time.Time
	CreatedAt    time.Time
	DecidedBy    string
	DecidedAt    *time.Time
	Note         string
	// Receipt is what the executed call made, as its tool's result names
	// it ("transfer TR-00012"); result is that result.
	Receipt string
	result  json.RawMessage
	Outcome string
	Pending bool
	Refusal string
	// RunID is the run that shows the card; a signed decision names it.
	RunID string
	// Evidence is the sign-in the card needs; nil on cards from before.
	Evidence *policy.Requirement
	// StepUp says the approver's session falls short of Evidence.
	StepUp bool
	// Justification is the assistant's own words, shown as such.
	Justification string
	// EscalatedTo is the role an unanswered card was also offered to.
	EscalatedTo string
	// ApprovalsNeeded is how many distinct approvers the card needs;
	// Approvals are those counted so far (before the last).
	ApprovalsNeeded int
	Approvals       []activities.ApprovalMark
	// YouApproved and YouAsked say why the signed-in approver cannot
	// count on a card that needs several: they approved it already, or it
	// is their own request.
	YouApproved, YouAsked bool
	// YouRequested says the signed-in person asked for the call: they may
	// see its card and withdraw it while it waits, approver or not;
	// Approver says they may decide it.
	YouRequested, Approver bool
	// Requester is the person behind the requester's credential, when the
	// card names one.
	Requester signoff.Person
	// Version counts the card's versions (edits); Edits are the fields an
	// approver may change, with their values now; Versions is its history.
	// SignedVersion is the version a decision's signature names (0 on
	// cards from before versions were signed).
	Version       int
	SignedVersion int
	Edits         []EditField
	Versions      []CardVersion
}

// EditField is one arg an approver may change on the card.
type EditField struct {
	Name, Label, Value string
}

// CardVersion is one version of a card, from the audit log.
type CardVersion struct {
	Version    int
	At         time.Time
	By         string
	ValueCents int64
	Value      string
	Note       string
}

const cardColumns = `workflow_id, tool, card, value_cents, requested_by, coalesce(args->>'reason', ''), resource_kind, resource_id, approver_role, args_hash,
	status, expires_at, created_at, coalesce(decided_by, ''), decided_at, coalesce(decision_note, ''), coalesce(result, 'null'::jsonb), run_id,
	required_acr, required_max_age_seconds, coalesce(justification, ''), coalesce(escalated_role, ''), approvals_needed, coalesce(approvals, '[]'::jsonb),
	card_version, coalesce(editable, '{}'), args, coalesce(requester_issuer, ''), coalesce(requester_subject, ''), signed_version`

func scanCard(row pgx.Row) (CardView, error) {
	var c CardView
	var acr *string
	var maxAge *int64
	var editable []string
	var args map[string]json.RawMessage
	var kind, id *string
	err := row.Scan(&c.WorkflowID, &c.Tool, &c.Text, &c.ValueCents, &c.RequestedBy, &c.Reason, &kind, &id, &c.ApproverRole, &c.ArgsHash,
		&c.Status, &c.ExpiresAt, &c.CreatedAt, &c.DecidedBy, &c.DecidedAt, &c.Note, &c.result, &c.RunID, &acr, &maxAge, &c.Justification, &c.EscalatedTo,
		&c.ApprovalsNeeded, &c.Approvals, &c.Version, &editable, &args, &c.Requester.Issuer, &c.Requester.Subject, &c.SignedVersion)
	for _, f := range editable {
		var v any
		if raw, ok := args[f]; ok && json.Unmarshal(raw, &v) == nil {
			c.Edits = append(c.Edits, EditField{Name: f, Label: strings.ReplaceAll(f, "_", " "), Value: fmt.Sprint(v)})
		}
	}
	if kind != nil && id != nil {
		c.Resource = policy.ResourceRef{Kind: *kind, ID: *id}
	}
	if acr != nil && maxAge != nil {
		c.Evidence = &policy.Requirement{ACR: *acr, MaxAgeSeconds: *maxAge}
	}
	return c, err
}

// InboxSize is how many cards the inbox shows, newest first.
const InboxSize = 100

// inboxSQL finds the inbox's cards in the partial indexes of pending cards
// (migration 027): by the role a card is routed or escalated to, then by
// each resource the approver holds, or none; each branch reads at most
// InboxSize entries, so the inbox costs the same with 100 or 100,000 cards
// pending and any number decided.
const inboxSQL = `WITH held AS (SELECT kind, id FROM unnest($2::text[], $3::text[]) AS h(kind, id)),
newest AS (
  (SELECT workflow_id, created_at FROM pending_action WHERE status = 'pending_approval' AND approver_role = $1 AND resource_kind IS NULL
     AND expires_at > now() ORDER BY created_at DESC LIMIT $4)
  UNION
  (SELECT workflow_id, created_at FROM pending_action WHERE status = 'pending_approval' AND escalated_role = $1 AND resource_kind IS NULL
     AND expires_at > now() ORDER BY created_at DESC LIMIT $4)
  UNION
  (SELECT p.workflow_id, p.created_at FROM held CROSS JOIN LATERAL (SELECT workflow_id, created_at FROM pending_action
     WHERE status = 'pending_approval' AND approver_role = $1 AND resource_kind = held.kind AND resource_id = held.id
       AND expires_at > now() ORDER BY created_at DESC LIMIT $4) p)
  UNION
  (SELECT p.workflow_id, p.created_at FROM held CROSS JOIN LATERAL (SELECT workflow_id, created_at FROM pending_action
     WHERE status = 'pending_approval' AND escalated_role = $1 AND resource_kind = held.kind AND resource_id = held.id
       AND expires_at > now() ORDER BY created_at DESC LIMIT $4) p)
  ORDER BY created_at DESC, workflow_id LIMIT $4)
SELECT ` + cardColumns + ` FROM pending_action WHERE workflow_id IN (SELECT workflow_id FROM newest) ORDER BY created_at DESC, workflow_id`

// Inbox is the pending, unexpired cards routed or escalated to role, over
// the resources held (a card that names no resource is shown to everyone
// its routing names), newest first, at most InboxSize.
func (s *Server) Inbox(ctx context.Context, role policy.Role, held policy.Resources) ([]CardView, error) {
	var kinds, ids []string
	for kind, list := range held {
		for _, id := range list {
			kinds, ids = append(kinds, kind), append(ids, id)
		}
	}
	cards, err := s.listed(ctx, inboxSQL, string(role), kinds, ids, InboxSize)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return cards, nil
}

// listed is the cards a query of cardColumns finds, each with its value
// and routing as the pack says them.
func (s *Server) listed(ctx context.Context, sql string, args ...any) ([]CardView, error) {
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (CardView, error) {
		c, err := scanCard(row)
		c.Value, c.RoutedTo = s.value(c.Tool, c.ValueCents), s.roleLabel(c.ApproverRole)
		return c, err
	})
}

// inbox lists the pending, unexpired cards routed to the approver's role,
// over the resources they hold: a card that names no resource is shown to
// everyone its routing names.
func (s *Server) inbox(w http.ResponseWriter, r *http.Request, sess session) {
	if sess.User.Role == RoleAuditor {
		http.Redirect(w, r, "/insights", http.StatusSeeOther) // an auditor decides no card
		return
	}
	cards, err := s.Inbox(r.Context(), sess.User.Role, sess.User.Resources)
	if err != nil {
		s.fail(w, err)
		return
	}
	flash := ""
	if moved := r.URL.Query().Get("moved"); moved != "" {
		var version int
		var value int64
		var role string
		if s.Pool.QueryRow(r.Context(), `SELECT p.card_version, p.value_cents, p.approver_role FROM pending_action p WHERE p.workflow_id = $1
			AND EXISTS (SELECT 1 FROM audit_log a WHERE a.workflow_id = p.workflow_id AND a.event = 'edited' AND a.approver_id = $2)`,
			moved, sess.User.UserID).Scan(&version, &value, &role) == nil {
			var tool string
			_ = s.Pool.QueryRow(r.Context(), `SELECT tool FROM pending_action WHERE workflow_id = $1`, moved).Scan(&tool)
			flash = fmt.Sprintf("Your edit was applied: version %d (%s) now waits for the %s.", version, s.value(tool, value), strings.ReplaceAll(role, "_", " "))
		}
	}
	mine, err := s.Mine(r.Context(), sess)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "inbox.html", pageData{Title: "Cards to decide", User: &sess.User, CSRF: s.csrf(sess), Cards: cards, Mine: mine, Flash: flash})
}

// mineSQL finds a person's own pending cards by the issuer and subject
// behind each call's credential, as the workflow judges a withdrawal
// (signoff.Rules.IsRequester), in the partial index of pending cards by
// requester (pending_action_mine, migration 034): never by user ID, which
// two people may share.
const mineSQL = `SELECT ` + cardColumns + ` FROM pending_action WHERE status = 'pending_approval' AND expires_at > now()
  AND requester_issuer = $1 AND requester_subject = $2
  ORDER BY created_at DESC, workflow_id LIMIT $3`

// Mine is the signed-in person's own requests that wait for a person,
// newest first, at most InboxSize: what they may withdraw.
func (s *Server) Mine(ctx context.Context, sess session) ([]CardView, error) {
	if sess.Evidence.Issuer == "" || sess.Evidence.Subject == "" {
		return nil, nil
	}
	cards, err := s.listed(ctx, mineSQL, sess.Evidence.Issuer, sess.Evidence.Subject, InboxSize)
	if err != nil {
		return nil, fmt.Errorf("your requests: %w", err)
	}
	return cards, nil
}

// requested says whether the signed-in person asked for card c: the
// issuer and subject of their sign-in are those behind the call's
// credential (signoff.Rules.IsRequester); a card that names no requester
// is nobody's.
func requested(c CardView, sess session) bool {
	if !c.Requester.Known() {
		return false
	}
	return c.Requester == signoff.Person{Issuer: sess.Evidence.Issuer, Subject: sess.Evidence.Subject}
}

// load returns a card the approver may see: routed to their role, about a
// resource they hold or none; or the signed-in person's own request.
// Anything else is reported as not found.
func (s *Server) load(ctx context.Context, id string, sess session) (CardView, error) {
	u := sess.User
	c, err := scanCard(s.Pool.QueryRow(ctx, `SELECT `+cardColumns+` FROM pending_action WHERE workflow_id = $1`, id))
	if err != nil {
		return c, err
	}
	c.Value, c.RoutedTo = s.value(c.Tool, c.ValueCents), s.roleLabel(c.ApproverRole)
	if spec, ok := s.Policy.Spec(c.Tool); ok {
		c.Receipt = spec.Receipt.Of(c.result)
	}
	c.YouRequested = requested(c, sess)
	c.Approver = (c.ApproverRole == string(u.Role) || c.EscalatedTo == string(u.Role)) && (c.Resource.Kind == "" || u.Resources.Holds(c.Resource.Kind, c.Resource.ID))
	if !c.Approver && !c.YouRequested {
		return CardView{}, pgx.ErrNoRows
	}
	c.Pending = c.Status == activities.CardPending && s.now().Before(c.ExpiresAt)
	if c.ApprovalsNeeded > 1 {
		// One person is one person: the same sign-in under another user ID
		// is the requester, or an approver already counted (as the workflow
		// judges it).
		me := signoff.Person{Issuer: sess.Evidence.Issuer, Subject: sess.Evidence.Subject}
		c.YouAsked = signoff.SamePerson(me, u.UserID, c.Requester, c.RequestedBy)
		c.YouApproved = slices.ContainsFunc(c.Approvals, func(m activities.ApprovalMark) bool {
			return signoff.SamePerson(me, u.UserID, signoff.Person{Issuer: m.Issuer, Subject: m.Subject}, m.UserID)
		})
	}
	approvers := c.DecidedBy
	if len(c.Approvals) > 0 && c.DecidedBy != "" {
		var names []string
		for _, m := range c.Approvals {
			names = append(names, m.UserID)
		}
		approvers = strings.Join(names, ", ") + " and " + c.DecidedBy
	}
	switch {
	case c.Pending:
	case c.Status == activities.CardPending || c.Status == activities.CardExpired:
		c.Outcome = "Expired: nobody decided in time, so nothing ran."
	case c.Status == activities.CardExecuted && c.Receipt != "":
		c.Outcome = fmt.Sprintf("Executed: %s, approved by %s.", c.Receipt, approvers)
	case c.Status == activities.CardExecuted:
		c.Outcome = fmt.Sprintf("Executed, approved by %s.", approvers)
	case c.Status == activities.CardApproved:
		c.Outcome = fmt.Sprintf("Approved by %s; running now.", approvers)
	case c.Status == activities.CardRejected:
		c.Outcome = fmt.Sprintf("Rejected by %s: nothing ran.", c.DecidedBy)
	case c.Status == activities.CardWithdrawn:
		c.Outcome = fmt.Sprintf("Withdrawn by %s, who asked for it: nothing ran.", c.DecidedBy)
	case c.Status == activities.CardFailed:
		c.Outcome = fmt.Sprintf("Approved by %s, but %s could not run it.", approvers, s.Policy.System(c.Tool))
	}
	return c, nil
}

// loadOrAnswer loads the card of the request's path for the approver, or
// answers "Not found" (or the failure) and reports false.
func (s *Server) loadOrAnswer(w http.ResponseWriter, r *http.Request, sess session) (CardView, bool) {
	c, err := s.load(r.Context(), r.PathValue("id"), sess)
	if errors.Is(err, pgx.ErrNoRows) {
		s.render(w, http.StatusNotFound, "notfound.html", pageData{Title: "Not found", User: &sess.User, CSRF: s.csrf(sess)})
		return c, false
	}
	if err != nil {
		s.fail(w, err)
		return c, false
	}
	return c, true
}

func (s *Server) card(w http.ResponseWriter, r *http.Request, sess session) {
	c, ok := s.loadOrAnswer(w, r, sess)
	if !ok {
		return
	}
	// A link an MCP client was given to confirm the call (URL elicitation)
	// is its requester's alone, by the issuer and subject of the sign-in.
	if strings.HasSuffix(r.URL.Path, workflows.ConfirmSuffix) && !c.YouRequested {
		s.render(w, http.StatusForbidden, "notyours.html", pageData{Title: "Not your link", User: &sess.User, CSRF: s.csrf(sess)})
		return
	}
	// Approving may need a stronger or fresher sign-in (the step-up link
	// goes back to the provider with the card's acr_values and max_age);
	// rejecting never does, so the card is shown either way.
	c.StepUp = c.Pending && !s.satisfies(sess, c.Evidence)
	if id, err := strconv.ParseInt(r.URL.Query().Get("refused"), 10, 64); err == nil {
		_ = s.Pool.QueryRow(r.Context(), `SELECT coalesce(message, reason) FROM audit_log WHERE id = $1 AND workflow_id = $2 AND approver_id = $3 AND event = 'approval_refused'`,
			id, c.WorkflowID, sess.User.UserID).Scan(&c.Refusal)
	}
	if c.Version > 1 || len(c.Edits) > 0 {
		c.Versions = s.versions(r.Context(), c)
	}
	s.render(w, http.StatusOK, "card.html", pageData{Title: "Card", User: &sess.User, CSRF: s.csrf(sess), Card: &c})
}

// versions reads a card's history from the audit log: the version the
// request put up, then one per edit.
func (s *Server) versions(ctx context.Context, c CardView) []CardVersion {
	rows, err := s.Pool.Query(ctx, `SELECT event, at, coalesce(approver_id, user_id), coalesce(value_cents, 0), coalesce(message, '') FROM audit_log
		WHERE workflow_id = $1 AND run_id = $2 AND event IN ('needs_approval', 'edited') ORDER BY id`, c.WorkflowID, c.RunID)
	if err != nil {
		s.Logger.Warn("card versions", zap.Error(err))
		return nil
	}
	defer rows.Close()
	var out []CardVersion
	for rows.Next() {
		var v CardVersion
		var event string
		if err := rows.Scan(&event, &v.At, &v.By, &v.ValueCents, &v.Note); err != nil {
			return out
		}
		v.Version, v.Value = len(out)+1, s.value(c.Tool, v.ValueCents)
		if event == "needs_approval" {
			v.Note = "asked for by " + v.By
		}
		out = append(out, v)
	}
	return out
}

// decide signs the approver's decision and signals the call, then waits
// briefly to show what happened. The workflow makes it count at most once.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.csrfOK(sess, r.PostFormValue("csrf")) {
		http.Error(w, "This form has expired. Reload the page and try again.", http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	c, ok := s.loadOrAnswer(w, r, sess)
	if !ok {
		return
	}
	back := "/cards/" + id
	decision := r.PostFormValue("decision")
	if !c.Pending || !c.Approver || (decision != signoff.Approve && decision != signoff.Reject && decision != signoff.Edit) {
		http.Redirect(w, r, back, http.StatusSeeOther) // nothing to decide: the card shows why
		return
	}
	if decision != signoff.Reject && !s.satisfies(sess, c.Evidence) {
		http.Redirect(w, r, "/signin?card="+urlQuery(id), http.StatusSeeOther) // sign in again first
		return
	}
	hash := r.PostFormValue("argsHash")
	if hash == "" {
		hash = c.ArgsHash
	}
	var edit json.RawMessage
	if decision == signoff.Edit {
		var err error
		if edit, err = editValues(c, r); err != nil {
			s.render(w, http.StatusBadRequest, "card.html", pageData{Title: "Card", User: &sess.User, CSRF: s.csrf(sess), Card: &c, Error: err.Error()})
			return
		}
	}
	start := s.now()
	ev := sess.Evidence
	card := signoff.CardRef{WorkflowID: id, RunID: c.RunID, ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339), Version: c.SignedVersion}
	if card.Version > 0 {
		// The version the approver saw, as the args hash is theirs: a later
		// version refuses it, even one that edits led back to that hash.
		seen, err := strconv.Atoi(r.PostFormValue("signedVersion"))
		if err != nil || seen < 1 || seen > card.Version {
			http.Error(w, "This form does not say which version of the card you saw. Reload the card and decide again.", http.StatusBadRequest)
			return
		}
		card.Version = seen
	}
	a := s.Signer.Sign(signoff.Approval{Decision: decision, ArgsHash: hash, Reason: strings.TrimSpace(r.PostFormValue("reason")),
		Approver: sess.User.Identity, Evidence: &ev, Edit: edit}, card, start.UTC().Format(time.RFC3339))
	if err := s.Temporal.SignalWorkflow(r.Context(), id, c.RunID, workflows.ApprovalSignal, a); err != nil {
		s.Logger.Warn("approval signal failed", zap.String("workflowId", id), zap.Error(err))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	s.Logger.Info("decision sent", zap.String("workflowId", id), zap.String("approver", sess.User.UserID), zap.String("decision", decision))
	if refused := s.awaitOutcome(r.Context(), id, sess.User.UserID, start); refused != 0 {
		back += "?refused=" + strconv.FormatInt(refused, 10)
	} else if now, err := s.load(r.Context(), id, sess); errors.Is(err, pgx.ErrNoRows) || err == nil && !now.Approver {
		back = "/?moved=" + urlQuery(id) // the edit routed the card to another role
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// withdraw signs the requester's withdrawal of their own pending card and
// signals the call, then waits briefly to show what became of it: the
// workflow judges it like any decision, in the order it receives them.
func (s *Server) withdraw(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.csrfOK(sess, r.PostFormValue("csrf")) {
		http.Error(w, "This form has expired. Reload the page and try again.", http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	c, ok := s.loadOrAnswer(w, r, sess)
	if !ok {
		return
	}
	back := "/cards/" + id
	if !c.Pending || !c.YouRequested {
		http.Redirect(w, r, back, http.StatusSeeOther) // nothing to withdraw: the card shows why
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if utf8.RuneCountInString(reason) > signoff.MaxReasonRunes {
		s.render(w, http.StatusBadRequest, "card.html", pageData{Title: "Card", User: &sess.User, CSRF: s.csrf(sess), Card: &c,
			Error: fmt.Sprintf("Why you withdraw it is at most %d characters; shorten it and withdraw again.", signoff.MaxReasonRunes)})
		return
	}
	start := s.now()
	ev := sess.Evidence
	card := signoff.CardRef{WorkflowID: id, RunID: c.RunID, ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339), Version: c.SignedVersion}
	a := s.Signer.Sign(signoff.Approval{Decision: signoff.Withdraw, ArgsHash: c.ArgsHash, Reason: reason,
		Approver: policy.Identity{UserID: sess.User.UserID, Role: sess.User.Role}, Evidence: &ev}, card, start.UTC().Format(time.RFC3339))
	if err := s.Temporal.SignalWorkflow(r.Context(), id, c.RunID, workflows.ApprovalSignal, a); err != nil {
		s.Logger.Warn("withdrawal signal failed", zap.String("workflowId", id), zap.Error(err))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	s.Logger.Info("withdrawal sent", zap.String("workflowId", id), zap.String("requester", sess.User.UserID))
	if refused := s.awaitOutcome(r.Context(), id, sess.User.UserID, start); refused != 0 {
		back += "?refused=" + strconv.FormatInt(refused, 10)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// editValues reads the edit form: the new value of each field the card
// lets an approver change, as a JSON object (whole numbers as numbers).
// Its error says what to fix.
func editValues(c CardView, r *http.Request) (json.RawMessage, error) {
	fields := map[string]any{}
	for _, f := range c.Edits {
		v := strings.TrimSpace(r.PostFormValue("edit_" + f.Name))
		if v == "" || v == f.Value {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			fields[f.Name] = n
			continue
		}
		if _, err := strconv.ParseFloat(f.Value, 64); err == nil {
			return nil, fmt.Errorf("%s must be a whole number", f.Label)
		}
		fields[f.Name] = v
	}
	if len(fields) == 0 {
		return nil, errors.New("the edit changes nothing: enter a new value, or approve or reject the card as it is")
	}
	return json.Marshal(fields)
}

// awaitOutcome waits until the card leaves pending or this approver's
// decision is refused, returning the refusal's audit row ID.
func (s *Server) awaitOutcome(ctx context.Context, id, user string, since time.Time) int64 {
	wait := s.DecisionWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		var status string
		var refused int64
		var counted bool
		err := s.Pool.QueryRow(ctx, `SELECT p.status, coalesce((SELECT max(a.id) FROM audit_log a WHERE a.workflow_id = p.workflow_id
			AND a.event = 'approval_refused' AND a.approver_id = $2 AND a.at >= $3), 0),
			EXISTS (SELECT 1 FROM audit_log a WHERE a.workflow_id = p.workflow_id AND a.event IN ('approval_counted', 'edited') AND a.approver_id = $2 AND a.at >= $3)
			FROM pending_action p WHERE p.workflow_id = $1`, id, user, since.Add(-time.Second)).Scan(&status, &refused, &counted)
		if err == nil && (refused != 0 || counted || (activities.CardStatus(status) != activities.CardPending && activities.CardStatus(status) != activities.CardApproved)) {
			return refused
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	s.Logger.Error("approvals request failed", zap.Error(err))
	http.Error(w, "Something went wrong on our side. Try again in a moment.", http.StatusInternalServerError)
}
