package idp

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"go.uber.org/zap"
)

// SessionCookie is the provider's own sign-in cookie.
const SessionCookie = "toolgate_idp"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · toolgate demo identity provider</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:26rem;margin:3rem auto;padding:0 1rem;color:#1d2a2f}
h1{font-size:1.3rem}label{display:block;margin:.8rem 0 .2rem}input{font:inherit;padding:.4rem;width:100%;box-sizing:border-box}
button{font:inherit;margin-top:1rem;padding:.5rem 1.2rem}.error{color:#a4161a;font-weight:600}.note{color:#555;font-size:.9rem}</style></head>
<body><h1>{{.Title}}</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
{{if eq .Step "done"}}
<p>You are signed out of the toolgate demo identity provider.</p>
{{else if eq .Step "password"}}
<p class="note">toolgate demo identity provider. {{if .MFA}}This sign-in needs your password and a code from your authenticator app.{{end}}</p>
<form method="post" action="/login/password">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label for="username">User</label><input id="username" name="username" autocomplete="username" required value="{{.User}}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Continue</button></form>
{{else}}
<p class="note">Signed in as <b>{{.User}}</b> with a password. {{.Why}}</p>
<form method="post" action="/login/totp">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label for="code">Code from your authenticator app</label>
<input id="code" name="code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required autofocus>
<button type="submit">Verify</button></form>
{{end}}
</body></html>`))

type pageData struct {
	Title, Step, ID, User, Error, Why string
	MFA                               bool
}

func (p *Provider) loginHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /password", p.start)
	mux.HandleFunc("POST /password", p.password)
	mux.HandleFunc("POST /totp", p.code)
	// A form's redirects are held to form-action too: the password form
	// ends in a redirect to the client's callback, so its origin is listed.
	actions := []string{"'self'"}
	for _, c := range p.opts.Clients {
		for _, u := range c.RedirectURIs {
			if o, err := url.Parse(u); err == nil && !slices.Contains(actions, o.Scheme+"://"+o.Host) {
				actions = append(actions, o.Scheme+"://"+o.Host)
			}
		}
	}
	csp := "default-src 'none'; style-src 'unsafe-inline'; form-action " + strings.Join(actions, " ") + "; frame-ancestors 'none'"
	return op.NewIssuerInterceptor(p.op.IssuerFromRequest).Handler(noStore(csp, mux))
}

func noStore(csp string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func (p *Provider) render(w http.ResponseWriter, status int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := page.Execute(w, d); err != nil {
		p.opts.Logger.Error("render sign-in page", zap.Error(err))
	}
}

// request returns the pending authorization request a form names.
func (p *Provider) request(w http.ResponseWriter, r *http.Request) (*authRequest, bool) {
	id := r.FormValue("authRequestID")
	p.mu.Lock()
	a, ok := p.requests[id]
	p.mu.Unlock()
	if !ok || a.done {
		http.Error(w, "This sign-in has ended or does not exist. Go back to the application and start again.", http.StatusBadRequest)
		return nil, false
	}
	return a, true
}

// session returns the browser's provider session, if it is still good.
func (p *Provider) session(r *http.Request) *ssoSession {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sessions[c.Value]
	if !ok || p.accounts[s.user] == nil || p.accounts[s.user].locked {
		return nil
	}
	return s
}

// fresh reports whether an authentication at t is recent enough for the
// request's max_age (prompt=login makes it 0).
func (p *Provider) fresh(a *authRequest, t time.Time) bool {
	if slices.Contains(a.req.Prompt, oidc.PromptLogin) {
		return false
	}
	return a.req.MaxAge == nil || p.opts.Now().Sub(t) <= time.Duration(*a.req.MaxAge)*time.Second
}

// start shows the first step a request needs: none when the provider's
// session already satisfies max_age and acr_values, the code alone when a
// fresh password session must step up to mfa, else the password.
func (p *Provider) start(w http.ResponseWriter, r *http.Request) {
	a, ok := p.request(w, r)
	if !ok {
		return
	}
	s := p.session(r)
	switch {
	case s != nil && p.fresh(a, s.authTime) && (!a.wantsMFA() || s.acr == ACRMFA):
		p.complete(w, r, a, s.user, s.acr, s.amr, s.authTime)
	case s != nil && p.fresh(a, s.authTime) && a.wantsMFA():
		p.mu.Lock()
		a.pwdUser = s.user
		p.mu.Unlock()
		p.render(w, http.StatusOK, pageData{Title: "Confirm it is you", Step: "totp", ID: a.id, User: s.user,
			Why: "This action needs a second factor."})
	default:
		p.render(w, http.StatusOK, pageData{Title: "Sign in", Step: "password", ID: a.id, MFA: a.wantsMFA(), User: a.req.LoginHint})
	}
}

func (p *Provider) password(w http.ResponseWriter, r *http.Request) {
	a, ok := p.request(w, r)
	if !ok {
		return
	}
	user := clip(strings.TrimSpace(r.PostFormValue("username")))
	ip, now := addressOf(r), p.opts.Now()
	p.mu.Lock()
	acc := p.accounts[user]
	var held bool
	if acc != nil {
		held = acc.passwords.held(ip, now)
	} else {
		held = p.throttle.blocked(user, ip, now)
	}
	good := !held && acc != nil && acc.passwordOK(r.PostFormValue("password"))
	if !held && !good && acc != nil {
		acc.passwords.failed(ip, now)
	} else if !held && !good {
		p.throttle.failed(user, ip, now)
	}
	locked := acc != nil && acc.locked
	if good && !locked && a.wantsMFA() {
		a.pwdUser = user
	}
	p.mu.Unlock()
	if held {
		p.opts.Logger.Warn("sign-in throttled", zap.String("user", user))
		p.render(w, http.StatusTooManyRequests, pageData{Title: "Sign in", Step: "password", ID: a.id, MFA: a.wantsMFA(), User: user,
			Error: "Too many wrong passwords for this user. Wait 15 minutes, then try again."})
		return
	}
	switch {
	case !good:
		p.opts.Logger.Info("sign-in refused: wrong user or password", zap.String("user", clip(user)))
		p.render(w, http.StatusUnauthorized, pageData{Title: "Sign in", Step: "password", ID: a.id, MFA: a.wantsMFA(), User: user,
			Error: "That user and password do not match."})
	case locked:
		p.refuse(w, r, a, user)
	case a.wantsMFA():
		p.render(w, http.StatusOK, pageData{Title: "Confirm it is you", Step: "totp", ID: a.id, User: user, Why: "This sign-in needs a second factor."})
	default:
		p.complete(w, r, a, user, ACRPassword, []string{"pwd"}, p.opts.Now())
	}
}

// code checks the second factor. A locked account is refused before its
// code is looked at, so a right code after the lock passes nothing.
func (p *Provider) code(w http.ResponseWriter, r *http.Request) {
	a, ok := p.request(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	user := a.pwdUser
	acc := p.accounts[user]
	if acc == nil {
		p.mu.Unlock()
		http.Error(w, "Sign in with your password first.", http.StatusBadRequest)
		return
	}
	if acc.locked {
		p.mu.Unlock()
		p.refuse(w, r, a, user)
		return
	}
	good := acc.checkCode(strings.TrimSpace(r.PostFormValue("code")), p.opts.Now())
	if good {
		acc.failures = 0
	} else {
		acc.failures++
		acc.locked = acc.failures >= MaxFactorFailures
	}
	failures, locked := acc.failures, acc.locked
	p.mu.Unlock()
	switch {
	case good:
		p.complete(w, r, a, user, ACRMFA, []string{"pwd", "otp"}, p.opts.Now())
	case locked:
		p.lock(r.Context(), acc)
		p.refuse(w, r, a, user)
	default:
		p.opts.Logger.Info("second factor refused", zap.String("user", user), zap.Int("failures", failures))
		p.render(w, http.StatusUnauthorized, pageData{Title: "Confirm it is you", Step: "totp", ID: a.id, User: user,
			Error: fmt.Sprintf("That code is not right. %d more wrong codes lock the account.", MaxFactorFailures-failures)})
	}
}

// refuse ends a request for a locked account: the client hears
// access_denied, and the person is told to ask for an unlock.
func (p *Provider) refuse(w http.ResponseWriter, r *http.Request, a *authRequest, user string) {
	p.opts.Logger.Warn("sign-in refused: account locked", zap.String("user", user))
	p.mu.Lock()
	delete(p.requests, a.id)
	p.mu.Unlock()
	op.AuthRequestError(w, r, a, oidc.ErrAccessDenied().WithDescription(
		"account locked after %d wrong codes: ask an administrator to unlock it", MaxFactorFailures), p.op)
}

// complete finishes a request as user and hands it back to op, which
// sends the code to the client.
func (p *Provider) complete(w http.ResponseWriter, r *http.Request, a *authRequest, user, acr string, amr []string, at time.Time) {
	sid := rand.Text()
	p.mu.Lock()
	a.user, a.acr, a.amr, a.authTime, a.done, a.pwdUser = user, acr, amr, at, true, ""
	p.sessions[sid] = &ssoSession{user: user, acr: acr, amr: amr, authTime: at}
	p.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(p.opts.Issuer, "https://"), MaxAge: int((8 * time.Hour).Seconds())})
	p.opts.Logger.Info("signed in", zap.String("user", user), zap.String("acr", acr), zap.String("client", a.req.ClientID))
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), a.id), http.StatusFound)
}

func constantEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
