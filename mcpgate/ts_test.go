package mcpgate_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestMCPWithTheTypeScriptClient drives the server with the official
// TypeScript SDK from npm (testdata/client, installed by make test): the
// OAuth flow from the server's 401 through the provider's sign-in,
// tools/list as ama (no change_price), get_stock executed, resource_scope
// refused with isError, a transfer left pending and approved in the card
// UI while the client waits (with progress; the final result once), and a retry with
// the same _meta key from a new session attaching to the same workflow.
func TestMCPWithTheTypeScriptClient(t *testing.T) {
	dir, _ := filepath.Abs("testdata/client")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil || statErr != nil {
		if testenv.Required() {
			t.Fatalf("TOOLGATE_REQUIRE_SERVICES=1 but Node.js or the TypeScript SDK is missing (make node installs it): %v %v", err, statErr)
		}
		t.Skip("skipped: no Node.js or SDK (make node)")
	}
	g := newGate(t, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	approved := make(chan error, 1)
	go func() {
		// The approver: ama approves her card in the card UI once it is up,
		// while the TypeScript client's call waits.
		for ctx.Err() == nil {
			var id string
			if g.s.Owner.QueryRow(ctx, `SELECT workflow_id FROM pending_action WHERE status = 'pending_approval' AND requested_by = 'ama'`).Scan(&id) == nil {
				approved <- g.approveInTheCardUI("ama", id)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+g.url+"/mcp", "MCP_CLIENT_ID="+testenv.MCPClientID, "MCP_USER=ama", "MCP_PASSWORD="+g.idp.Users["ama"].Password)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\n%s\n%s", err, stderr.String(), stdout)
	}
	var got struct {
		SignedIn bool     `json:"signedIn"`
		Tools    []string `json:"tools"`
		GetStock struct {
			IsError bool   `json:"isError"`
			Status  string `json:"status"`
			Text    string `json:"text"`
		} `json:"getStock"`
		StoreScope struct {
			IsError bool   `json:"isError"`
			Code    string `json:"code"`
		} `json:"storeScope"`
		Transfer struct {
			IsError  bool   `json:"isError"`
			Status   string `json:"status"`
			CallID   string `json:"callId"`
			Progress int    `json:"progress"`
		} `json:"transfer"`
		Retry struct {
			First, Again, Status string
		} `json:"retry"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	t.Logf("the TypeScript client saw %s", stdout)
	want := append(testenv.Policy.Offered(mangrove.RoleStoreManager), "toolgate_call_status", "toolgate_call_withdraw")
	slices.Sort(want)
	if !got.SignedIn || !slices.Equal(got.Tools, want) {
		t.Fatalf("signed in %v, tools %v (want %v)", got.SignedIn, got.Tools, want)
	}
	if got.GetStock.IsError || got.GetStock.Status != "executed" || !strings.Contains(got.GetStock.Text, `"cases":6`) {
		t.Errorf("get_stock: %+v", got.GetStock)
	}
	if !got.StoreScope.IsError || got.StoreScope.Code != "resource_scope" {
		t.Errorf("another store: %+v", got.StoreScope)
	}
	if err := <-approved; err != nil {
		t.Fatalf("approving in the card UI: %v", err)
	}
	var byCardUI int
	_ = g.s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_id = 'ama' AND approver_issuer = $2`,
		got.Transfer.CallID, g.idp.URL).Scan(&byCardUI)
	if byCardUI != 1 {
		t.Errorf("the card was not approved through the card UI's sign-in")
	}
	if got.Transfer.IsError || got.Transfer.Status != "executed" || got.Transfer.Progress < 1 {
		t.Errorf("the transfer: %+v", got.Transfer)
	}
	if got.Retry.First == "" || got.Retry.First != got.Retry.Again || got.Retry.Status != "executed" {
		t.Errorf("the retry: %+v", got.Retry)
	}
	var transfers, tasks int
	_ = g.s.Owner.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1), (SELECT count(*) FROM mangrove.tasks)`,
		got.Transfer.CallID).Scan(&transfers, &tasks)
	if transfers != 1 || tasks != 1 {
		t.Errorf("%d transfers, %d tasks; want 1 and 1", transfers, tasks)
	}
}
