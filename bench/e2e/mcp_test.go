//go:build bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

// TestMCPLatency measures an allowed read (get_stock) through the MCP
// server (the official Go client, one session, over loopback HTTP) against
// the same read through the Go Temporal client (workflows.Call), on the
// same stack, interleaved call by call.
func TestMCPLatency(t *testing.T) {
	const reads = 150
	s := testenv.NewStack(t)
	p := testenv.NewIdP(t, "http://127.0.0.1:1")
	ctx := context.Background()
	verify, err := mcpgate.NewVerifier(ctx, p.URL, testenv.MCPAudience, mcpgate.DefaultClaims(testenv.Policy), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(nil)
	defer srv.Close()
	srv.Config.Handler = (&mcpgate.Server{Temporal: s.Client, TaskQueue: s.TaskQueue, Policy: s.Policy, Verify: verify,
		Credential: mcpgate.VaultCredentials(testenv.ServicePool(t, s.DatabaseURL, "mcp"), nil, nil), Revoked: mcpgate.VaultRevocations(testenv.ServicePool(t, s.DatabaseURL, "mcp")),
		Resource:            srv.URL + mcpgate.Path,
		AuthorizationServer: p.URL, Logger: zap.NewNop()}).Handler()
	tok, err := idp.SignIn(ctx, p.URL, testenv.MCPClientID, p.Users["kofi"], "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: srv.URL + mcpgate.Path, HTTPClient: testenv.Bearer(tok.AccessToken)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	viaMCP := func() time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_stock", Arguments: map[string]any{"articleId": 40211, "storeId": 113}})
		if err != nil || res.IsError {
			t.Fatalf("MCP read: %v %+v", err, res)
		}
		return time.Since(start)
	}
	session := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121),
		SessionID: "b", ConversationID: "mcpbench", CredentialRef: "cred-kofi"}
	viaGo := func(i int) time.Duration {
		start := time.Now()
		out, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: fmt.Sprint("g", i),
			Args: json.RawMessage(`{"articleId":40211,"storeId":113}`), Session: session})
		if err != nil || out.Status != workflows.StatusExecuted {
			t.Fatalf("Go read: %v %+v", err, out)
		}
		return time.Since(start)
	}
	viaMCP() // warm up both paths (the first MCP call issues the sign-in's credential)
	viaGo(1000000)
	var m, g series
	for i := range reads {
		m = append(m, viaMCP())
		g = append(g, viaGo(i))
	}
	slow := 0
	for _, d := range g {
		if d > time.Second {
			slow++
		}
	}
	t.Logf("Go client reads over 1 s: %d; MCP reads over 1 s: %d", slow, func() int {
		n := 0
		for _, d := range m {
			if d > time.Second {
				n++
			}
		}
		return n
	}())
	rows := [][]string{
		{"allowed read p50 (ms)", f(ms(m.pct(0.5))), f(ms(g.pct(0.5))), ratio(ms(m.pct(0.5)), ms(g.pct(0.5)))},
		{"allowed read p99 (ms)", f(ms(m.pct(0.99))), f(ms(g.pct(0.99))), ratio(ms(m.pct(0.99)), ms(g.pct(0.99)))},
	}
	md := fmt.Sprintf("MCP server against the Go client, %d allowed reads each, interleaved\n\n| measure | via /mcp | via workflows.Call | MCP / Go |\n|---|---|---|---|\n", reads)
	for _, r := range rows {
		md += fmt.Sprintf("| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
		t.Logf("| %s | %s | %s | %s |", r[0], r[1], r[2], r[3])
	}
	_ = os.MkdirAll(filepath.Join("..", "results"), 0o755)
	_ = os.WriteFile(filepath.Join("..", "results", "mcp.md"), []byte(md), 0o644)
}
