package mcpgate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

// connectAt opens a session at protocol revision version with the Go SDK's
// client, declaring URL elicitation when url is true, with its own
// multi-round-trip loop off: the test is the client's loop.
func (g *gate) connectAt(t *testing.T, token, version string, url bool) *mcp.ClientSession {
	t.Helper()
	var caps *mcp.ClientCapabilities
	if url {
		caps = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	return g.connectWith(t, token, version, caps)
}

// formOnly declares form elicitation alone.
var formOnly = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}

// connectWith is connectAt declaring caps.
func (g *gate) connectWith(t *testing.T, token, version string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, Capabilities: caps}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: g.url + mcpgate.Path, HTTPClient: testenv.Bearer(token)}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// refusedAs says err is the JSON-RPC refusal of a requestState that names
// want.
func refusedAs(err, want error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams && strings.HasPrefix(rpc.Message, strings.SplitN(want.Error(), ":", 2)[0])
}

// TestAClientConfirmsItsOwnCardByURL: ama's 2026-07-28 client, declaring
// URL elicitation, asks for a transfer she may approve herself: the answer
// is an input-required result sending her to the card's page, with a
// sealed requestState. Echoed by efua, for other arguments, altered, it is
// refused by name; once she has decided, her client's retry, to an MCP
// server restarted since it asked, answers the executed call, and the same
// state again is refused as replayed. A client that does not declare URL
// elicitation gets today's answer.
func TestAClientConfirmsItsOwnCardByURL(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()
	ama := g.connectAt(t, g.token(t, "ama", idp.ACRPassword), mcpgate.FirstSessionlessRevision, true)
	args := map[string]any{"articleId": 40211, "quantity": 40, "reason": "stockout_risk"}
	call := func(cs *mcp.ClientSession, args map[string]any, state string, answer string) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: args, RequestState: state, Meta: mcp.Meta{mcpgate.ConversationMeta: "confirm"}}
		if answer != "" {
			p.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: answer}}
		}
		return cs.CallTool(ctx, p)
	}
	res, err := call(ama, args, "", "")
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("ama's own card: %v %+v", err, res)
	}
	ask, ok := res.InputRequests["confirm"].(*mcp.ElicitParams)
	if !ok || ask.Mode != "url" || !strings.HasPrefix(ask.URL, g.cards+"/cards/toolcall-mcp.") || !strings.HasSuffix(ask.URL, workflows.ConfirmSuffix) ||
		!strings.Contains(ask.Message, "Move 40 cases") {
		t.Fatalf("the input request: %+v", res.InputRequests["confirm"])
	}
	wf := strings.TrimSuffix(strings.TrimPrefix(ask.URL, g.cards+"/cards/"), workflows.ConfirmSuffix)
	state := res.RequestState

	efua := g.connectAt(t, g.token(t, "efua", idp.ACRPassword), mcpgate.FirstSessionlessRevision, true)
	altered := []byte(state)
	altered[len(altered)-2] ^= 1
	for name, try := range map[string]struct {
		cs    *mcp.ClientSession
		args  map[string]any
		state string
		want  error
	}{
		"efua echoes ama's":         {efua, args, state, mcpgate.ErrStateNotYours},
		"for other arguments":       {ama, map[string]any{"articleId": 40211, "quantity": 41, "reason": "stockout_risk"}, state, mcpgate.ErrStateOtherRequest},
		"altered":                   {ama, args, string(altered), mcpgate.ErrStateAltered},
		"not a requestState at all": {ama, args, "k1.AAAA", mcpgate.ErrStateAltered},
	} {
		if _, err := call(try.cs, try.args, try.state, "accept"); !refusedAs(err, try.want) {
			t.Errorf("%s: %v, want %v", name, err, try.want)
		}
	}

	// ama decides it in the card UI (as her browser would), then her client retries.
	if err := workflows.SendDecision(ctx, g.s.Client, wf, signoff.Approval{Decision: signoff.Approve, Approver: policy.Identity{UserID: "ama",
		Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}, Evidence: testenv.Evidence("ama", time.Now())}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	g.restart() // between the ask and the retry
	res, err = call(ama, args, state, "accept")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "executed" || structured(t, res)["callId"] != wf {
		t.Fatalf("the retry after ama approved, to a restarted MCP server: %v %s", err, text(res))
	}
	var transfers int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, wf).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers", transfers)
	}
	if _, err := call(ama, args, state, "accept"); !refusedAs(err, mcpgate.ErrStateReplayed) {
		t.Fatalf("the same requestState again: %v", err)
	}

	// Without URL elicitation declared: the card is pending, as before.
	plain := g.connectAt(t, g.token(t, "ama", idp.ACRPassword), mcpgate.FirstSessionlessRevision, false)
	res, err = call(plain, map[string]any{"articleId": 40211, "quantity": 39, "reason": "stockout_risk"}, "", "")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("a client without URL elicitation: %v %+v", err, res)
	}
	// With form elicitation alone, on a row that takes no confirmation in the client: pending too.
	form := g.connectWith(t, g.token(t, "ama", idp.ACRPassword), mcpgate.FirstSessionlessRevision, formOnly)
	res, err = call(form, map[string]any{"articleId": 40211, "quantity": 38, "reason": "stockout_risk"}, "", "")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("a form client, on a row without confirmInClient: %v %+v", err, res)
	}
}

