package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	enums "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// gate is the real stack behind an MCP server: the dev server, PostgreSQL,
// the upstream, the worker, the demo provider.
type gate struct {
	logs  *observer.ObservedLogs // the MCP server's
	s     *testenv.Stack
	idp   *testenv.IdP
	url   string
	cards string // the card UI
	mcp   *mcpgate.Server
	// front serves mcp; fresh makes another MCP server of the same
	// settings (restart).
	front *testenv.LateHandler
	fresh func() *mcpgate.Server
}

// restart replaces the MCP server with a new one of the same settings at
// the same address, as a restarted process is: nothing it held in memory
// carries over.
func (g *gate) restart() {
	g.mcp = g.fresh()
	g.front.Set(g.mcp.Handler())
}

var (
	authRequestIDRe = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	csrfRe          = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	hashRe          = regexp.MustCompile(`name="argsHash" value="([^"]+)"`)
	versionRe       = regexp.MustCompile(`name="signedVersion" value="([^"]+)"`)
)

// approveInTheCardUI signs user in at the card UI through the provider's
// password page, as a browser would, and approves the card from its page.
func (g *gate) approveInTheCardUI(user, workflowID string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	page := func(resp *http.Response, err error) (string, error) {
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	login, err := page(c.Get(g.cards + "/"))
	if err != nil {
		return err
	}
	m := authRequestIDRe.FindStringSubmatch(login)
	if m == nil {
		return fmt.Errorf("not the provider's password page: %.300s", login)
	}
	if _, err := page(c.PostForm(g.idp.URL+"/login/password", url.Values{"authRequestID": {m[1]}, "username": {user}, "password": {g.idp.Users[user].Password}})); err != nil {
		return err
	}
	card, err := page(c.Get(g.cards + "/cards/" + workflowID))
	if err != nil {
		return err
	}
	csrf, hash, version := csrfRe.FindStringSubmatch(card), hashRe.FindStringSubmatch(card), versionRe.FindStringSubmatch(card)
	if csrf == nil || hash == nil || version == nil {
		return fmt.Errorf("no decision form on the card: %.300s", card)
	}
	_, err = page(c.PostForm(g.cards+"/cards/"+workflowID+"/decision", url.Values{"csrf": {csrf[1]}, "argsHash": {hash[1]}, "signedVersion": {version[1]},
		"decision": {"approve"}}))
	return err
}

func newGate(t *testing.T, maxWait time.Duration) *gate {
	t.Helper()
	return newGateUser(t, maxWait, mcpgate.DefaultClaims(testenv.Policy).User)
}

// newGateUser is newGate with the MCP server taking a sign-in's user ID
// from the claim userClaim.
func newGateUser(t *testing.T, maxWait time.Duration, userClaim string) *gate {
	t.Helper()
	return newGateWith(t, maxWait, userClaim, testenv.StackOptions{})
}

// newGateWith is newGateUser on a stack with options o.
func newGateWith(t *testing.T, maxWait time.Duration, userClaim string, o testenv.StackOptions) *gate {
	t.Helper()
	cards := &testenv.LateHandler{}
	cardSrv := httptest.NewServer(cards)
	t.Cleanup(cardSrv.Close)
	front := &testenv.LateHandler{}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	id := testenv.NewIdPForMCP(t, cardSrv.URL, srv.URL)
	o.ApproverIssuers = []string{id.URL}
	s := testenv.NewStackWith(t, o)
	g := &gate{s: s, idp: id, cards: cardSrv.URL}
	// The card UI, signing approvers in at the same provider.
	auth, err := approvals.NewAuth(context.Background(), approvals.OIDC{Roles: approvals.RolesOf(testenv.Policy), Issuer: id.URL, ClientID: id.ClientID, ClientSecret: id.ClientSecret,
		RedirectURL: cardSrv.URL + "/auth/callback", Scopes: []string{"openid", "profile"}, UserClaim: "preferred_username", NameClaim: "name",
		RoleClaim: "toolgate_role", Policy: testenv.Policy, Resources: mangrove.ClaimMap()}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cards.Set((&approvals.Server{Policy: s.Policy, Pool: testenv.ServicePool(t, s.DatabaseURL, "approvals"), Temporal: s.Client, Auth: auth,
		Signer: testenv.ApprovalSigner, SessionKey: []byte(strings.Repeat("k", 32)), Logger: zaptest.NewLogger(t), DecisionWait: 15 * time.Second}).Handler())
	claims := mcpgate.DefaultClaims(testenv.Policy)
	claims.User = userClaim
	verify, err := mcpgate.NewVerifier(context.Background(), g.idp.URL, testenv.MCPAudience, claims, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	logout, err := mcpgate.NewLogoutVerifier(context.Background(), g.idp.URL, testenv.MCPClientID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mcpPool := testenv.ServicePool(t, s.DatabaseURL, "mcp")
	g.url = srv.URL
	core, logs := observer.New(zap.DebugLevel)
	g.logs = logs
	g.front, g.fresh = front, func() *mcpgate.Server {
		return &mcpgate.Server{Temporal: s.Client, TaskQueue: s.TaskQueue, Policy: s.Policy, Verify: verify,
			Credential: mcpgate.VaultCredentials(mcpPool, nil, nil), Revoked: mcpgate.VaultRevocations(mcpPool),
			Logout: logout, Revoke: mcpgate.VaultRevoke(mcpPool),
			Resource: srv.URL + mcpgate.Path, AuthorizationServer: g.idp.URL, MaxWait: maxWait, Signer: &testenv.WithdrawSigner,
			Codec: testenv.Codec, SpendState: mcpgate.VaultStates(mcpPool), TakeSignIn: mcpgate.VaultSignIns(mcpPool), CardsURL: cardSrv.URL, Logger: zap.New(core)}
	}
	g.restart()
	return g
}

// token signs user in at the provider as the MCP client and returns the
// access token.
func (g *gate) token(t *testing.T, user, acr string) string {
	t.Helper()
	tok, err := idp.SignIn(context.Background(), g.idp.URL, testenv.MCPClientID, g.idp.Users[user], acr)
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// connect opens an MCP session with the official Go client.
func (g *gate) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.url + mcpgate.Path,
		HTTPClient: testenv.Bearer(token)}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func text(r *mcp.CallToolResult) string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// TestMCPServer drives the MCP server through the real stack with the
// official Go client: the OAuth protected resource's answers, tools/list
// for a role, an executed read, a refusal, a retry with the same
// idempotency key, and the token kept out of the call's history.
func TestMCPServer(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()

	resp, err := http.Post(g.url+mcpgate.Path, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+g.url+mcpgate.MetadataPath+mcpgate.Path+`"`) {
		t.Fatalf("unauthenticated: %s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	resp, err = http.Get(g.url + mcpgate.MetadataPath + mcpgate.Path)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	_ = resp.Body.Close()
	if meta.Resource != g.url+mcpgate.Path || !slices.Equal(meta.AuthorizationServers, []string{g.idp.URL}) {
		t.Fatalf("protected-resource metadata: %+v", meta)
	}

	token := g.token(t, "ama", idp.ACRPassword)
	cs := g.connect(t, token)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	want := append(testenv.Policy.Offered(mangrove.RoleStoreManager), mcpgate.StatusTool, mcpgate.WithdrawTool)
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) || slices.Contains(names, "change_price") {
		t.Fatalf("ama is offered %v, want %v", names, want)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}})
	if err != nil {
		t.Fatal(err)
	}
	if st := structured(t, res); res.IsError || st["status"] != "executed" || !strings.Contains(text(res), `"cases":6`) {
		t.Fatalf("get_stock: %v %s", st, text(res))
	}
	callID, _ := structured(t, res)["callId"].(string)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211, "storeId": 118}})
	if err != nil {
		t.Fatal(err)
	}
	if st := structured(t, res); !res.IsError || st["code"] != "resource_scope" {
		t.Fatalf("another store's stock: %v", st)
	}

	task := &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"kind": "shelf_check", "dueBy": "today"},
		Meta: mcp.Meta{mcpgate.IdempotencyKeyMeta: "task.1"}}
	first, err := cs.CallTool(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.connect(t, token).CallTool(ctx, task) // a retry from a new session
	if err != nil {
		t.Fatal(err)
	}
	a, b := structured(t, first), structured(t, again)
	var tasks int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.tasks`).Scan(&tasks)
	if a["status"] != "executed" || a["callId"] != b["callId"] || a["callId"] != workflows.WorkflowID(mcpgate.Conversation(g.idp.URL, "ama"), "task.1") || tasks != 1 {
		t.Fatalf("a retry with the same key: %v then %v, %d tasks", a, b, tasks)
	}

	for _, id := range []string{callID, a["callId"].(string)} {
		iter := g.s.Client.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(ev)
			if strings.Contains(string(b), token[:40]) {
				t.Fatal("the access token is in the call's history")
			}
		}
	}
	var leaked int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE position($1 in audit_log::text) > 0`, token[:40]).Scan(&leaked)
	if leaked != 0 {
		t.Fatal("the access token is in the audit log")
	}
	for _, e := range append(g.s.Logs.All(), g.logs.All()...) {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), token[:40]) {
			t.Fatalf("the access token is in a log line: %s", e.Message)
		}
	}
	if len(g.logs.All()) == 0 || len(g.s.Logs.All()) == 0 {
		t.Fatal("no log lines were kept to check")
	}
}

