package mcpgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
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
	opts := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	if url {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
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
// refused by name; once she has decided, her client's retry answers the
// executed call, and the same state again is refused as replayed. A
// client that does not declare URL elicitation gets today's answer.
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
	res, err = call(ama, args, state, "accept")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "executed" || structured(t, res)["callId"] != wf {
		t.Fatalf("the retry after ama approved: %v %s", err, text(res))
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
}