// inClientStock is the Mangrove pack whose stock transfers a requester
// may confirm in their own client (confirmInClient), and whose approvals
// of one up to $500.00 need an mfa sign-in within 8 hours.
func inClientStock(t *testing.T) *policy.Policy {
	return testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolRequestStockTransfer {
				d.Rows[i].ConfirmInClient = true
			}
		}
		d.Evidence = slices.Clone(d.Evidence)
		for i := range d.Evidence {
			if d.Evidence[i].Tool == mangrove.ToolRequestStockTransfer && d.Evidence[i].UpToCents == 50000 {
				d.Evidence[i].ACR = policy.ACRMFA
			}
		}
	})
}

// TestAClientConfirmsInItsOwnFormWhereTheRowAllowsIt: on a row that takes
// a confirmation in the client, ama's client that declares form
// elicitation alone is asked to approve or reject her $384 transfer in a
// form of the card's text. Approved there, her client's retry answers the
// executed call, run once, and its audit row says she confirmed in her
// client. Rejected there, nothing runs. Her client signed in with a
// password alone, which the card's mfa evidence needs more than, is not
// asked in a form, nor is its answer to a form her stronger client was
// asked sent; a client that also declares URL elicitation is sent to the
// card UI instead, the stronger evidence.
func TestAClientConfirmsInItsOwnFormWhereTheRowAllowsIt(t *testing.T) {
	g := newGateWith(t, 0, mcpgate.DefaultClaims(testenv.Policy).User, testenv.StackOptions{Policy: inClientStock(t)})
	ctx := context.Background()
	mfa := g.token(t, "ama", idp.ACRMFA) // one code a period: every strong client of hers shares it
	ama := g.connectWith(t, mfa, mcpgate.FirstSessionlessRevision, formOnly)
	call := func(cs *mcp.ClientSession, quantity int, state string, answer *mcp.ElicitResult) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: "request_stock_transfer", Arguments: map[string]any{"articleId": 40211, "quantity": quantity, "reason": "stockout_risk"},
			RequestState: state, Meta: mcp.Meta{mcpgate.ConversationMeta: "inclient"}}
		if answer != nil {
			p.InputResponses = mcp.InputResponseMap{"confirm_in_client": answer}
		}
		return cs.CallTool(ctx, p)
	}
	decided := func(decision string) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}
	}
	asked := func(quantity int) (string, string) {
		t.Helper()
		res, err := call(ama, quantity, "", nil)
		if err != nil || !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("ama's own card of %d cases: %v %+v", quantity, err, res)
		}
		ask, ok := res.InputRequests["confirm_in_client"].(*mcp.ElicitParams)
		if !ok || ask.Mode != "form" || ask.URL != "" || !strings.Contains(ask.Message, fmt.Sprintf("Move %d cases", quantity)) ||
			!strings.Contains(fmt.Sprint(ask.RequestedSchema), "approve reject") {
			t.Fatalf("the input request: %+v", res.InputRequests)
		}
		var wf string
		if err := g.s.Owner.QueryRow(ctx, `SELECT workflow_id FROM pending_action WHERE status = 'pending_approval' AND args->>'quantity' = $1`, fmt.Sprint(quantity)).Scan(&wf); err != nil || wf == "" {
			t.Fatalf("the card of %d cases: %v", quantity, err)
		}
		return res.RequestState, wf
	}

	state, wf := asked(40)
	g.restart() // between the ask and the retry
	res, err := call(ama, 40, state, decided("approve"))
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "executed" || structured(t, res)["callId"] != wf {
		t.Fatalf("the retry that approves in the form: %v %s", err, text(res))
	}
	var transfers, inClient int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, wf).Scan(&transfers)
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_id = 'ama'
		AND approver_via = 'confirmed_in_client'`, wf).Scan(&inClient)
	if transfers != 1 || inClient != 1 {
		t.Fatalf("%d transfers, %d approvals confirmed in the client", transfers, inClient)
	}
	story, err := insights.Reader{Pool: g.s.Owner}.Explain(ctx, nil, wf)
	var told strings.Builder
	if err == nil {
		err = story.Text(&told)
	}
	if err != nil || !strings.Contains(told.String(), "approved (ok) by ama (store_manager), signed in with mfa") ||
		!strings.Contains(told.String(), "confirmed in client (weaker than a sign-in at the card UI)") {
		t.Fatalf("the call's story: %v\n%s", err, told.String())
	}
	if _, err := call(ama, 40, state, decided("approve")); !refusedAs(err, mcpgate.ErrStateReplayed) {
		t.Fatalf("the same requestState again: %v", err)
	}

	state, wf = asked(41)
	if res, err := call(ama, 41, state, decided("reject")); err != nil || structured(t, res)["status"] != "rejected" {
		t.Fatalf("the retry that rejects in the form: %v %s", err, text(res))
	}
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, wf).Scan(&transfers)
	if transfers != 0 {
		t.Fatalf("%d transfers after ama rejected it in her client", transfers)
	}

	plain := g.connectWith(t, mfa, mcpgate.FirstSessionlessRevision, nil)
	if res, err := call(plain, 5, "", nil); err != nil || res.NeedsInput() || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("a client that declares no elicitation: %v %+v", err, res)
	}
	weak := g.connectWith(t, g.token(t, "ama", idp.ACRPassword), mcpgate.FirstSessionlessRevision, formOnly)
	if res, err := call(weak, 7, "", nil); err != nil || res.NeedsInput() || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("a form client whose sign-in falls short of the card's evidence: %v %+v", err, res)
	}
	// Asked signed in strongly, answered by her weaker token: nothing is
	// sent (no refusal spends the card's lock), and the answer says where
	// the card stands.
	state, wf = asked(8)
	if res, err := call(weak, 8, state, decided("approve")); err != nil || res.NeedsInput() || structured(t, res)["status"] != "pending_approval" {
		t.Fatalf("an approval in the form by a sign-in that no longer meets the card: %v %+v", err, res)
	}
	var refused int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approval_refused', 'approved')`, wf).Scan(&refused)
	if refused != 0 {
		t.Fatalf("%d decisions audited for a confirmation that should not have been sent", refused)
	}
	both := g.connectWith(t, mfa, mcpgate.FirstSessionlessRevision,
		&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}})
	res, err = call(both, 6, "", nil)
	if ask, ok := res.InputRequests["confirm"].(*mcp.ElicitParams); err != nil || !ok || ask.Mode != "url" {
		t.Fatalf("a client that takes a URL too: %v %+v", err, res)
	}
}