// TestMCPCardsWaitForAPerson: a transfer's card is pending; while the
// client keeps the request open it gets progress and, once the card is
// approved, the final result, once; with no wait, the answer says a person
// must approve and the status tool reads the outcome later; another
// person's call is not found.
func TestMCPCardsWaitForAPerson(t *testing.T) {
	g := newGate(t, 30*time.Second)
	ctx := context.Background()
	progress := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Message }})
	waiting, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + mcpgate.Path,
		HTTPClient: testenv.Bearer(g.token(t, "ama", idp.ACRPassword))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	go func() {
		// Approve as soon as the card is up (and progress has been sent).
		msg := <-progress
		progress <- msg
		ids := func() []string {
			rows, _ := g.s.Owner.Query(ctx, `SELECT workflow_id FROM pending_action WHERE status = 'pending_approval'`)
			defer rows.Close()
			var out []string
			for rows.Next() {
				var id string
				_ = rows.Scan(&id)
				out = append(out, id)
			}
			return out
		}()
		for _, id := range ids {
			_ = workflows.SendDecision(ctx, g.s.Client, id, signoff.Approval{Decision: signoff.Approve, Approver: policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager,
				Resources: mangrove.Stores(112)}, Evidence: testenv.Evidence("ama", time.Now())}, testenv.ApprovalSigner)
		}
	}()
	params := &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: map[string]any{"articleId": 40211, "quantity": 40, "reason": "stockout_risk"}}
	params.SetProgressToken("t1")
	res, err := waiting.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	st := structured(t, res)
	if res.IsError || st["status"] != "executed" || !strings.Contains(<-progress, "Waiting for a store_manager to approve") {
		t.Fatalf("a transfer approved while the client waits: %v %s", st, text(res))
	}
	var transfers int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, st["callId"]).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers", transfers)
	}

	// Without waiting: the card is pending, and the status tool reads it.
	g2 := newGate(t, 0)
	cs := g2.connect(t, g2.token(t, "ama", idp.ACRPassword))
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: map[string]any{"articleId": 40211, "quantity": 41, "reason": "stockout_risk"}})
	if err != nil {
		t.Fatal(err)
	}
	st = structured(t, res)
	if res.IsError || st["status"] != "pending_approval" || !strings.Contains(text(res), "A person must approve") {
		t.Fatalf("a pending card: %v %s", st, text(res))
	}
	id := st["callId"].(string)
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.StatusTool, Arguments: map[string]any{"callId": id}})
	if structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("status of a pending card: %s", text(res))
	}
	other := g2.connect(t, g2.token(t, "efua", idp.ACRPassword))
	res, _ = other.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.StatusTool, Arguments: map[string]any{"callId": id}})
	if !res.IsError || !strings.Contains(text(res), "No call") {
		t.Fatalf("efua reads ama's call: %s", text(res))
	}

	// Withdrawn: not by another person, by ama; nothing runs, and her
	// budget is hers again.
	res, _ = other.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.WithdrawTool, Arguments: map[string]any{"callId": id}})
	if !res.IsError || !strings.Contains(text(res), "No call") {
		t.Fatalf("efua withdraws ama's call: %s", text(res))
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.WithdrawTool, Arguments: map[string]any{"callId": id, "reason": "the delivery came"}})
	if st := structured(t, res); st["status"] != "withdrawn" || st["code"] != "withdrawn" || !strings.Contains(text(res), "ama withdrew this call") {
		t.Fatalf("ama withdraws her card: %v %s", st, text(res))
	}
	_ = g2.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id).Scan(&transfers)
	var gone int
	_ = g2.s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE workflow_id = $1 AND status = 'withdrawn'`, id).Scan(&gone)
	if transfers != 0 || gone != 1 {
		t.Fatalf("after the withdrawal: %d transfers, %d withdrawn cards", transfers, gone)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.WithdrawTool, Arguments: map[string]any{"callId": id}})
	if structured(t, res)["status"] != "withdrawn" {
		t.Fatalf("withdrawn again: %s", text(res))
	}
}

// TestMCPHostileInput: each gets the protocol's error and nothing runs.
func TestMCPHostileInput(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()
	ama := g.token(t, "ama", idp.ACRPassword)
	post := func(token, body string, header map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, g.url+mcpgate.Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, c := range map[string]struct {
		token, body string
		header      map[string]string
		status      int
	}{
		"a forged token":        {ama[:len(ama)-4] + "AAAA", initialize, nil, http.StatusUnauthorized},
		"another site's Origin": {ama, initialize, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		"malformed JSON-RPC":    {ama, `{"jsonrpc":"2.0","id":1,"method":`, nil, http.StatusBadRequest},
		"an oversized body":     {ama, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"` + strings.Repeat("a", 300<<10) + `"}}`, nil, http.StatusRequestEntityTooLarge},
		"a batch":               {ama, "[" + initialize + "," + initialize + "]", nil, http.StatusBadRequest},
	} {
		if resp, body := post(c.token, c.body, c.header); resp.StatusCode != c.status {
			t.Errorf("%s: %s %s, want %d", name, resp.Status, body, c.status)
		}
	}
	// A session opened by ama, presented with efua's token, is refused.
	resp, _ := post(ama, initialize, nil)
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatal("no session opened")
	}
	if resp, body := post(g.token(t, "efua", idp.ACRPassword), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": session}); resp.StatusCode < 400 {
		t.Fatalf("another person's session: %s %s", resp.Status, body)
	}
	// A tool outside the role's list, and an unknown method, are protocol errors; nothing runs.
	cs := g.connect(t, ama)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "change_price", Arguments: map[string]any{"articleId": 40211, "newPriceCents": 1}}); err == nil {
		t.Fatal("change_price was callable")
	}
	// An unknown method in ama's own session is refused by the SDK (an HTTP
	// error naming it, or JSON-RPC's "method not found").
	_, _ = post(ama, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": session})
	if resp, body := post(ama, `{"jsonrpc":"2.0","id":3,"method":"tools/destroy","params":{}}`, map[string]string{"Mcp-Session-Id": session,
		"MCP-Protocol-Version": "2025-11-25"}); resp.StatusCode < 400 && !strings.Contains(body, "-32601") {
		t.Fatalf("an unknown method: %s %s", resp.Status, body)
	}
	var calls int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM tool_calls`).Scan(&calls)
	if calls != 0 {
		t.Fatalf("%d calls ran from hostile input", calls)
	}
}

// TestMCPConversationsNeverCollide: two people whose user IDs agree in
// their first 60 characters (64 with "mcp.") send the same idempotency key;
// each gets a call of their own, and neither is told of the other's.
func TestMCPConversationsNeverCollide(t *testing.T) {
	g := newGate(t, 0)
	verify, err := mcpgate.NewVerifier(context.Background(), g.idp.URL, testenv.MCPAudience, mcpgate.DefaultClaims(testenv.Policy), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 60)
	vault := mcpgate.VaultCredentials(testenv.ServicePool(t, g.s.DatabaseURL, "mcp"), nil, nil)
	srv := httptest.NewServer((&mcpgate.Server{Temporal: g.s.Client, TaskQueue: g.s.TaskQueue, Policy: g.s.Policy,
		Verify: func(ctx context.Context, token string) (mcpgate.Identity, error) {
			id, err := verify(ctx, token)
			id.UserID = long + id.Subject[:min(4, len(id.Subject))] // two people, one 60-character prefix
			return id, err
		},
		Credential: func(ctx context.Context, id mcpgate.Identity) (string, error) {
			id.UserID = id.Subject // the credential is the person's own sign-in's
			return vault(ctx, id)
		},
		Revoked:  mcpgate.VaultRevocations(testenv.ServicePool(t, g.s.DatabaseURL, "mcp")),
		Resource: "http://127.0.0.1" + mcpgate.Path, AuthorizationServer: g.idp.URL, Logger: zaptest.NewLogger(t)}).Handler())
	t.Cleanup(srv.Close)
	g.url = srv.URL
	task := &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"kind": "shelf_check", "dueBy": "today"},
		Meta: mcp.Meta{mcpgate.IdempotencyKeyMeta: "task.1"}}
	var ids []string
	for _, who := range []string{"ama", "kofi"} {
		res, err := g.connect(t, g.token(t, who, "")).CallTool(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		st := structured(t, res)
		if st["code"] == "idempotency_conflict" {
			t.Fatalf("%s's keyed call collided with another person's: %v", who, st)
		}
		id, _ := st["callId"].(string)
		ids = append(ids, id)
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("two people's keyed calls: %q and %q", ids[0], ids[1])
	}
}

// TestMCPLockoutEndsAuthority, through the real stack: ama, signed in at
// the provider as the MCP client, has a transfer card waiting and reads
// stock. Five wrong codes lock her account; the provider's back-channel
// logout revokes every credential issued to her sign-ins, the MCP server
// refuses her token from then on (an open session and a new one alike),
// the vault issues no credential for that sign-in, and the card approved
// afterwards runs nothing.
func TestMCPLockoutEndsAuthority(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()
	tok := g.token(t, "ama", idp.ACRPassword)
	cs := g.connect(t, tok)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: map[string]any{"articleId": 40211, "quantity": 40, "reason": "stockout_risk"}})
	if err != nil || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("the card before the lock: %v %s", err, text(res))
	}
	card := structured(t, res)["callId"].(string)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}}); err != nil || structured(t, res)["status"] != "executed" {
		t.Fatalf("a read before the lock: %v %s", err, text(res))
	}
	wrong := g.idp.Users["ama"]
	wrong.TOTPSecret = g.idp.Users["kofi"].TOTPSecret
	for i := 0; i < idp.MaxFactorFailures && !g.idp.Locked("ama"); i++ {
		if _, err := idp.SignIn(ctx, g.idp.URL, testenv.MCPClientID, wrong, idp.ACRMFA); err == nil {
			t.Fatal("a wrong code signed ama in")
		}
	}
	if !g.idp.Locked("ama") {
		t.Fatal("five wrong codes did not lock ama")
	}
	live := func() (n int) {
		_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM vault.credentials WHERE issuer = $1 AND subject = 'ama' AND NOT revoked`, g.idp.URL).Scan(&n)
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); live() > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of ama's credentials outlived the lock", live())
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}}); err == nil {
		t.Fatalf("the open session ran a tool after the lock: %s", text(res))
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, nil)
	if again, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + mcpgate.Path, HTTPClient: testenv.Bearer(tok)}, nil); err == nil {
		_ = again.Close()
		t.Fatal("a new session with the token from before the lock connected")
	}
	for _, issue := range []string{
		`SELECT vault.issue_for_sign_in_resources('ama', $1, 'ama', 'store_manager', '{"store": ["112"]}'::jsonb, 'pwd', now() - interval '1 minute')`,
		`SELECT vault.issue_for_sign_in('ama', $1, 'ama', 'store_manager', ARRAY[112]::bigint[], 'pwd', now() - interval '1 minute')`, // an earlier MCP server's
	} {
		var ref string
		if err := testenv.ServicePool(t, g.s.DatabaseURL, "mcp").QueryRow(ctx, issue, g.idp.URL).Scan(&ref); err == nil {
			t.Fatalf("the vault issued %s for a sign-in from before the lock", ref)
		}
	}
	sm := policy.Identity{UserID: "sm112", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}
	if err := workflows.SendDecision(ctx, g.s.Client, card, signoff.Approval{Decision: signoff.Approve, Approver: sm, Evidence: testenv.Evidence("sm112", time.Now())},
		testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	var out workflows.ToolCallResult
	if err := g.s.Client.GetWorkflow(ctx, card, "").Get(ctx, &out); err != nil || out.Status != workflows.StatusFailed || out.Code != policy.CodeCredentialUnavailable {
		t.Fatalf("the card approved after the lock: %v %+v", err, out)
	}
	var transfers int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
	if transfers != 0 {
		t.Fatalf("%d transfers after the lock", transfers)
	}
}

