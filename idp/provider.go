// Package idp is the demo identity provider: a real OpenID provider built
// on zitadel/oidc's op package, holding the seed users, with a password
// step, a TOTP second factor (pquerna/otp), acr, amr and auth_time in its
// ID tokens, max_age and acr_values honoured (RFC 9470's step-up), and a
// lockout after MaxFactorFailures wrong codes that ends the person's
// sessions at every client by back-channel logout. It runs in dev mode
// and in tests; a deployment uses its own provider.
package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"go.uber.org/zap"
	"golang.org/x/text/language"
)

// Claims the provider adds to ID tokens and userinfo, beside the standard
// ones (sub, name, preferred_username, acr, amr, auth_time).
const (
	ClaimRole   = "toolgate_role"
	ClaimStores = "toolgate_stores"
)

// Client is a relying party registered with the provider.
type Client struct {
	ID     string
	Secret string
	// RedirectURIs are the exact callback URLs the client may use.
	RedirectURIs []string
	// BackChannelLogoutURI receives a logout token when a person's sessions
	// end at the provider (a lock, a role change).
	BackChannelLogoutURI string
	// Public marks a client that holds no secret (an MCP client, a CLI):
	// PKCE instead, and loopback redirect URIs on any port (RFC 8252).
	Public bool
	// Audience, when set, makes the client's access tokens JWTs for that
	// resource (RFC 9068: verifiable with the provider's JWKS), carrying the
	// person's role, stores and sign-in (acr, amr, auth_time).
	Audience string
	// Exchange are the audiences (upstreams) this confidential client may
	// ask access tokens for by token exchange (RFC 8693), acting for a
	// person whose access token it was given: a grant first, then a JWT
	// for one audience at a time. A client without them exchanges nothing.
	Exchange []string
	// GrantFrom are the resources (access token audiences) whose tokens
	// this client may turn into grants: the MCP server's, for toolgate.
	GrantFrom []string
}

// Options configure a Provider.
type Options struct {
	// Issuer is the provider's URL, exactly as clients name it.
	Issuer  string
	Users   []User
	Clients []Client
	Logger  *zap.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// LogoutRetryFor is how long a back-channel logout that did not land
	// is tried again (DefaultLogoutRetryFor when zero); LogoutRetryWait is
	// the first wait between tries (a second when zero), doubling to a
	// minute.
	LogoutRetryFor, LogoutRetryWait time.Duration
}

// DefaultLogoutRetryFor is how long a back-channel logout is tried again:
// as long as the longest session it ends lives (the card UI's, 8 hours).
const DefaultLogoutRetryFor = 8 * time.Hour

// Provider is the running demo provider.
type Provider struct {
	opts    Options
	op      *op.Provider
	key     *rsa.PrivateKey
	keyID   string
	handler http.Handler
	http    *http.Client
	// stop ends the back-channel logouts still being tried (Close).
	stop     chan struct{}
	stopOnce sync.Once

	throttle throttle

	mu       sync.Mutex
	accounts map[string]*account
	requests map[string]*authRequest
	codes    map[string]string
	tokens   map[string]*token
	sessions map[string]*ssoSession
	grants   map[string]*grant
}

type token struct {
	subject, clientID string
	audience, scopes  []string
	expires           time.Time
}

// ssoSession is a person's sign-in at the provider (its own cookie), so a
// second client sign-in within max_age needs no password again.
type ssoSession struct {
	user     string
	acr      string
	amr      []string
	authTime time.Time
}

