package approvals

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// SessionCookie names the signed session cookie.
const SessionCookie = "toolgate_session"

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 8 * time.Hour

// session is what the cookie carries, signed: who signed in, and a nonce
// that makes each sign-in's cookie and CSRF token unique.
type session struct {
	User    User   `json:"u"`
	Nonce   string `json:"n"`
	Expires int64  `json:"e"`
}

func (s *Server) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.SessionKey)
	m.Write([]byte(strings.Join(parts, "|")))
	return m.Sum(nil)
}

func (s *Server) setSession(w http.ResponseWriter, u User) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	body, _ := json.Marshal(session{User: u, Nonce: hex.EncodeToString(nonce), Expires: s.now().Add(SessionTTL).Unix()})
	b64 := base64.RawURLEncoding.EncodeToString(body)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: b64 + "." + base64.RawURLEncoding.EncodeToString(s.mac("session", b64)),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.SecureCookies, MaxAge: int(SessionTTL.Seconds())})
}

func (s *Server) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// sessionOf returns the request's valid session, if any.
func (s *Server) sessionOf(r *http.Request) (session, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, false
	}
	b64, sig, ok := strings.Cut(c.Value, ".")
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, s.mac("session", b64)) {
		return session{}, false
	}
	body, err := base64.RawURLEncoding.DecodeString(b64)
	var sess session
	if err != nil || json.Unmarshal(body, &sess) != nil || s.now().Unix() >= sess.Expires || sess.User.UserID == "" {
		return session{}, false
	}
	return sess, true
}

// csrf is the form token of a session.
func (s *Server) csrf(sess session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", sess.Nonce, sess.User.UserID))
}

func (s *Server) csrfOK(sess session, token string) bool {
	got, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && hmac.Equal(got, s.mac("csrf", sess.Nonce, sess.User.UserID))
}
