package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"go.temporal.io/sdk/client"
)

// mcpAs signs user in at make dev's provider as the MCP client does and
// returns a call through make dev's MCP server, with the result's text,
// and the client's session. The client speaks the SDK's newest revision,
// which has no MCP sessions, so each mcpAs names a conversation of its own.
// devStack is make dev with every port moved (testenv.MakeDev).
type devStack struct{ *testenv.DevStack }

func startMakeDev(t *testing.T) devStack {
	return devStack{testenv.MakeDev(t, testenv.MakeDevOptions{})}
}

// user is a demo user from the users file make dev created.
func (d devStack) user(t *testing.T, id string) idp.User { return d.User(t, id) }

// secondShell is a command typed in a second shell beside make dev.
func (d devStack) secondShell(t *testing.T, program string, args ...string) *exec.Cmd {
	return d.SecondShell(t, program, args...)
}

func (d devStack) mcpAs(t *testing.T, ctx context.Context, user string) (func(tool string, args map[string]any) (*mcp.CallToolResult, string), *mcp.ClientSession) {
	t.Helper()
	tok, err := idp.SignIn(ctx, d.Issuer, "toolgate-mcp", d.user(t, user), idp.ACRPassword)
	if err != nil {
		t.Fatal(err)
	}
	var cs *mcp.ClientSession
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "make-dev-test", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: d.MCP, HTTPClient: testenv.Bearer(tok.AccessToken)}, nil)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("MCP: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	conversation := mcp.Meta{mcpgate.ConversationMeta: user + "." + strings.ToLower(rand.Text())}
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: conversation})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return res, text.String()
	}
	return call, cs
}

