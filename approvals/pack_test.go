package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/examples/carddesk"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// CardDeskPack is the pack file docs/packs.md walks,
// loaded beside Mangrove as TOOLGATE_PACKS names them.
const CardDeskPack = "mangrove,../examples/packs/carddesk.yaml"

// newCardDesk is the server of the card desk's stand-in (examples/carddesk,
// what make dev runs); its handler is set once the provider it discovers
// is up.
func newCardDesk(t *testing.T) (*httptest.Server, *testenv.LateHandler) {
	h := &testenv.LateHandler{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

// signInThroughMCP is cara's sign-in as the MCP server takes it: her
// client's access token verified, exchanged at the provider for a grant,
// and a credential issued by the vault with no seeded row of hers.
func signInThroughMCP(t *testing.T, u *ui, user string) (policy.Session, string) {
	t.Helper()
	ctx := context.Background()
	tok, err := idp.SignIn(ctx, u.IdP.URL, testenv.MCPClientID, u.IdP.Users[user], idp.ACRPassword)
	if err != nil {
		t.Fatal(err)
	}
	verify, err := mcpgate.NewVerifier(ctx, u.IdP.URL, testenv.MCPAudience, mcpgate.DefaultClaims(u.Policy), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id, err := verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := mcpgate.VaultCredentials(testenv.ServicePool(t, u.DatabaseURL, "mcp"), u.IdP.Exchange(), nil)(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Session{UserID: id.UserID, Role: id.Role, Resources: id.Resources, SessionID: "s-" + user, ConversationID: "desk", CredentialRef: ref}, tok.AccessToken
}

// TestAFilePackRunsBesideMangroveInTheCardUI: the
// card desk, a pack in a YAML file alone (two tools, accounts for
// resources, two roles of its own, a fee in pounds, a stolen card's reissue
// routed by a rule), runs beside Mangrove: a read executes on the caller's
// own account, another account is refused naming the pack's own field, a
// reissue's card is shown to the card supervisor and approved in
// Chromium, it runs once upstream, and every audit row names the account;
// a Mangrove store manager never sees the card.
func TestAFilePackRunsBesideMangroveInTheCardUI(t *testing.T) {
	set, err := packs.Load(CardDeskPack)
	if err != nil {
		t.Fatal(err)
	}
	deskSrv, deskAt := newCardDesk(t)
	u := newUIWith(t, testenv.StackOptions{Policy: set.Policy, Upstreams: map[string]string{"carddesk": deskSrv.URL},
		Audiences: map[string]string{"carddesk": testenv.DeskAudience}})
	ctx := context.Background()
	desk, err := carddesk.New(ctx, u.IdP.URL, testenv.DeskAudience, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deskAt.Set(desk.Handler())
	cara, caraToken := signInThroughMCP(t, u, "cara")
	if cara.Role != "card_agent" || !cara.Resources.Holds("account", "ACC-4471") {
		t.Fatalf("cara's sign-in: %+v", cara)
	}
	var seeded, grants int
	if err := u.Owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE ref = 'cred-cara'), count(*) FILTER (WHERE ref = $1 AND grant_token IS NOT NULL AND client_secret IS NULL)
		FROM vault.credentials WHERE user_id = 'cara'`, cara.CredentialRef).Scan(&seeded, &grants); err != nil || seeded != 0 || grants != 1 {
		t.Fatalf("cara's credentials: %v, %d seeded, %d holding a grant and no secret", err, seeded, grants)
	}
	// The desk takes the provider's tokens for itself alone: not the token
	// cara's MCP client holds.
	req, _ := http.NewRequest(http.MethodGet, deskSrv.URL+"/v1/accounts/ACC-4471/card", nil)
	req.Header.Set("Authorization", "Bearer "+caraToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the desk took a token for the MCP server: %v %v", err, res)
	}

	if r := u.Run(t, workflows.ToolCallInput{Tool: "get_card", ToolCallID: "1", Args: json.RawMessage(`{}`), Session: cara}); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), `"last4":"4471"`) || !strings.Contains(string(r.Result), `"account":"ACC-4471"`) {
		t.Fatalf("get_card on her own first account: %+v", r)
	}
	r := u.Run(t, workflows.ToolCallInput{Tool: "get_card", ToolCallID: "2", Args: json.RawMessage(`{"accountRef":"ACC-9999"}`), Session: cara})
	if r.Code != policy.CodeResourceScope || !strings.Contains(r.Message, `No account "ACC-9999" was found. Check accountRef`) || strings.Contains(r.Message, "ACC-4471") || strings.Contains(r.Message, "store") {
		t.Fatalf("another's account: %+v", r)
	}
	if r := u.Run(t, workflows.ToolCallInput{Tool: "replace_card", ToolCallID: "3", Args: json.RawMessage(`{"reason":"lost","fee":3000}`), Session: cara}); r.Code != policy.CodeToolDenied || !strings.Contains(r.Message, "worth £30.00") {
		t.Fatalf("a lost card's £30.00 reissue, which no rule routes: %+v", r)
	}
	first, run, err := workflows.Call(ctx, u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "replace_card", ToolCallID: "4",
		Args: json.RawMessage(`{"reason":"stolen","fee":2500}`), Session: cara})
	if err != nil || first.Status != workflows.StatusPendingApproval || first.ApproverRole != "card_supervisor" {
		t.Fatalf("a stolen card's £25.00 reissue: %v %+v", err, first)
	}
	id := run.GetID()

	ama := browser(t)
	if inbox := signInAs(t, ama, u, "ama"); strings.Contains(inbox, "£25.00") || strings.Contains(inbox, "ACC-4471") {
		t.Fatalf("a Mangrove store manager sees the card desk's card:\n%s", inbox)
	}
	sam := browser(t)
	inbox := signInAs(t, sam, u, "sam")
	if !strings.Contains(inbox, "£25.00") || !strings.Contains(inbox, "account ACC-4471") || strings.Contains(inbox, "$") {
		t.Fatalf("the card supervisor's inbox:\n%s", inbox)
	}
	do(t, sam,
		chromedp.Click(chromedp.CSS(`a[href="/cards/`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	card := get(t, sam, chromedp.Text(chromedp.CSS("main")))
	// Each field is its own element, isolated, so no value's direction
	// reaches the next.
	shown := get(t, sam, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("h1.card-text > bdi"), e => e.textContent)`))
	if strings.Join(shown, "|") != "replace_card|Account ACC-4471|Fee £25.00|Reason stolen" {
		t.Errorf("the card's fields, each in its own bdi: %q", shown)
	}
	for _, want := range []string{"replace_card · Account ACC-4471 · Fee £25.00 · Reason stolen", "Value\n£25.00", "Routed to\nCard supervisor", "password, within 8 hours"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card does not show %q:\n%s", want, card)
		}
	}
	if outcome := approveOpenCard(t, sam, "reported stolen on the call"); !strings.Contains(outcome, "Executed: reissue RI-") || !strings.Contains(outcome, "approved by sam") {
		t.Fatalf("after approving: %q", outcome)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != workflows.StatusExecuted || !strings.Contains(string(res.Result), `"status":"posted"`) {
		t.Fatalf("the reissue: %v %+v", err, res)
	}
	if posted := desk.Posted(); len(posted) != 1 || posted[0].Account != "ACC-4471" || posted[0].By != "cara" || posted[0].Reason != "stolen" || posted[0].Fee != 2500 {
		t.Fatalf("the reissues posted upstream: %+v", posted)
	}

	got := auditTrail(t, ctx, u.Owner, "conversation_id = 'desk'")
	want := []string{
		"get_card allowed ok account/ACC-4471 -",
		"get_card denied resource_scope account/ACC-9999 -",
		"replace_card denied tool_denied account/ACC-4471 -",
		"replace_card needs_approval ok account/ACC-4471 2500",
		"replace_card approved ok account/ACC-4471 2500",
		"replace_card executed ok account/ACC-4471 2500",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the card desk's audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestACredentialActsAtItsOwnPacksUpstreamAlone: a person's seeded secret
// is for one pack's upstream. A credential that holds Mangrove's secret
// but claims the card desk's role and accounts is refused before anything
// reaches the desk, whether the desk takes the provider's tokens (the
// credential holds no grant) or a secret at its own token endpoint (the
// secret is not the desk's).
func TestACredentialActsAtItsOwnPacksUpstreamAlone(t *testing.T) {
	set, err := packs.Load(CardDeskPack)
	if err != nil {
		t.Fatal(err)
	}
	for _, exchanged := range []bool{true, false} {
		var seen []string
		deskSrv, deskAt := newCardDesk(t)
		deskAt.Set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			http.Error(w, `{"error":"the desk was reached"}`, http.StatusTeapot)
		}))
		o := testenv.StackOptions{Policy: set.Policy, Upstreams: map[string]string{"carddesk": deskSrv.URL}}
		if exchanged {
			o.Audiences = map[string]string{"carddesk": testenv.DeskAudience}
		}
		u := newUIWith(t, o)
		ctx := context.Background()
		if _, err := u.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, issuer, subject, role, resources, acr, auth_time, demo)
			SELECT 'cr_ama_at_desk', user_id, client_secret, secret_pack, $1, 'ama', 'card_agent', '{"account": ["ACC-4471"]}', 'pwd', now(), demo
			FROM vault.credentials WHERE ref = 'cred-ama'`, u.IdP.URL); err != nil {
			t.Fatal(err)
		}
		first := u.First(t, workflows.ToolCallInput{Tool: "get_card", ToolCallID: fmt.Sprint(exchanged), Args: json.RawMessage(`{}`), Session: policy.Session{UserID: "ama", Role: "card_agent",
			Resources: policy.Resources{"account": {"ACC-4471"}}, SessionID: "s-ama", ConversationID: "desk-" + rand.Text(), CredentialRef: "cr_ama_at_desk"}})
		want := "holds no secret for the carddesk pack's upstream"
		if exchanged {
			want = "holds no grant from the identity provider"
		}
		if first.Status != workflows.StatusAwaitingSignIn || len(seen) != 0 {
			t.Fatalf("exchanged %v: Mangrove's secret acted at the desk: %+v; the desk saw %q", exchanged, first, seen)
		}
		said := false
		for _, e := range u.Logs.FilterMessageSnippet("credential exchange failed").All() {
			said = said || strings.Contains(e.ContextMap()["error"].(string), "the session's credential "+want)
		}
		if !said {
			t.Fatalf("exchanged %v: the worker did not say the credential %s: %v", exchanged, want, u.Logs.FilterMessageSnippet("credential").All())
		}
	}
}
