package idp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/pquerna/otp/totp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/policy"
	"golang.org/x/oauth2"
)

const (
	redirect    = "http://127.0.0.1:1/callback"
	mcpAudience = "http://127.0.0.1:8090/mcp"
	// toolgate's token exchange client and the upstream it may act at.
	exchangeSecret = "x-s3cret-x-s3cret-x-s3cret-x-s3cret"
	deskAudience   = "https://desk.test"
)

type fixture struct {
	p      *idp.Provider
	srv    *httptest.Server
	users  map[string]idp.User
	cfg    oauth2.Config
	ver    *oidc.IDTokenVerifier
	mu     sync.Mutex
	logout []string // logout tokens received
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{users: map[string]idp.User{}}
	users, err := idp.DemoUsers()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		f.users[u.ID] = u
	}
	bcl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.logout = append(f.logout, r.PostFormValue("logout_token"))
		f.mu.Unlock()
	}))
	t.Cleanup(bcl.Close)
	f.srv = httptest.NewUnstartedServer(nil)
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	f.p, err = idp.New(idp.Options{Issuer: f.srv.URL, Users: users,
		Clients: []idp.Client{{ID: "cards", Secret: "s3cret-s3cret-s3cret-s3cret-s3cret", RedirectURIs: []string{redirect}, BackChannelLogoutURI: bcl.URL},
			{ID: "mcp", Public: true, RedirectURIs: idp.MCPRedirectURIs, Audience: mcpAudience},
			{ID: "toolgate", Secret: exchangeSecret, Exchange: []string{deskAudience, "https://other.test"}, GrantFrom: []string{mcpAudience}},
			{ID: "other-gate", Secret: exchangeSecret, Exchange: []string{deskAudience}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.p.Close)
	f.srv.Config.Handler = f.p.Handler()
	prov, err := oidc.NewProvider(context.Background(), f.srv.URL)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	f.cfg = oauth2.Config{ClientID: "cards", ClientSecret: "s3cret-s3cret-s3cret-s3cret-s3cret", RedirectURL: redirect, Endpoint: prov.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}
	f.ver = prov.Verifier(&oidc.Config{ClientID: "cards"})
	return f
}

// browser is one person's cookie jar at the provider.
type browser struct {
	f *fixture
	c *http.Client
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, c: &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

// flow is one authorization request as far as the sign-in pages.
type flow struct {
	b                   *browser
	id, verifier, nonce string
	state               string
	page                string
	final               *url.URL
}

func (b *browser) authorize(t *testing.T, opts ...oauth2.AuthCodeOption) *flow {
	t.Helper()
	fl := &flow{b: b, verifier: oauth2.GenerateVerifier(), nonce: "n-" + time.Now().Format("150405.000000"), state: "st"}
	u := b.f.cfg.AuthCodeURL(fl.state, append(opts, oauth2.S256ChallengeOption(fl.verifier), oidc.Nonce(fl.nonce))...)
	fl.do(t, http.MethodGet, u, nil)
	return fl
}

func (fl *flow) do(t *testing.T, method, u string, form url.Values) {
	t.Helper()
	var res *http.Response
	var err error
	if method == http.MethodGet {
		res, err = fl.b.c.Get(u)
	} else {
		res, err = fl.b.c.PostForm(u, form)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := new(strings.Builder)
	_, _ = io.Copy(buf, res.Body)
	fl.page = buf.String()
	if loc := res.Header.Get("Location"); strings.HasPrefix(loc, redirect) {
		fl.final, _ = url.Parse(loc)
		return
	}
	if i := strings.Index(fl.page, `name="authRequestID" value="`); i >= 0 {
		rest := fl.page[i+len(`name="authRequestID" value="`):]
		fl.id = rest[:strings.Index(rest, `"`)]
	}
}

func (fl *flow) password(t *testing.T, user, pw string) {
	fl.do(t, http.MethodPost, fl.b.f.srv.URL+"/login/password", url.Values{"authRequestID": {fl.id}, "username": {user}, "password": {pw}})
}

func (fl *flow) code(t *testing.T, code string) {
	fl.do(t, http.MethodPost, fl.b.f.srv.URL+"/login/totp", url.Values{"authRequestID": {fl.id}, "code": {code}})
}

// claims are the ID token claims the card UI reads.
type claims struct {
	Sub      string   `json:"sub"`
	ACR      string   `json:"acr"`
	AMR      []string `json:"amr"`
	AuthTime int64    `json:"auth_time"`
	Role     string   `json:"toolgate_role"`
	Stores   []int64  `json:"toolgate_stores"`
	Name     string   `json:"name"`
}

// token exchanges the code and verifies the ID token.
func (fl *flow) token(t *testing.T) claims {
	t.Helper()
	if fl.final == nil {
		t.Fatalf("the flow did not return to the client; page:\n%s", fl.page)
	}
	if e := fl.final.Query().Get("error"); e != "" {
		t.Fatalf("the provider answered %s: %s", e, fl.final.Query().Get("error_description"))
	}
	tok, err := fl.b.f.cfg.Exchange(context.Background(), fl.final.Query().Get("code"), oauth2.VerifierOption(fl.verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	id, err := fl.b.f.ver.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if id.Nonce != fl.nonce {
		t.Fatalf("nonce %q, want %q", id.Nonce, fl.nonce)
	}
	var c claims
	if err := id.Claims(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func code(t *testing.T, secret string, at time.Time) string {
	c, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestACRValuesMatchThePolicy(t *testing.T) {
	if idp.ACRPassword != policy.ACRPassword || idp.ACRMFA != policy.ACRMFA {
		t.Fatal("the provider's acr values are not the ones the policy understands")
	}
}

func TestPasswordSignInIsPwd(t *testing.T) {
	f := newFixture(t)
	ama := f.users["ama"]
	fl := f.browser().authorize(t)
	fl.password(t, "ama", "wrong")
	if fl.final != nil || !strings.Contains(fl.page, "do not match") {
		t.Fatalf("a wrong password passed: %s", fl.page)
	}
	fl.password(t, "ama", ama.Password)
	c := fl.token(t)
	if c.Sub != "ama" || c.ACR != "pwd" || len(c.AMR) != 1 || c.AMR[0] != "pwd" || c.Role != "store_manager" || len(c.Stores) != 1 || c.Stores[0] != 112 {
		t.Fatalf("claims %+v", c)
	}
	if d := time.Since(time.Unix(c.AuthTime, 0)); d < 0 || d > time.Minute {
		t.Fatalf("auth_time %d is not now", c.AuthTime)
	}
}

func TestStepUpAsksForTheCode(t *testing.T) {
	f := newFixture(t)
	kofi := f.users["kofi"]
	b := f.browser()
	fl := b.authorize(t)
	fl.password(t, "kofi", kofi.Password)
	if c := fl.token(t); c.ACR != "pwd" {
		t.Fatalf("first sign-in acr %q", c.ACR)
	}
	// Within max_age with a fresh password session: the code alone.
	fl = b.authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"), oauth2.SetAuthURLParam("max_age", "300"))
	if fl.final != nil || !strings.Contains(fl.page, `name="code"`) || strings.Contains(fl.page, `name="password"`) {
		t.Fatalf("a step-up did not ask for the code alone: %s", fl.page)
	}
	fl.code(t, "000000")
	if fl.final != nil {
		t.Fatal("a wrong code passed")
	}
	fl.code(t, code(t, kofi.TOTPSecret, time.Now()))
	c := fl.token(t)
	if c.ACR != "mfa" || strings.Join(c.AMR, ",") != "pwd,otp" {
		t.Fatalf("after the code: %+v", c)
	}
	// The same code is good once.
	fl = b.authorize(t, oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("acr_values", "mfa"))
	fl.password(t, "kofi", kofi.Password)
	fl.code(t, code(t, kofi.TOTPSecret, time.Now()))
	if fl.final != nil {
		t.Fatal("a used code passed again")
	}
	// The provider's mfa session satisfies a later request within max_age, with no page.
	fl = b.authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"), oauth2.SetAuthURLParam("max_age", "300"))
	if c := fl.token(t); c.ACR != "mfa" {
		t.Fatalf("single sign-on: %+v", c)
	}
	// max_age=0 forces the password again.
	fl = b.authorize(t, oauth2.SetAuthURLParam("max_age", "0"))
	if fl.final != nil || !strings.Contains(fl.page, `name="password"`) {
		t.Fatalf("max_age=0 did not ask for the password: %s", fl.page)
	}
}

// TestLockoutEndsAuthority: five wrong codes lock the account; then the
// right code passes nothing, no new sign-in or step-up succeeds, and every
// client hears a back-channel logout.
func TestLockoutEndsAuthority(t *testing.T) {
	f := newFixture(t)
	kofi := f.users["kofi"]
	b := f.browser()
	fl := b.authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"))
	fl.password(t, "kofi", kofi.Password)
	for i := 0; i < idp.MaxFactorFailures-1; i++ {
		fl.code(t, "000000")
		if fl.final != nil {
			t.Fatalf("wrong code %d ended the flow", i+1)
		}
	}
	fl.code(t, "000001")
	if fl.final == nil || fl.final.Query().Get("error") != "access_denied" {
		t.Fatalf("the fifth wrong code did not lock: %v %s", fl.final, fl.page)
	}
	if !f.p.Locked("kofi") {
		t.Fatal("kofi is not locked")
	}
	f.mu.Lock()
	n := len(f.logout)
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d back-channel logouts, want 1", n)
	}
	// The right password and the right code, after the lock: refused.
	fl = f.browser().authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"))
	fl.password(t, "kofi", kofi.Password)
	if fl.final == nil || fl.final.Query().Get("error") != "access_denied" {
		t.Fatalf("a locked account reached the code step: %s", fl.page)
	}
	fl = f.browser().authorize(t)
	fl.password(t, "kofi", kofi.Password)
	if fl.final == nil || fl.final.Query().Get("error") != "access_denied" {
		t.Fatalf("a locked account signed in with a password: %s", fl.page)
	}
	// A flow that reached the code step before the lock cannot finish it either.
	f.p.Unlock("kofi")
	pending := f.browser().authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"))
	pending.password(t, "kofi", kofi.Password)
	other := f.browser().authorize(t, oauth2.SetAuthURLParam("acr_values", "mfa"))
	other.password(t, "kofi", kofi.Password)
	for i := 0; i < idp.MaxFactorFailures; i++ {
		other.code(t, "000000")
	}
	pending.code(t, code(t, kofi.TOTPSecret, time.Now().Add(30*time.Second)))
	if pending.final == nil || pending.final.Query().Get("error") != "access_denied" {
		t.Fatalf("the right code after the lock passed: %v %s", pending.final, pending.page)
	}
}

// TestFailedSignInsAreThrottled: after five wrong passwords for one user
// from one address, that user's sign-ins are refused for a while, even with
// the right password; another user is not affected.
func TestFailedSignInsAreThrottled(t *testing.T) {
	f := newFixture(t)
	fl := f.browser().authorize(t)
	for i := range 5 {
		fl.password(t, "ama", "guess")
		if !strings.Contains(fl.page, "do not match") {
			t.Fatalf("wrong password %d: %s", i+1, fl.page)
		}
	}
	fl.password(t, "ama", f.users["ama"].Password)
	if fl.final != nil || !strings.Contains(fl.page, "Too many wrong passwords") {
		t.Fatalf("the right password after five failures passed: %s", fl.page)
	}
	other := f.browser().authorize(t)
	other.password(t, "kofi", f.users["kofi"].Password)
	if c := other.token(t); c.Sub != "kofi" {
		t.Fatalf("another user: %+v", c)
	}
}

// TestFailedSignInsCannotBeCrowdedOut: 12,000 wrong passwords for made-up
// names (more than the table of names with no account holds) do not switch the
// throttle off: a full table refuses the next made-up name rather than
// forget one, five wrong passwords for ama still hold her right one, and
// kofi, who failed nothing, still signs in.
func TestFailedSignInsCannotBeCrowdedOut(t *testing.T) {
	f := newFixture(t)
	flood := f.browser().authorize(t)
	refused := 0
	for i := range 12_000 {
		flood.password(t, fmt.Sprintf("nobody-%d", i), "guess")
		if strings.Contains(flood.page, "Too many") {
			refused++
		}
	}
	flood.password(t, "nobody-new", "guess")
	if !strings.Contains(flood.page, "Too many") {
		t.Fatalf("a made-up name after the flood was not refused: %d of 12,000 refused", refused)
	}
	fl := f.browser().authorize(t)
	for i := range idp.MaxFailedSignIns {
		fl.password(t, "ama", "guess")
		if !strings.Contains(fl.page, "do not match") {
			t.Fatalf("wrong password %d after the flood: %s", i+1, fl.page)
		}
	}
	fl.password(t, "ama", f.users["ama"].Password)
	if fl.final != nil || !strings.Contains(fl.page, "Too many wrong passwords") {
		t.Fatalf("after the flood, ama's right password after five wrong ones signed in")
	}
	other := f.browser().authorize(t)
	other.password(t, "kofi", f.users["kofi"].Password)
	if c := other.token(t); c.Sub != "kofi" {
		t.Fatalf("kofi after the flood: %+v", c)
	}
}

// TestAnAuthorizationCodeIsUsedOnce (RFC 6749 §4.1.2): 64 exchanges of one
// code at once, five times over, give exactly one token set each time; a
// later exchange of the same code is refused. A code spent by an exchange
// that failed after finding it (a wrong PKCE verifier) is spent too: the
// right verifier afterwards gets nothing, which holds however the
// concurrent exchanges happen to be scheduled.
func TestAnAuthorizationCodeIsUsedOnce(t *testing.T) {
	f := newFixture(t)
	fl := f.browser().authorize(t)
	fl.password(t, "ama", f.users["ama"].Password)
	if fl.final == nil {
		t.Fatalf("no code: %s", fl.page)
	}
	code := fl.final.Query().Get("code")
	if _, err := f.cfg.Exchange(context.Background(), code, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("a code was exchanged with a verifier that is not its own")
	}
	if _, err := f.cfg.Exchange(context.Background(), code, oauth2.VerifierOption(fl.verifier)); err == nil {
		t.Fatal("a code tried once with a wrong verifier was exchanged again with the right one")
	}
	for round := range 5 {
		fl := f.browser().authorize(t)
		fl.password(t, "ama", f.users["ama"].Password)
		if fl.final == nil {
			t.Fatalf("round %d: no code: %s", round, fl.page)
		}
		code := fl.final.Query().Get("code")
		if n := exchangeAtOnce(f, fl.verifier, []string{code}, 64); n != 1 {
			t.Fatalf("round %d: 64 exchanges of one code gave %d token sets", round, n)
		}
		if _, err := f.cfg.Exchange(context.Background(), code, oauth2.VerifierOption(fl.verifier)); err == nil {
			t.Fatalf("round %d: the code exchanged again afterwards", round)
		}
	}
}

// TestACallbackGivesOneCode: the provider's callback for a finished sign-in,
// visited again (its URL is in the browser's history), mints no second
// code for the same request, and the one code, exchanged many times at
// once, gives one token set (five rounds). The second code is looked for
// before any exchange: whether two codes would win a race to the token
// endpoint depends on the machine's timing, whether a second is minted
// does not.
func TestACallbackGivesOneCode(t *testing.T) {
	f := newFixture(t)
	for round := range 5 {
		fl := f.browser().authorize(t)
		fl.password(t, "ama", f.users["ama"].Password)
		if fl.final == nil {
			t.Fatalf("no code: %s", fl.page)
		}
		code := fl.final.Query().Get("code")
		fl.final = nil
		fl.do(t, http.MethodGet, f.srv.URL+"/authorize/callback?id="+url.QueryEscape(fl.id), nil)
		if fl.final != nil && fl.final.Query().Get("code") != "" {
			t.Fatalf("round %d: the callback visited again gave a second code for one sign-in", round)
		}
		if n := exchangeAtOnce(f, fl.verifier, []string{code}, 8); n != 1 {
			t.Fatalf("round %d: one sign-in's code gave %d token sets", round, n)
		}
	}
}

// exchangeAtOnce exchanges each code each times, all at once, and counts
// the token sets the provider gave.
func exchangeAtOnce(f *fixture, verifier string, codes []string, each int) int32 {
	var wg sync.WaitGroup
	var won atomic.Int32
	start := make(chan struct{})
	for _, code := range codes {
		for range each {
			wg.Go(func() {
				<-start
				if _, err := f.cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier)); err == nil {
					won.Add(1)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return won.Load()
}

// TestDiscoveryAdvertisesWhatItHonours: the discovery document offers the
// code flow only (no implicit grant or id_token response, RFC 9700), and
// token exchange (RFC 8693) for the clients registered for it, and names
// the acr values its sign-in gives.
func TestDiscoveryAdvertisesWhatItHonours(t *testing.T) {
	f := newFixture(t)
	res, err := http.Get(f.srv.URL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var d struct {
		ResponseTypes []string `json:"response_types_supported"`
		GrantTypes    []string `json:"grant_types_supported"`
		ACRValues     []string `json:"acr_values_supported"`
		Issuer        string   `json:"issuer"`
	}
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.ResponseTypes, []string{"code"}) || !slices.Equal(d.GrantTypes, []string{"authorization_code", "urn:ietf:params:oauth:grant-type:token-exchange"}) ||
		!slices.Equal(d.ACRValues, []string{idp.ACRPassword, idp.ACRMFA}) || d.Issuer != f.srv.URL {
		t.Fatalf("discovery: %+v", d)
	}
}

// TestBackChannelLogoutIsTriedUntilItLands: a role change ends ama's
// sessions. The card UI answers 503 twice and then takes the logout; each
// try carries a fresh logout token, and none follows a redirect. A client
// that refuses (400) is not tried again.
func TestBackChannelLogoutIsTriedUntilItLands(t *testing.T) {
	users, err := idp.DemoUsers()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var tokens []string
	var refusals, elsewhere int
	landed := make(chan struct{})
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tokens = append(tokens, r.PostFormValue("logout_token"))
		if len(tokens) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if len(tokens) == 3 {
			close(landed)
		}
	}))
	t.Cleanup(flaky.Close)
	trap := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); elsewhere++; mu.Unlock() }))
	t.Cleanup(trap.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refusals++
		mu.Unlock()
		http.Redirect(w, r, trap.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(refusing.Close)
	p, err := idp.New(idp.Options{Issuer: "https://id.example", Users: users, LogoutRetryWait: 20 * time.Millisecond, Clients: []idp.Client{
		{ID: "cards", Secret: "s3cret-s3cret-s3cret-s3cret-s3cret", RedirectURIs: []string{redirect}, BackChannelLogoutURI: flaky.URL},
		{ID: "other", Secret: "s3cret-s3cret-s3cret-s3cret-s3cre2", RedirectURIs: []string{redirect}, BackChannelLogoutURI: refusing.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.SetRole(context.Background(), "ama", "area_manager", []int64{112}); err == nil {
		t.Fatal("the first try failed, and SetRole did not say so")
	}
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		t.Fatal("the back-channel logout was never tried until it landed")
	}
	time.Sleep(200 * time.Millisecond) // time enough for a wrong retry of the refusal
	mu.Lock()
	defer mu.Unlock()
	if len(tokens) != 3 || tokens[0] == tokens[1] || tokens[1] == tokens[2] || tokens[0] == "" {
		t.Fatalf("%d tries, want 3 each with its own token", len(tokens))
	}
	if refusals != 1 || elsewhere != 0 {
		t.Fatalf("the refusing client was tried %d times and its redirect followed %d times; want 1 and 0", refusals, elsewhere)
	}
}
