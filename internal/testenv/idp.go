package testenv

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/mcpgate"
	northgate "github.com/toolgate/toolgate/packs/northgate/upstream"
	plancover "github.com/toolgate/toolgate/packs/plancover/upstream"
	"github.com/toolgate/toolgate/policy"
	"go.uber.org/zap/zaptest"
)

// IdP is a demo identity provider on a loopback port, with one client: a
// card UI at the URL it was started for.
type IdP struct {
	*idp.Provider
	URL          string
	Users        map[string]idp.User
	ClientID     string
	ClientSecret string

	mu   sync.Mutex
	last map[string]int64
}

// The public MCP client every test provider registers, and the audience of
// its access tokens.
const (
	MCPClientID = "toolgate-mcp"
	MCPAudience = "https://mcp.toolgate.test/mcp"
)

// toolgate's token exchange client at every test provider, and the
// audiences it may ask tokens for: the card desk's (examples/carddesk) and
// PlanCover's (packs/plancover/upstream).
const (
	ExchangeClientID  = "toolgate"
	DeskAudience      = "https://carddesk.toolgate.test"
	PlanCoverAudience = "https://plancover.toolgate.test"
	NorthgateAudience = "https://northgate.toolgate.test"
	// NotesAudience is the tests' MCP server over HTTP that takes the
	// provider's tokens (Notes).
	NotesAudience = "https://notes.toolgate.test"
)

// exchangeSecret is the exchange client's secret, fresh per test process.
var exchangeSecret = rand.Text() + rand.Text()

// Exchange is toolgate's token exchange client at this provider.
func (f *IdP) Exchange() *exchange.Client {
	return &exchange.Client{Issuer: f.URL, ClientID: ExchangeClientID, ClientSecret: exchangeSecret}
}

// NewIdP starts the demo provider for a card UI at clientURL (its
// /auth/callback and /auth/backchannel-logout), with fresh seed users.
func NewIdP(t testing.TB, clientURL string) *IdP {
	t.Helper()
	return NewIdPWith(t, clientURL, nil)
}

// NewIdPWith is NewIdP with the provider's clock (time.Now when nil).
func NewIdPWith(t testing.TB, clientURL string, now func() time.Time) *IdP {
	t.Helper()
	return newIdP(t, clientURL, "", now)
}

// NewIdPForMCP is NewIdP with the MCP client's logout tokens sent to an
// MCP server at mcpURL (its /backchannel-logout).
func NewIdPForMCP(t testing.TB, clientURL, mcpURL string) *IdP {
	t.Helper()
	return newIdP(t, clientURL, mcpURL+"/backchannel-logout", nil)
}

func newIdP(t testing.TB, clientURL, mcpLogoutURI string, now func() time.Time) *IdP {
	t.Helper()
	users, err := idp.DemoUsers()
	if err != nil {
		t.Fatal(err)
	}
	h := &LateHandler{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := &IdP{URL: srv.URL, Users: map[string]idp.User{}, last: map[string]int64{}, ClientID: "toolgate-approvals", ClientSecret: rand.Text() + rand.Text()}
	for _, u := range users {
		f.Users[u.ID] = u
	}
	f.Provider, err = idp.New(idp.Options{Issuer: srv.URL, Users: users, Logger: zaptest.NewLogger(t), Now: now, Clients: []idp.Client{{
		ID: f.ClientID, Secret: f.ClientSecret, RedirectURIs: []string{clientURL + "/auth/callback"},
		BackChannelLogoutURI: clientURL + "/auth/backchannel-logout"},
		{ID: MCPClientID, Public: true, RedirectURIs: idp.MCPRedirectURIs, Audience: MCPAudience, BackChannelLogoutURI: mcpLogoutURI},
		{ID: ExchangeClientID, Secret: exchangeSecret, Exchange: []string{DeskAudience, PlanCoverAudience, NorthgateAudience, NotesAudience}, GrantFrom: []string{MCPAudience}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Provider.Close)
	h.Set(f.Handler())
	return f
}

// Code is user's TOTP code for a time step after the last one this
// fixture used (the provider takes each code once, within one step of its
// clock), waiting for the clock when it must.
func (f *IdP) Code(t testing.TB, user string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().Unix() / 30
	use := max(now, f.last[user]+1)
	if use > now+1 {
		time.Sleep(time.Until(time.Unix((use-1)*30, 0)) + 100*time.Millisecond)
	}
	f.last[user] = use
	c, err := totp.GenerateCode(f.Users[user].TOTPSecret, time.Unix(use*30, 0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// LateHandler serves a handler set after its server started (a server
// whose URL the handler needs).
type LateHandler struct{ h atomic.Pointer[http.Handler] }

// Set installs the handler.
func (l *LateHandler) Set(h http.Handler) { l.h.Store(&h) }

func (l *LateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := l.h.Load()
	if h == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// LogoutToken is a logout token signed by this provider, claiming issuer
// iss, for client aud and subject sub; withEvent false leaves out the
// back-channel logout event.
func (f *IdP) LogoutToken(t testing.TB, iss, aud, sub string, withEvent bool) string {
	t.Helper()
	claims := f.LogoutClaims(aud, sub, "test")
	claims["iss"] = iss
	if !withEvent {
		delete(claims, "events")
	}
	tok, err := f.SignJWT(claims, "logout+jwt")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Bearer is an HTTP client that sends token as its bearer token on every
// request (an MCP client signed in).
func Bearer(token string) *http.Client {
	return &http.Client{Transport: bearer{token, http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// PlanCover starts PlanCover's stand-in (packs/plancover/upstream) on a
// loopback port, taking the provider at issuer's tokens for
// PlanCoverAudience, and returns it with its URL.
func PlanCover(t testing.TB, issuer string) (*plancover.Server, string) {
	t.Helper()
	pc, err := plancover.New(context.Background(), issuer, PlanCoverAudience, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(pc.Handler())
	t.Cleanup(srv.Close)
	return pc, srv.URL
}

// Northgate starts Northgate Bank's stand-in (packs/northgate/upstream)
// on a loopback port, taking issuer's tokens for NorthgateAudience.
func Northgate(t testing.TB, issuer string) (*northgate.Server, string) {
	t.Helper()
	ng, err := northgate.New(context.Background(), issuer, NorthgateAudience, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ng.Handler())
	t.Cleanup(srv.Close)
	return ng, srv.URL
}

// MCPSignIn is user's sign-in as toolgate's MCP server takes it: the MCP
// client's access token from the provider, verified with p's claims,
// exchanged for a grant, and a credential issued by the vault (as the
// mcp service, on the database at databaseURL). It returns whom the token
// names, the credential's ref and the access token.
func MCPSignIn(t testing.TB, f *IdP, p *policy.Policy, databaseURL, user string) (mcpgate.Identity, string, string) {
	t.Helper()
	ctx := context.Background()
	tok, err := idp.SignIn(ctx, f.URL, MCPClientID, f.Users[user], idp.ACRPassword)
	if err != nil {
		t.Fatal(err)
	}
	verify, err := mcpgate.NewVerifier(ctx, f.URL, MCPAudience, mcpgate.DefaultClaims(p), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	who, err := verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := mcpgate.VaultCredentials(ServicePool(t, databaseURL, "mcp"), f.Exchange(), nil)(ctx, who)
	if err != nil {
		t.Fatal(err)
	}
	return who, ref, tok.AccessToken
}