// TestMCPBackChannelLogout: the MCP server takes the provider's logout
// tokens for the MCP client on its own, so authority ends there even with
// no card UI to hear of it. Tokens for another client, without the event,
// or from another issuer are refused (400) and end nothing; a valid one
// for ama revokes her credentials and her token. A role change at the
// provider reaches the MCP server by itself.
func TestMCPBackChannelLogout(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()
	tok := g.token(t, "ama", idp.ACRPassword)
	cs := g.connect(t, tok)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}}); err != nil || structured(t, res)["status"] != "executed" {
		t.Fatalf("a read before the logout: %v %s", err, text(res))
	}
	post := func(token string) int {
		t.Helper()
		resp, err := http.PostForm(g.url+mcpgate.BackChannelLogoutPath, url.Values{"logout_token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, bad := range map[string]string{
		"another client":  g.idp.LogoutToken(t, g.idp.URL, g.idp.ClientID, "ama", true),
		"no event":        g.idp.LogoutToken(t, g.idp.URL, testenv.MCPClientID, "ama", false),
		"another issuer":  g.idp.LogoutToken(t, "https://id.evil.example", testenv.MCPClientID, "ama", true),
		"not a token":     "x.y.z",
		"an access token": tok,
	} {
		if code := post(bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}
	if t.Failed() {
		t.FailNow() // a token taken that should not be: ama's next call would wait for a sign-in
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}}); err != nil || structured(t, res)["status"] != "executed" {
		t.Fatalf("a refused logout token ended ama's authority: %v %s", err, text(res))
	}
	if code := post(g.idp.LogoutToken(t, g.idp.URL, testenv.MCPClientID, "ama", true)); code != http.StatusOK {
		t.Fatalf("a valid logout token: %d", code)
	}
	var live int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM vault.credentials WHERE issuer = $1 AND subject = 'ama' AND NOT revoked`, g.idp.URL).Scan(&live)
	if live != 0 {
		t.Fatalf("%d of ama's credentials outlived the logout", live)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211}}); err == nil {
		t.Fatalf("ama's token ran a tool after the logout: %s", text(res))
	}
	if err := g.idp.SetRole(ctx, "kofi", "store_manager", []int64{113}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); g.logs.FilterMessage("sign-in revoked by the provider").FilterField(zap.String("subject", "kofi")).Len() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the role change's logout never reached the MCP server")
		}
	}
}

// TestEveryProtocolRevisionTheSDKSpeaks: a client asking for any revision
// the official Go SDK supports gets it, is offered the person's tools and
// runs a read: 2026-07-28, which has no sessions, included.
func TestEveryProtocolRevisionTheSDKSpeaks(t *testing.T) {
	g := newGate(t, 0)
	tok := g.token(t, "ama", idp.ACRPassword)
	versions := mcp.SupportedProtocolVersions()
	if !slices.Contains(versions, "2026-07-28") {
		t.Fatalf("the SDK speaks %v, not 2026-07-28", versions)
	}
	for i, v := range versions {
		c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.url + mcpgate.Path, HTTPClient: testenv.Bearer(tok)},
			&mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatalf("%s: connect: %v", v, err)
		}
		if r := cs.InitializeResult(); r == nil || r.ProtocolVersion != v {
			t.Errorf("asked for %s, got %+v", v, r)
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "get_stock" }) {
			t.Errorf("%s: tools/list: %v", v, err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211},
			Meta: mcp.Meta{"toolgate/idempotencyKey": fmt.Sprintf("rev.%d", i)}})
		if err != nil {
			t.Errorf("%s: get_stock: %v", v, err)
		} else if structured(t, res)["status"] != "executed" {
			t.Errorf("%s: get_stock: %s", v, text(res))
		}
		_ = cs.Close()
	}
}

// TestTheStatusToolShowsACallToItsPersonAlone: the MCP server takes user
// IDs from a claim two people share (their role: ama and efua are both
// store_manager), as a provider whose preferred_username two accounts may
// hold. ama's waiting transfer is hers to read with the status tool; efua,
// under the same user ID, is told it is not found.
func TestTheStatusToolShowsACallToItsPersonAlone(t *testing.T) {
	g := newGateUser(t, 0, "toolgate_role")
	ctx := context.Background()
	// The shared user ID's seeded secret, the demo's (dev mode): both get a credential.
	if _, err := g.s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, demo, issuer, subject)
		SELECT 'cred-store_manager', 'store_manager', client_secret, secret_pack, true, issuer, 'store_manager' FROM vault.credentials WHERE ref = 'cred-ama'`); err != nil {
		t.Fatal(err)
	}
	ama, efua := g.connect(t, g.token(t, "ama", "")), g.connect(t, g.token(t, "efua", ""))
	r, err := ama.CallTool(ctx, &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: map[string]any{"articleId": 40211, "quantity": 40, "reason": "stockout_risk"}})
	if err != nil {
		t.Fatal(err)
	}
	// The call waits (the demo upstream knows no user store_manager, so it
	// awaits a sign-in that will do): it is ama's, and it runs on.
	callID, _ := structured(t, r)["callId"].(string)
	if callID == "" {
		t.Fatalf("ama's transfer named no call: %s %v", text(r), structured(t, r))
	}
	read := func(cs *mcp.ClientSession) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpgate.StatusTool, Arguments: map[string]any{"callId": callID}})
		if err != nil {
			t.Fatal(err)
		}
		return text(r)
	}
	if got := read(ama); !strings.Contains(got, "Still ") {
		t.Fatalf("ama reading her own call: %s", got)
	}
	if got := read(efua); !strings.Contains(got, "No call") || strings.Contains(got, "Still ") {
		t.Fatalf("efua, under ama's user ID, read ama's call: %s", got)
	}
}