// New builds the provider. It generates a fresh signing key: tokens do not
// outlive the process, which is what a demo wants.
func New(o Options) (*Provider, error) {
	if o.Issuer == "" {
		return nil, errors.New("idp: the issuer URL is required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("idp: signing key: %w", err)
	}
	if o.LogoutRetryFor <= 0 {
		o.LogoutRetryFor = DefaultLogoutRetryFor
	}
	if o.LogoutRetryWait <= 0 {
		o.LogoutRetryWait = time.Second
	}
	// A logout token goes to the registered URI and nowhere else.
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := &Provider{opts: o, key: key, keyID: rand.Text()[:8], http: &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirects}, stop: make(chan struct{}),
		accounts: map[string]*account{}, requests: map[string]*authRequest{}, codes: map[string]string{},
		tokens: map[string]*token{}, sessions: map[string]*ssoSession{}, grants: map[string]*grant{}}
	for _, u := range o.Users {
		p.accounts[u.ID] = &account{User: u}
	}
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	p.op, err = op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey,
		CodeMethodS256: true,
		// Sign-out without a registered return address lands here.
		DefaultLogoutRedirectURI: "/signed-out",
		AuthMethodPost:           true,
		SupportedUILocales:       []language.Tag{language.English},
		SupportedClaims:          append(op.DefaultSupportedClaims, ClaimRole, ClaimStores),
	}, &storage{p}, op.StaticIssuer(o.Issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/login/", http.StripPrefix("/login", p.loginHandler()))
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, r *http.Request) {
		p.render(w, http.StatusOK, pageData{Title: "Signed out", Step: "done"})
	})
	// Discovery says what this provider honours: the code flow alone (no
	// implicit grant, RFC 9700; the library's document lists every flow it
	// knows) and the acr values its sign-in pages give.
	mux.HandleFunc("GET /.well-known/openid-configuration", op.NewIssuerInterceptor(p.op.IssuerFromRequest).HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := op.CreateDiscoveryConfig(r.Context(), p.op, &storage{p})
		d.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
		d.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeTokenExchange}
		d.ACRValuesSupported = []string{ACRPassword, ACRMFA}
		op.Discover(w, d)
	}))
	mux.Handle("/", p.op)
	p.handler = mux
	return p, nil
}

// Handler serves discovery, JWKS, the OAuth endpoints and the sign-in pages.
func (p *Provider) Handler() http.Handler { return p.handler }

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.opts.Issuer }

// Locked reports whether a user's account is locked.
func (p *Provider) Locked(user string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.accounts[user]
	return ok && a.locked
}

// Unlock clears a lock and the failure count (an operator's act).
func (p *Provider) Unlock(user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.accounts[user]; ok {
		a.locked, a.failures = false, 0
	}
}

// SetRole changes a user's role and stores, and ends their sessions
// everywhere: authority granted under the old role must not outlive it.
func (p *Provider) SetRole(ctx context.Context, user, role string, stores []int64) error {
	p.mu.Lock()
	a, ok := p.accounts[user]
	if ok {
		a.Role, a.Stores = role, slices.Clone(stores)
	}
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("idp: no user %q", user)
	}
	return p.endSessions(ctx, user, "role_changed")
}

// lock locks an account and ends its sessions everywhere.
func (p *Provider) lock(ctx context.Context, a *account) {
	p.opts.Logger.Warn("account locked after failed second factors", zap.String("user", a.ID), zap.Int("failures", a.failures))
	if err := p.endSessions(ctx, a.ID, "locked"); err != nil {
		p.opts.Logger.Error("back-channel logout failed", zap.String("user", a.ID), zap.Error(err))
	}
}

