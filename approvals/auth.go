package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// flowCookie carries one sign-in's state, nonce and PKCE verifier from
// /signin to /auth/callback, signed with the session key.
const flowCookie = "toolgate_signin"

// flow is one authorization code flow in progress.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	// Next is where the person returns (a path of this card UI).
	Next string `json:"x"`
	// Card, for a step-up, is the card that asked for it, and Need what it needs.
	Card string `json:"c,omitempty"`
	// Call, for a sign-in by URL, is the waiting call it carries on.
	Call    string              `json:"w,omitempty"`
	Need    *policy.Requirement `json:"r,omitempty"`
	Expires int64               `json:"e"`
}

// Sign-in events of sign_in_log.
const (
	eventSignedIn       = "signed_in"
	eventSteppedUp      = "stepped_up"
	eventSignInFailed   = "sign_in_failed"
	eventSignedOut      = "signed_out"
	eventSessionRevoked = "session_revoked"
)

// localPath is where a sign-in may return: one of this card UI's own pages,
// matched whole against its routes (a card, its requester's confirmation
// page, or a call's story by a valid workflow ID), else "/". Nothing is cleaned up and kept: a browser reads a
// URL differently than a parser does (it drops tabs and newlines, turns
// '\' into '/'), so only a path from the list can reach the continue page.
func localPath(p string) string {
	switch p {
	case "/", "/insights", "/register":
		return p
	}
	if id, ok := strings.CutPrefix(p, "/cards/"); ok && policy.ValidWorkflowID(strings.TrimSuffix(id, workflows.ConfirmSuffix)) {
		return p
	}
	if id, ok := strings.CutPrefix(p, "/insights/calls/"); ok && policy.ValidWorkflowID(id) {
		return p
	}
	return "/"
}

// signIn sends the person to the provider. With ?card=ID (a card their
// session does not satisfy) it asks for that card's acr and max_age.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	f := s.newFlow(localPath(r.URL.Query().Get("next")))
	var opts []oauth2.AuthCodeOption
	if id := r.URL.Query().Get("card"); id != "" {
		sess, ok := s.sessionOf(r)
		if !ok {
			http.Redirect(w, r, "/signin?next="+urlQuery("/cards/"+id), http.StatusSeeOther)
			return
		}
		c, err := s.load(r.Context(), id, sess)
		if err != nil || c.Evidence == nil || !c.Approver {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		f.Card, f.Need, f.Next = id, c.Evidence, "/cards/"+id
		opts = append(opts, oauth2.SetAuthURLParam("acr_values", s.Auth.cfg.providerACR(c.Evidence.ACR)),
			oauth2.SetAuthURLParam("max_age", strconv.FormatInt(int64(freshFor(c.Evidence).Seconds()), 10)),
			oauth2.SetAuthURLParam("login_hint", sess.User.UserID))
	}
	s.startFlow(w, r, f, opts...)
}

// newFlow is a new authorization code flow that returns to next.
func (s *Server) newFlow(next string) flow {
	return flow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Next: next, Expires: s.now().Add(10 * time.Minute).Unix()}
}

// startFlow keeps f in its signed cookie and sends the browser to the
// provider, with PKCE, the nonce and opts.
func (s *Server) startFlow(w http.ResponseWriter, r *http.Request, f flow, opts ...oauth2.AuthCodeOption) {
	opts = append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce)}, opts...)
	body, _ := json.Marshal(f)
	b64 := base64.RawURLEncoding.EncodeToString(body)
	// Lax, not Strict: the provider's redirect back is a cross-site navigation.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: b64 + "." + base64.RawURLEncoding.EncodeToString(s.mac("flow", b64)),
		Path: "/auth/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies(), MaxAge: 600})
	http.Redirect(w, r, s.Auth.oauth.AuthCodeURL(f.State, opts...), http.StatusSeeOther)
}

func (s *Server) flowOf(r *http.Request) (flow, bool) {
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return flow{}, false
	}
	b64, sig, ok := strings.Cut(c.Value, ".")
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, s.mac("flow", b64)) {
		return flow{}, false
	}
	body, err := base64.RawURLEncoding.DecodeString(b64)
	var f flow
	if err != nil || json.Unmarshal(body, &f) != nil || s.now().Unix() > f.Expires {
		return flow{}, false
	}
	return f, true
}