// offeredTools are the names of the tools an MCP session is offered,
// sorted, space-separated.
func offeredTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestPlanCoverRunsThroughMakeDev is PlanCover through make dev
// itself: meera's MCP client signs in at the demo provider with no seeded
// credential; she is offered PlanCover's reads alone, lists her policies
// at PlanCover's stand-in with a token exchanged for it, is told another's
// portal is not found, and gets the ten hospitals nearest her pin code,
// the exact pin's first, with no desk's mobile number.
func TestPlanCoverRunsThroughMakeDev(t *testing.T) {
	d := startMakeDev(t)
	// Every read answers in a second or two; a call no worker polls for
	// must fail this soon, not at the suite's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	call, cs := d.mcpAs(t, ctx, "meera")
	offered := offeredTools(t, ctx, cs)
	if want := "find_network_hospitals get_claim_settlement get_claim_status get_covered_benefits get_plan_details list_my_claims list_my_policies list_policy_documents search_policy_knowledge " + mcpgate.StatusTool + " " + mcpgate.WithdrawTool; offered != want {
		t.Fatalf("meera is offered %v", offered)
	}
	res, text := call("list_my_policies", map[string]any{})
	if res.IsError || !strings.Contains(text, "PRT-40122") || !strings.Contains(text, "PRT-40123") {
		t.Fatalf("list_my_policies: %s", text)
	}
	// Each pack on its own task queue: the call ran on PlanCover's.
	var ran struct {
		CallID string `json:"callId"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &ran); err != nil || ran.CallID == "" {
		t.Fatalf("list_my_policies names no call: %s", b)
	}
	tc, err := client.Dial(client.Options{HostPort: d.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	desc, err := tc.DescribeWorkflow(ctx, ran.CallID, "")
	if err != nil || desc.TaskQueueName != "toolgate-plancover" {
		t.Fatalf("list_my_policies ran on a task queue other than PlanCover's: %v %v", desc, err)
	}
	if res, text := call("get_plan_details", map[string]any{"portal_ref": "PRT-50017"}); !res.IsError || !strings.Contains(text, `No portal "PRT-50017" was found`) || strings.Contains(text, "PRT-40122") {
		t.Fatalf("ravi's portal, asked by meera: %s", text)
	}
	res, text = call("find_network_hospitals", map[string]any{"pin_code": "560034"})
	if res.IsError || !strings.Contains(text, "Sakra Hospital") || !strings.Contains(text, "not exhaustive") || strings.Contains(text, "98450") || strings.Contains(text, "99860") {
		t.Fatalf("find_network_hospitals: %s", text)
	}
	// The auditor's insights page covers PlanCover: the refusal of a
	// portal meera does not hold is among its refusals.
	abena := browser(t)
	signInAt(t, abena, d.Cards, "abena", d.user(t, "abena").Password)
	do(t, abena, chromedp.Navigate(d.Cards+"/insights"), chromedp.WaitVisible(chromedp.CSS("#chart-refusals")))
	if page := get(t, abena, chromedp.Text(chromedp.CSS("#chart-refusals"))); !strings.Contains(page, "resource_scope · get_plan_details") {
		t.Fatalf("abena's insights, refusals:\n%s", page)
	}
}

// TestTheReferenceServersRunThroughMakeDev: make dev stands toolgate in
// front of the official filesystem and memory servers. noor's MCP client
// is offered exactly the tools the pack file names, namespaced by server;
// a listing of the scratch folder runs at once on the pack's own task
// queue; a write outside it is refused before any card; a write inside it
// waits for a keeper, and the file is not there until one approves. The
// official TypeScript client's keyed write waits while tomas approves it in
// Chromium, on a card that shows the file it replaces; it runs once, and the
// same key from a new session answers that call.
func TestTheReferenceServersRunThroughMakeDev(t *testing.T) {
	d := startMakeDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	call, cs := d.mcpAs(t, ctx, "noor")
	offered := offeredTools(t, ctx, cs)
	if want := "files__list_directory files__move_file files__read_text_file files__write_file memory__delete_entities memory__open_nodes memory__read_graph memory__search_nodes " + mcpgate.StatusTool + " " + mcpgate.WithdrawTool; offered != want {
		t.Fatalf("noor is offered %v", offered)
	}
	scratch := filepath.Join(d.Root, ".dev", "scratch")
	if err := os.WriteFile(filepath.Join(scratch, "notes.txt"), []byte("cold chain"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, text := call("files__list_directory", map[string]any{"path": scratch})
	if res.IsError || !strings.Contains(text, "notes.txt") {
		t.Fatalf("files__list_directory: %s", text)
	}
	var ran struct {
		CallID string `json:"callId"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &ran); err != nil || ran.CallID == "" {
		t.Fatalf("files__list_directory names no call: %s", b)
	}
	tc, err := client.Dial(client.Options{HostPort: d.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if desc, err := tc.DescribeWorkflow(ctx, ran.CallID, ""); err != nil || desc.TaskQueueName != "toolgate-reference" {
		t.Fatalf("the listing ran on a task queue other than the reference pack's: %v %v", desc, err)
	}
	if res, text := call("files__write_file", map[string]any{"path": "/etc/cron.d/x", "content": "x"}); !res.IsError || !strings.Contains(text, "invalid_arguments") || !strings.Contains(text, "must be a path under "+scratch) {
		t.Fatalf("a write outside the scratch folder: %s", text)
	}
	plan := filepath.Join(scratch, "plan.txt")
	if res, text := call("files__write_file", map[string]any{"path": plan, "content": "Order 40 cases."}); res.IsError || !strings.Contains(text, "A person must approve this before it runs") || !strings.Contains(text, "content Order 40 cases.") {
		t.Fatalf("a write inside it: %s", text)
	}
	if _, err := os.Stat(plan); !os.IsNotExist(err) {
		t.Fatalf("the file was written before a keeper approved: %v", err)
	}

	// The official TypeScript client, as noor: a read, then a keyed write
	// that tomas approves in Chromium, on a card that shows what it would
	// replace, while the client waits on the status tool (this make dev
	// answers a card at once); then the same key from a new session: one
	// call, one write.
	dir, _ := filepath.Abs("../mcpgate/testdata/client")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js (make node): %v", err)
	}
	order := filepath.Join(scratch, "order.txt")
	if err := os.WriteFile(order, []byte("Order 20 cases."), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := exec.CommandContext(ctx, node, "client.mjs")
	ts.Dir = dir
	ts.Env = append(os.Environ(), "MCP_SCRIPT=reference", "MCP_URL="+d.MCP, "MCP_CLIENT_ID=toolgate-mcp", "MCP_USER=noor",
		"MCP_PASSWORD="+d.user(t, "noor").Password, "NOTES_PATH="+filepath.Join(scratch, "notes.txt"), "PLAN_PATH="+order)
	var tsOut, tsErr strings.Builder
	ts.Stdout, ts.Stderr = &tsOut, &tsErr
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, d.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var id, shown string
	for deadline := time.Now().Add(time.Minute); db.QueryRow(ctx, `SELECT workflow_id, card FROM pending_action WHERE status = 'pending_approval' AND workflow_id LIKE '%-ts.write.1'`).Scan(&id, &shown) != nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the TypeScript client's write put up no card:\n%s", tsErr.String())
		}
	}
	if !strings.HasSuffix(shown, " · Now: Order 20 cases.") {
		t.Fatalf("the write's card does not show what it replaces: %q", shown)
	}
	tomas := browser(t)
	signInAt(t, tomas, d.Cards, "tomas", d.user(t, "tomas").Password)
	do(t, tomas, chromedp.Navigate(d.Cards+"/cards/"+id))
	if outcome := approveOpenCard(t, tomas, "the order stands"); !strings.Contains(outcome, "Executed, approved by tomas") {
		t.Fatalf("after approving: %q", outcome)
	}
	if err := ts.Wait(); err != nil {
		t.Fatalf("the TypeScript client: %v\n%s\n%s", err, tsErr.String(), tsOut.String())
	}
	var got struct {
		SignedIn     bool     `json:"signedIn"`
		Tools        []string `json:"tools"`
		PendingFirst bool     `json:"pendingFirst"`
		Read         struct {
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
		} `json:"read"`
		Write struct {
			IsError     bool   `json:"isError"`
			Status      string `json:"status"`
			CallID      string `json:"callId"`
			Progress    int    `json:"progress"`
			Again       string `json:"again"`
			AgainStatus string `json:"againStatus"`
		} `json:"write"`
	}
	if err := json.Unmarshal([]byte(tsOut.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, tsOut.String())
	}
	if !got.SignedIn || strings.Join(got.Tools, " ") != offered || got.Read.IsError || !strings.Contains(got.Read.Text, "cold chain") {
		t.Fatalf("the TypeScript client saw %s", tsOut.String())
	}
	if !got.PendingFirst || got.Write.IsError || got.Write.Status != "executed" || got.Write.CallID != id || got.Write.Again != id || got.Write.AgainStatus != "executed" {
		t.Fatalf("the TypeScript client's write: %+v (the card was %s)", got.Write, id)
	}
	var runs int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'executed'`, id).Scan(&runs); err != nil || runs != 1 {
		t.Fatalf("the write ran %d times (%v)", runs, err)
	}
	if b, err := os.ReadFile(order); err != nil || string(b) != "Order 40 cases." {
		t.Fatalf("the file after the approved write: %q %v", b, err)
	}
}

// TestNorthgateRunsThroughMakeDev is the card desk of Northgate
// Bank through make dev itself: dana's MCP client signs in at the demo
// provider; she is offered Northgate's tools alone; her balance is refused
// until she gives her passphrase, which the MCP server seals; her one-time
// code (bin/northgate code dana) raises her to high; her reissue puts up a
// card on Northgate's task queue that imogen, card operations, sees alone
// of the packs' cards and approves in Chromium; it runs once, and its
// reference comes back only then.
func TestNorthgateRunsThroughMakeDev(t *testing.T) {
	d := startMakeDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call, cs := d.mcpAs(t, ctx, "dana")
	offered := offeredTools(t, ctx, cs)
	if want := "freeze_card get_balance get_branch_hours get_recent_bill reissue_card " + mcpgate.StatusTool + " " + mcpgate.WithdrawTool + " transfer_funds verify_one_time_code verify_passphrase"; offered != want {
		t.Fatalf("dana is offered %v", offered)
	}
	if res, text := call("get_balance", map[string]any{}); !res.IsError || !strings.Contains(text, "step_up_required") || !strings.Contains(text, "passphrase") || strings.Contains(text, "balancePence") {
		t.Fatalf("get_balance before verifying: %s", text)
	}
	if res, text := call("verify_passphrase", map[string]any{"passphrase": "harbour lights"}); res.IsError || !strings.Contains(text, `"outcome":"passed"`) || strings.Contains(text, "harbour") {
		t.Fatalf("verify_passphrase: %s", text)
	}
	if res, text := call("get_balance", map[string]any{}); res.IsError || !strings.Contains(text, "balancePence") {
		t.Fatalf("get_balance at medium: %s", text)
	}
	code, err := exec.Command(filepath.Join(d.Root, "bin", "northgate"), "code", "dana").Output()
	if err != nil {
		t.Fatal(err)
	}
	if res, text := call("verify_one_time_code", map[string]any{"code": strings.TrimSpace(string(code))}); res.IsError || !strings.Contains(text, `"heldTier":"high"`) {
		t.Fatalf("verify_one_time_code: %s", text)
	}
	res, text := call("reissue_card", map[string]any{"reason": "captured"})
	var card struct {
		Status, CallID string
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &card)
	if res.IsError || card.Status != "pending_approval" || !strings.Contains(text, "ending 4471") || !strings.Contains(text, "12 Harbour Row") || strings.Contains(text, "RC-") {
		t.Fatalf("the reissue's card: %s", text)
	}
	tc, err := client.Dial(client.Options{HostPort: d.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if desc, err := tc.DescribeWorkflow(ctx, card.CallID, ""); err != nil || desc.TaskQueueName != "toolgate-northgate" {
		t.Fatalf("the reissue runs on a task queue other than Northgate's: %v %v", desc, err)
	}

	imogen := browser(t)
	inbox := signInAt(t, imogen, d.Cards, "imogen", d.user(t, "imogen").Password)
	if !strings.Contains(inbox, "ending 4471") || strings.Contains(inbox, "ACC-4471") || strings.Contains(inbox, "store") {
		t.Fatalf("imogen's inbox:\n%s", inbox)
	}
	do(t, imogen, chromedp.Click(chromedp.CSS(`main a[href^="/cards/"]`)))
	if outcome := approveOpenCard(t, imogen, "captured at the Leeds branch machine"); !strings.Contains(outcome, "Executed, approved by imogen") {
		t.Fatalf("after approving: %q", outcome)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, text := call(mcpgate.StatusTool, map[string]any{"callId": card.CallID})
		if strings.Contains(text, `"reference":"RC-`) {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(text, "Still ") && !strings.Contains(text, "could not be read right now") {
			t.Fatalf("the reissue's outcome, as dana's client reads it: %s", text)
		}
	}

	// lewis spends his passphrase's budget: locked out, on a redial too,
	// until a person hands him back with the starter.
	lewis, _ := d.mcpAs(t, ctx, "lewis")
	lewis("verify_passphrase", map[string]any{"passphrase": "copper kettles"})
	if _, text := lewis("verify_passphrase", map[string]any{"passphrase": "kettle copper"}); !strings.Contains(text, `"outcome":"locked_out"`) {
		t.Fatalf("lewis's second wrong passphrase: %s", text)
	}
	redial, _ := d.mcpAs(t, ctx, "lewis")
	if res, text := redial("verify_passphrase", map[string]any{"passphrase": "copper kettle"}); !res.IsError || !strings.Contains(text, "locked out") {
		t.Fatalf("lewis's right passphrase on a redial: %s", text)
	}
	// Typed in a second shell: nothing set by hand, make dev's settings found.
	if out, err := d.secondShell(t, "idp", "users").CombinedOutput(); err != nil || !strings.Contains(string(out), "imogen") {
		t.Fatalf("idp users in a second shell: %v %s", err, out)
	}
	token, err := d.secondShell(t, "starter", "token", "--user", "ama").Output()
	if err != nil {
		t.Fatalf("starter token in a second shell: %v", err)
	}
	amas, err := mcp.NewClient(&mcp.Implementation{Name: "make-dev-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: d.MCP, HTTPClient: testenv.Bearer(strings.TrimSpace(string(token)))}, nil)
	if err != nil {
		t.Fatalf("the second shell's token at the MCP server: %v", err)
	}
	if offered := offeredTools(t, ctx, amas); !strings.Contains(offered, "get_stock") {
		t.Fatalf("the second shell's token is offered %s", offered)
	}
	_ = amas.Close()
	hand := d.secondShell(t, "starter", "hand-back", "--pack", "northgate", "--user", "lewis", "--by", "imogen", "--note", "verified in branch")
	if out, err := hand.CombinedOutput(); err != nil || !strings.Contains(string(out), "lewis is handed back") {
		t.Fatalf("starter hand-back: %v %s", err, out)
	}
	if _, text := redial("verify_passphrase", map[string]any{"passphrase": "copper kettle"}); !strings.Contains(text, `"outcome":"passed"`) {
		t.Fatalf("lewis's right passphrase after the hand-back: %s", text)
	}

	// The auditor's insights page covers Northgate: the balance refused
	// for dana's tier is among its refusals.
	abena := browser(t)
	signInAt(t, abena, d.Cards, "abena", d.user(t, "abena").Password)
	do(t, abena, chromedp.Navigate(d.Cards+"/insights"), chromedp.WaitVisible(chromedp.CSS("#chart-refusals")))
	if page := get(t, abena, chromedp.Text(chromedp.CSS("#chart-refusals"))); !strings.Contains(page, "step_up_required · get_balance") {
		t.Fatalf("abena's insights, refusals:\n%s", page)
	}
}

// TestTheCardDeskRunsThroughMakeDev is a file pack beside Mangrove through
// make dev itself: the card desk's file pack runs beside Mangrove. cara's
// MCP client signs in at the demo provider, with no seeded credential of
// hers; her read executes at the card desk's stand-in with a token
// exchanged for it, another account is refused naming accountRef, her
// stolen card's reissue puts up a card that sam, the routed card
// supervisor, approves in Chromium in the card UI; it runs once, the card
// shows reissued, and the audit log names the account.
func TestTheCardDeskRunsThroughMakeDev(t *testing.T) {
	d := startMakeDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call, _ := d.mcpAs(t, ctx, "cara")
	if res, text := call("get_card", map[string]any{}); res.IsError || !strings.Contains(text, `"account":"ACC-4471"`) || !strings.Contains(text, `"state":"active"`) {
		t.Fatalf("get_card on cara's first account: %s", text)
	}
	if res, text := call("get_card", map[string]any{"accountRef": "ACC-9999"}); !res.IsError || !strings.Contains(text, `No account "ACC-9999" was found. Check accountRef`) || strings.Contains(text, "ACC-4471") {
		t.Fatalf("another's account: %s", text)
	}
	res, text := call("replace_card", map[string]any{"reason": "stolen", "fee": 2500})
	var card struct {
		Status, CallID string
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &card)
	if res.IsError || card.Status != "pending_approval" || !strings.Contains(text, "£25.00") {
		t.Fatalf("a stolen card's £25.00 reissue: %s", text)
	}

	sam := browser(t)
	if inbox := signInAt(t, sam, d.Cards, "sam", d.user(t, "sam").Password); !strings.Contains(inbox, "£25.00") || !strings.Contains(inbox, "account ACC-4471") {
		t.Fatalf("sam's inbox:\n%s", inbox)
	}
	do(t, sam, chromedp.Click(chromedp.CSS(`main a[href^="/cards/"]`)))
	if outcome := approveOpenCard(t, sam, "reported stolen on the call"); !strings.Contains(outcome, "Executed: reissue RI-") || !strings.Contains(outcome, "approved by sam") {
		t.Fatalf("after approving: %q", outcome)
	}
	// The card row says executed from inside the run's activity, before the
	// workflow closes with the result the status tool returns: poll for it.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, text := call(mcpgate.StatusTool, map[string]any{"callId": card.CallID})
		if strings.Contains(text, `"status":"posted"`) && strings.Contains(text, `"by":"cara"`) {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(text, "Still ") && !strings.Contains(text, "could not be read right now") {
			t.Fatalf("the reissue's outcome, as cara's client reads it: %s", text)
		}
	}
	if _, text := call("get_card", map[string]any{"accountRef": "ACC-4471"}); !strings.Contains(text, `"state":"reissued"`) {
		t.Fatalf("the card after its reissue: %s", text)
	}

	db, err := pgx.Connect(ctx, d.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	got := auditTrail(t, ctx, db, "user_id = 'cara'")
	want := []string{
		"get_card allowed ok account/ACC-4471 -",
		"get_card denied resource_scope account/ACC-9999 -",
		"replace_card needs_approval ok account/ACC-4471 2500",
		"replace_card approved ok account/ACC-4471 2500",
		"replace_card executed ok account/ACC-4471 2500",
		"get_card allowed ok account/ACC-4471 -",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cara's audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var seeded int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM vault.credentials WHERE user_id = 'cara' AND client_secret IS NOT NULL`).Scan(&seeded); err != nil || seeded != 0 {
		t.Fatalf("cara has %d credentials holding a secret (%v): hers should hold the provider's grant alone", seeded, err)
	}
}

// TestMakeDevStopsCleanlyHoweverItIsStopped: make dev, run by make as the
// README says, stopped by a TERM to make (which passes it on) or by a
// closed terminal (a HUP to its whole process group), leaves no process of
// it running, its private cluster stopped and no settings file behind.
func TestMakeDevStopsCleanlyHoweverItIsStopped(t *testing.T) {
	for name, stop := range map[string]func(d *testenv.DevStack) error{
		"a TERM to make":    func(d *testenv.DevStack) error { return syscall.Kill(d.Parent, syscall.SIGTERM) },
		"a closed terminal": func(d *testenv.DevStack) error { return syscall.Kill(-d.Group, syscall.SIGHUP) },
	} {
		t.Run(name, func(t *testing.T) {
			d := testenv.MakeDev(t, testenv.MakeDevOptions{UnderMake: true})
			if err := stop(d); err != nil {
				t.Fatal(err)
			}
			if left := d.Stopped(); left != "" {
				t.Fatalf("make dev, stopped by %s, left %s behind\n%s", name, left, d.Printed())
			}
		})
	}
}

// TestMakeDevStartsItsTemporalServerAgain: a Temporal dev server that
// stops before it answers (start-dev picks its inner ports itself, and a
// program starting beside it can take one first) is started again, make
// dev says so, and the stack then stays up: the attempt that failed is not
// taken for a process of the stack that exited.
func TestMakeDevStartsItsTemporalServerAgain(t *testing.T) {
	cli, err := testenv.TemporalCLI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flaky := filepath.Join(dir, "temporal")
	script := "#!/bin/bash\n" +
		"if [ \"$1 $2\" = \"server start-dev\" ] && [ ! -e " + filepath.Join(dir, "failed") + " ]; then\n" +
		"  touch " + filepath.Join(dir, "failed") + "; echo 'listen tcp: bind: address already in use' >&2; exit 1\n" +
		"fi\n" +
		"exec " + cli + " \"$@\"\n"
	if err := os.WriteFile(flaky, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := testenv.MakeDev(t, testenv.MakeDevOptions{Temporal: flaky})
	if !strings.Contains(d.Printed(), "stopped before it answered") || !strings.Contains(d.Printed(), "(try 1 of 3)") {
		t.Fatalf("make dev does not say it started its Temporal server again:\n%s", d.Printed())
	}
	// Up, and still up a few seconds on.
	for range 5 {
		time.Sleep(time.Second)
		resp, err := http.Get(d.Cards + "/healthz")
		if err != nil {
			t.Fatalf("the card UI stopped answering after make dev came up: %v\n%s", err, d.Printed())
		}
		resp.Body.Close()
		if strings.Contains(d.Printed(), "a process of the stack exited") {
			t.Fatalf("make dev stopped:\n%s", d.Printed())
		}
	}
}
