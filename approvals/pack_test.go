package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// CardDeskPack is the pack file the README's "Bring your own tools" walks,
// loaded beside Mangrove as TOOLGATE_PACKS names them.
const CardDeskPack = "mangrove,../examples/packs/carddesk.yaml"

// cardDesk is the card desk's system over HTTP, as the HTTP executor
// speaks to any upstream: a token exchange for the person's credential,
// then the pack's routes with that token, keyed writes deduplicated by
// their Idempotency-Key.
type cardDesk struct {
	*httptest.Server
	secret   string
	mu       sync.Mutex
	reissues map[string]string // Idempotency-Key -> account
	posts    int
}

func newCardDesk(t *testing.T) *cardDesk {
	d := &cardDesk{secret: rand.Text(), reissues: map[string]string{}}
	token := "tok-" + rand.Text()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ UserID, ClientSecret string }
		if json.NewDecoder(r.Body).Decode(&in) != nil || in.UserID != "cara" || in.ClientSecret != d.secret {
			http.Error(w, `{"error":"unknown client"}`, http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"accessToken": token})
	})
	authed := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, `{"error":"no token"}`, http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /v1/accounts/{ref}/card", authed(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"account": r.PathValue("ref"), "state": "active", "last4": "4471"})
	}))
	mux.HandleFunc("POST /v1/accounts/{ref}/reissues", authed(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		defer d.mu.Unlock()
		d.posts++
		if key == "" {
			http.Error(w, `{"error":"an Idempotency-Key is required"}`, http.StatusBadRequest)
			return
		}
		d.reissues[key] = r.PathValue("ref")
		_ = json.NewEncoder(w).Encode(map[string]string{"reissue": "RI-" + key[len(key)-4:], "status": "posted"})
	}))
	d.Server = httptest.NewServer(mux)
	t.Cleanup(d.Close)
	return d
}

// TestAFilePackRunsBesideMangroveInTheCardUI is issue 26's "done when": the
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
	desk := newCardDesk(t)
	u := newUIWith(t, testenv.StackOptions{Policy: set.Policy, Upstreams: map[string]string{"carddesk": desk.URL}})
	ctx := context.Background()
	// The agent backend's sign-in of cara issued her credential, bound to
	// her role and accounts.
	if _, err := u.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, resources, acr, auth_time)
		VALUES ('cr_cara_desk', 'cara', $1, $2, 'cara', 'card_agent', '{"account": ["ACC-4471", "ACC-5120"]}', 'pwd', now())`, desk.secret, u.IdP.URL); err != nil {
		t.Fatal(err)
	}
	cara := policy.Session{UserID: "cara", Role: "card_agent", Resources: policy.Resources{"account": {"ACC-4471", "ACC-5120"}},
		SessionID: "s-cara", ConversationID: "desk", CredentialRef: "cr_cara_desk"}

	if r := u.Run(t, workflows.ToolCallInput{Tool: "get_card", ToolCallID: "1", Args: json.RawMessage(`{}`), Session: cara}); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), `"last4":"4471"`) || !strings.Contains(string(r.Result), `"account":"ACC-4471"`) {
		t.Fatalf("get_card on her own first account: %+v", r)
	}
	r := u.Run(t, workflows.ToolCallInput{Tool: "get_card", ToolCallID: "2", Args: json.RawMessage(`{"accountRef":"ACC-9999"}`), Session: cara})
	if r.Code != policy.CodeResourceScope || !strings.Contains(r.Message, `No account "ACC-9999" was found. Check accountRef`) || strings.Contains(r.Message, "ACC-4471") || strings.Contains(r.Message, "store") {
		t.Fatalf("another's account: %+v", r)
	}
	if r := u.Run(t, workflows.ToolCallInput{Tool: "reissue_card", ToolCallID: "3", Args: json.RawMessage(`{"reason":"lost","fee":3000}`), Session: cara}); r.Code != policy.CodeToolDenied || !strings.Contains(r.Message, "worth £30.00") {
		t.Fatalf("a lost card's £30.00 reissue, which no rule routes: %+v", r)
	}
	first, run, err := workflows.Call(ctx, u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "reissue_card", ToolCallID: "4",
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
	for _, want := range []string{"reissue_card · Account ACC-4471 · Fee £25.00 · Reason stolen", "Value\n£25.00", "Routed to\nCard supervisor", "password, within 8 hours"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card does not show %q:\n%s", want, card)
		}
	}
	do(t, sam,
		chromedp.SendKeys(chromedp.CSS("#reason"), "reported stolen on the call"),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if outcome := get(t, sam, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Executed, approved by sam") {
		t.Fatalf("after approving: %q", outcome)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != workflows.StatusExecuted || !strings.Contains(string(res.Result), `"status":"posted"`) {
		t.Fatalf("the reissue: %v %+v", err, res)
	}
	desk.mu.Lock()
	posts, account := desk.posts, desk.reissues[id]
	desk.mu.Unlock()
	if posts != 1 || account != "ACC-4471" {
		t.Fatalf("%d reissue posts upstream; the one keyed %s was for %q", posts, id, account)
	}

	rows, err := u.Owner.Query(ctx, `SELECT tool || ' ' || event || ' ' || reason || ' ' || coalesce(resource_kind || '/' || resource_id, '-') || ' ' || coalesce(value_cents::text, '-')
		FROM audit_log WHERE conversation_id = 'desk' AND event <> 'approval_refused' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"get_card allowed ok account/ACC-4471 -",
		"get_card denied store_scope account/ACC-9999 -",
		"reissue_card denied tool_denied account/ACC-4471 -",
		"reissue_card needs_approval ok account/ACC-4471 2500",
		"reissue_card approved ok account/ACC-4471 2500",
		"reissue_card executed ok account/ACC-4471 2500",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the card desk's audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