// callback finishes a sign-in: the state must match the flow's, the code
// is exchanged with the PKCE verifier, the ID token verified (issuer,
// audience, expiry, signature) and its nonce matched; then a session is
// stored server-side.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	f, ok := s.flowOf(r)
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: "/auth/", Secure: s.secureCookies(), MaxAge: -1})
	q := r.URL.Query()
	if !ok || q.Get("state") == "" || !hmac.Equal([]byte(q.Get("state")), []byte(f.State)) {
		s.signInFailed(w, r, nil, f.Card, "This sign-in link is not the one this browser started, or it has expired.")
		return
	}
	if e := q.Get("error"); e != "" {
		s.signInFailed(w, r, nil, f.Card, fmt.Sprintf("The identity provider refused the sign-in (%s): %s", clip(e), clip(q.Get("error_description"))))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	tok, err := s.Auth.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.signInFailed(w, r, nil, f.Card, "The identity provider did not accept the sign-in code: "+clip(err.Error()))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := s.Auth.verifier.Verify(ctx, raw)
	if err != nil {
		s.signInFailed(w, r, nil, f.Card, "The ID token did not verify: "+clip(err.Error()))
		return
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(f.Nonce)) {
		s.signInFailed(w, r, nil, f.Card, "The ID token was not issued for this sign-in (nonce).")
		return
	}
	c, err := s.Auth.claims(idt)
	c.IDToken = raw
	if err != nil {
		s.signInFailed(w, r, &c, f.Card, "The identity provider's answer cannot sign you in here: "+err.Error())
		return
	}
	old, had := s.sessionOf(r)
	event, msg := eventSignedIn, "signed in"
	if f.Call != "" {
		if f.Need != nil && !s.satisfies(session{User: c.User, Evidence: c.Evidence, AuthTime: c.AuthTime}, f.Need) {
			s.signInFailed(w, r, &c, f.Call, fmt.Sprintf("The sign-in (%s at %s) does not meet what this call needs (%s within %s).",
				orNone(c.Evidence.ACR), c.Evidence.AuthTime, f.Need.ACR, f.Need.MaxAge()))
			return
		}
		if err := s.carryOn(ctx, f.Call, c); err != nil {
			s.signInFailed(w, r, &c, f.Call, "The sign-in did not count for this call: "+err.Error())
			return
		}
		f.Need, f.Card = nil, f.Call
		event, msg = eventSignedInForCall, "signed in for a waiting call"
	}
	if f.Need != nil {
		after := session{User: c.User, Evidence: c.Evidence, AuthTime: c.AuthTime}
		if !s.satisfies(after, f.Need) {
			s.signInFailed(w, r, &c, f.Card, fmt.Sprintf("The sign-in (%s at %s) does not meet what this card needs (%s within %s).",
				orNone(c.Evidence.ACR), c.Evidence.AuthTime, f.Need.ACR, f.Need.MaxAge()))
			return
		}
		event, msg = eventSteppedUp, fmt.Sprintf("stepped up to %s for a card", c.Evidence.ACR)
	}
	var replaced *session
	if had {
		replaced = &old
	}
	if err := s.startSession(ctx, w, c, replaced); err != nil {
		s.fail(w, err)
		return
	}
	s.logSignIn(ctx, event, &c, f.Card, msg)
	s.Logger.Info(msg, zap.String("user", c.User.UserID), zap.String("acr", c.Evidence.ACR))
	// A page, not a redirect: a Lax session cookie set during a cross-site
	// redirect chain is sent on the next same-site navigation.
	if f.Call != "" {
		s.render(w, http.StatusOK, "callsignin.html", pageData{Title: "Signed in", Flash: "You are signed in for your call. Go back to your agent: it carries the call on with this sign-in."})
		return
	}
	s.render(w, http.StatusOK, "continue.html", pageData{Title: "Signed in", Next: f.Next})
}

func orNone(s string) string {
	if s == "" {
		return "an unknown level"
	}
	return s
}

func urlQuery(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "?", "%3F", "#", "%23", "+", "%2B", " ", "%20").Replace(s)
}

// signInFailed audits a failed sign-in and says what happened.
func (s *Server) signInFailed(w http.ResponseWriter, r *http.Request, c *signInClaims, card, why string) {
	s.logSignIn(r.Context(), eventSignInFailed, c, card, why)
	s.Logger.Warn("sign-in failed", zap.String("why", why))
	s.render(w, http.StatusUnauthorized, "signin.html", pageData{Title: "Sign-in failed", Error: why, Next: "/"})
}

