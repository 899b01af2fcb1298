package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"go.uber.org/zap"
)

// SessionCookie names the session cookie: a random ID; the session itself
// lives in approver_sessions, keyed by the ID's SHA-256.
const SessionCookie = "toolgate_session"

// SessionTTL is the longest a card UI session lasts.
const SessionTTL = 8 * time.Hour

// session is one signed-in person, as approver_sessions holds them.
type session struct {
	idHash   []byte
	User     User
	Evidence signoff.AuthEvidence
	AuthTime time.Time
}

func (s *Server) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.SessionKey)
	m.Write([]byte(strings.Join(parts, "|")))
	return m.Sum(nil)
}

// startSession stores a new session for a verified sign-in and sets its
// cookie; replaced, if any, is the browser's earlier session (a step-up
// replaces it).
func (s *Server) startSession(ctx context.Context, w http.ResponseWriter, c signInClaims, replaced *session) error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	sum := sha256.Sum256(raw)
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if replaced != nil {
			if _, err := tx.Exec(ctx, `DELETE FROM approver_sessions WHERE id_hash = $1`, replaced.idHash); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO approver_sessions (id_hash, user_id, name, role, resources, issuer, subject, acr, amr, auth_time, expires_at, id_token)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			sum[:], c.User.UserID, c.User.Name, string(c.User.Role), c.User.Resources, c.Evidence.Issuer, c.Evidence.Subject, c.Evidence.ACR,
			nonNil(c.Evidence.AMR), c.AuthTime, s.now().Add(SessionTTL), c.IDToken)
		return err
	})
	if err != nil {
		return fmt.Errorf("store the session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: base64.RawURLEncoding.EncodeToString(raw), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secureCookies(), MaxAge: int(SessionTTL.Seconds())})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies(), MaxAge: -1})
}

// sessionOf returns the request's session if its row still exists and has
// not expired: a deleted row (sign-out, a lock, a role change) ends it
// for every copy of the cookie.
func (s *Server) sessionOf(r *http.Request) (session, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(raw) != 32 {
		return session{}, false
	}
	sum := sha256.Sum256(raw)
	var sess session
	var role string
	err = s.Pool.QueryRow(r.Context(), `SELECT user_id, name, role, resources, issuer, subject, acr, amr, auth_time FROM approver_sessions
		WHERE id_hash = $1 AND expires_at > now()`, sum[:]).Scan(&sess.User.UserID, &sess.User.Name, &role, &sess.User.Resources,
		&sess.Evidence.Issuer, &sess.Evidence.Subject, &sess.Evidence.ACR, &sess.Evidence.AMR, &sess.AuthTime)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.Logger.Warn("read session", zap.Error(err))
		}
		return session{}, false
	}
	sess.idHash, sess.User.Role = sum[:], policy.Role(role)
	sess.AuthTime = sess.AuthTime.UTC()
	sess.Evidence.AuthTime = sess.AuthTime.Format(time.RFC3339)
	return sess, true
}

// satisfies reports whether the session's sign-in meets a card's
// requirement now, with a margin so the decision still meets it when it
// reaches the workflow.
func (s *Server) satisfies(sess session, req *policy.Requirement) bool {
	if req == nil {
		return true
	}
	return policy.Satisfies(sess.Evidence.ACR, req.ACR) && s.now().Sub(sess.AuthTime) <= freshFor(req)
}

// freshFor is how old a sign-in may be for the card UI to sign a decision
// on a card: the requirement's maximum age less a margin, so the decision
// still meets it when it reaches the workflow. A step-up asks the provider
// for this max_age, so a provider session it reuses is fresh enough.
func freshFor(req *policy.Requirement) time.Duration {
	return req.MaxAge() - min(30*time.Second, req.MaxAge()/4)
}

// csrf is the form token of a session.
func (s *Server) csrf(sess session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", hex.EncodeToString(sess.idHash)))
}

func (s *Server) csrfOK(sess session, token string) bool {
	got, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && hmac.Equal(got, s.mac("csrf", hex.EncodeToString(sess.idHash)))
}