// endSessions forgets the user's provider sessions and tokens and sends a
// back-channel logout token to every client that takes one.
func (p *Provider) endSessions(ctx context.Context, user, reason string) error {
	p.mu.Lock()
	for id, s := range p.sessions {
		if s.user == user {
			delete(p.sessions, id)
		}
	}
	for id, t := range p.tokens {
		if t.subject == user {
			delete(p.tokens, id)
		}
	}
	for id, g := range p.grants {
		if g.subject == user {
			delete(p.grants, id)
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, c := range p.opts.Clients {
		if c.BackChannelLogoutURI != "" {
			if err := p.backChannelLogout(ctx, c, user, reason); err != nil {
				errs = append(errs, err)
				var refused *logoutRefused
				if !errors.As(err, &refused) {
					go p.retryLogout(context.WithoutCancel(ctx), c, user, reason)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Close stops trying the back-channel logouts that have not landed.
func (p *Provider) Close() { p.stopOnce.Do(func() { close(p.stop) }) }

// logoutRefused is a back-channel logout the client answered and refused
// (a 3xx or 4xx): trying again would be refused again.
type logoutRefused struct{ status string }

func (e *logoutRefused) Error() string { return "refused: " + e.status }

// retryLogout tries a back-channel logout that did not land again, with a
// fresh logout token each time, until the client takes or refuses it, the
// sessions it ends would have expired (LogoutRetryFor), or Close.
func (p *Provider) retryLogout(ctx context.Context, c Client, user, reason string) {
	deadline := time.Now().Add(p.opts.LogoutRetryFor)
	for wait := p.opts.LogoutRetryWait; ; wait = min(2*wait, time.Minute) {
		select {
		case <-p.stop:
			return
		case <-time.After(wait):
		}
		err := p.backChannelLogout(ctx, c, user, reason)
		var refused *logoutRefused
		switch {
		case err == nil:
			return
		case errors.As(err, &refused):
			p.opts.Logger.Error("back-channel logout refused; not tried again", zap.String("client", c.ID), zap.String("user", user), zap.Error(err))
			return
		case time.Now().After(deadline):
			p.opts.Logger.Error("back-channel logout never landed; its sessions have expired since", zap.String("client", c.ID), zap.String("user", user), zap.Error(err))
			return
		}
		p.opts.Logger.Warn("back-channel logout did not land; trying again", zap.String("client", c.ID), zap.String("user", user), zap.Duration("in", min(2*wait, time.Minute)), zap.Error(err))
	}
}

// BackChannelLogoutEvent is the events member of a logout token (OpenID
// Connect Back-Channel Logout 1.0).
const BackChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// ClaimLogoutReason says why the provider ended the sessions (locked,
// role_changed); a client may record it.
const ClaimLogoutReason = "toolgate_reason"

// SignJWT signs claims with the provider's key, as a JWT of type typ.
func (p *Provider) SignJWT(claims map[string]any, typ string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: p.keyID}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		return "", err
	}
	b, err := jsonMarshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// LogoutClaims are the claims of a logout token for one client's sessions of user.
func (p *Provider) LogoutClaims(clientID, user, reason string) map[string]any {
	now := p.opts.Now()
	return map[string]any{"iss": p.opts.Issuer, "aud": clientID, "sub": user, "iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(),
		"jti": rand.Text(), "events": map[string]any{BackChannelLogoutEvent: map[string]any{}}, ClaimLogoutReason: reason}
}

func (p *Provider) backChannelLogout(ctx context.Context, c Client, user, reason string) error {
	tok, err := p.SignJWT(p.LogoutClaims(c.ID, user, reason), "logout+jwt")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BackChannelLogoutURI, strings.NewReader("logout_token="+tok))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("back-channel logout to %s: %w", c.ID, err)
	}
	_ = res.Body.Close()
	if res.StatusCode >= 300 && res.StatusCode < 500 {
		return fmt.Errorf("back-channel logout to %s: %w", c.ID, &logoutRefused{status: res.Status})
	}
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("back-channel logout to %s: %s", c.ID, res.Status)
	}
	p.opts.Logger.Info("back-channel logout sent", zap.String("client", c.ID), zap.String("user", user), zap.String("reason", reason))
	return nil
}

// authRequest is one authorization request and how far its sign-in got.
type authRequest struct {
	id       string
	created  time.Time
	req      oidc.AuthRequest
	user     string
	pwdUser  string // passed the password step, awaiting the code
	coded    bool   // given its authorization code (one per request)
	done     bool
	acr      string
	amr      []string
	authTime time.Time
	// audience is the resource the client's access tokens are for.
	audience string
}

func (a *authRequest) GetID() string    { return a.id }
func (a *authRequest) GetACR() string   { return a.acr }
func (a *authRequest) GetAMR() []string { return a.amr }
func (a *authRequest) GetAudience() []string {
	if a.audience != "" {
		return []string{a.req.ClientID, a.audience}
	}
	return []string{a.req.ClientID}
}
func (a *authRequest) GetAuthTime() time.Time {
	return a.authTime
}
func (a *authRequest) GetClientID() string { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.user }
func (a *authRequest) Done() bool                         { return a.done }

// wantsMFA says whether the request asks for a second factor (acr_values).
func (a *authRequest) wantsMFA() bool { return slices.Contains(a.req.ACRValues, ACRMFA) }

// ACR values the provider issues.
const (
	ACRPassword = "pwd"
	ACRMFA      = "mfa"
)