// logSignIn appends one event to sign_in_log; a failure to write it is
// logged, never hidden from the log reader.
func (s *Server) logSignIn(ctx context.Context, event string, c *signInClaims, card, msg string) {
	var user, iss, sub, acr any
	var amr []string
	var at any
	if c != nil {
		if c.User.UserID != "" {
			user = c.User.UserID
		}
		iss, sub, acr, amr = c.Evidence.Issuer, c.Evidence.Subject, c.Evidence.ACR, c.Evidence.AMR
		if !c.AuthTime.IsZero() {
			at = c.AuthTime
		}
	}
	var wf any
	if card != "" {
		wf = card
	}
	if _, err := s.Pool.Exec(context.WithoutCancel(ctx), `INSERT INTO sign_in_log (event, user_id, issuer, subject, acr, amr, auth_time, workflow_id, message)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, event, user, iss, sub, acr, amr, at, wf, msg); err != nil {
		s.Logger.Error("sign_in_log write failed", zap.String("event", event), zap.Error(err))
	}
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.csrfOK(sess, r.PostFormValue("csrf")) {
		http.Error(w, "This form has expired. Reload the page and try again.", http.StatusForbidden)
		return
	}
	var idToken *string
	if err := s.Pool.QueryRow(r.Context(), `DELETE FROM approver_sessions WHERE id_hash = $1 RETURNING id_token`, sess.idHash).Scan(&idToken); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.fail(w, err)
		return
	}
	s.logSignIn(r.Context(), eventSignedOut, &signInClaims{User: sess.User, Evidence: sess.Evidence, AuthTime: sess.AuthTime}, "", "signed out")
	s.clearSession(w)
	// End the provider's session too, so the next sign-in asks again.
	if end := s.Auth.endSessionURL(deref(idToken)); end != "" {
		http.Redirect(w, r, end, http.StatusSeeOther)
		return
	}
	s.signedOut(w, r)
}

// signedOut is where a sign-out ends, back from the provider.
func (s *Server) signedOut(w http.ResponseWriter, _ *http.Request) {
	s.render(w, http.StatusOK, "signin.html", pageData{Title: "Signed out", Flash: "You are signed out.", Next: "/"})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// backChannelLogout takes a logout token from the provider (OpenID Connect
// Back-Channel Logout 1.0) and ends every session of its subject at once,
// with every credential issued to the subject's sign-ins.
func (s *Server) backChannelLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	raw := r.PostFormValue("logout_token")
	tok, err := s.Auth.logout.Verify(r.Context(), raw)
	if err != nil {
		http.Error(w, "invalid logout token", http.StatusBadRequest)
		return
	}
	var claims struct {
		Events map[string]json.RawMessage `json:"events"`
		Nonce  *string                    `json:"nonce"`
		Reason string                     `json:"toolgate_reason"`
	}
	if err := tok.Claims(&claims); err != nil || claims.Nonce != nil || tok.Subject == "" {
		http.Error(w, "invalid logout token", http.StatusBadRequest)
		return
	}
	if _, ok := claims.Events[BackChannelLogoutEvent]; !ok {
		http.Error(w, "invalid logout token: no back-channel logout event", http.StatusBadRequest)
		return
	}
	rows, err := s.Pool.Query(r.Context(), `DELETE FROM approver_sessions WHERE issuer = $1 AND subject = $2 RETURNING user_id`, tok.Issuer, tok.Subject)
	if err != nil {
		http.Error(w, "could not end the sessions", http.StatusInternalServerError)
		return
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		http.Error(w, "could not end the sessions", http.StatusInternalServerError)
		return
	}
	reason := clip(claims.Reason)
	if reason == "" {
		reason = "logged out at the provider"
	}
	// Authority ends everywhere with the sessions: the credentials issued
	// to this person's sign-ins, and their MCP tokens (migration 022).
	var revoked int
	if err := s.Pool.QueryRow(r.Context(), `SELECT vault.revoke_sign_in($1, $2, $3)`, tok.Issuer, tok.Subject, reason).Scan(&revoked); err != nil {
		s.Logger.Error("revoke the sign-in's credentials", zap.String("subject", tok.Subject), zap.Error(err))
		http.Error(w, "could not revoke the credentials", http.StatusInternalServerError)
		return
	}
	slices.Sort(users)
	c := &signInClaims{Evidence: signoff.AuthEvidence{Issuer: tok.Issuer, Subject: tok.Subject}}
	if len(users) > 0 {
		c.User.UserID = users[0]
	}
	s.logSignIn(r.Context(), eventSessionRevoked, c, "", fmt.Sprintf("the provider ended %d session(s): %s", len(users), reason))
	s.Logger.Info("sessions revoked by the provider", zap.String("subject", tok.Subject), zap.Int("sessions", len(users)), zap.Int("credentials", revoked),
		zap.String("reason", reason))
	w.WriteHeader(http.StatusOK)
}

// BackChannelLogoutEvent is the events member a logout token must carry.
const BackChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"
