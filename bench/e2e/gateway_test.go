//go:build bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/mcpupstream"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// bareMCP is the floor's one activity: the same tools/call, on a
// connection of its own to the same server.
type bareMCP struct {
	conn *mcpupstream.Conn
	args json.RawMessage
}

// Read reads the file through the server, as the gateway's activity does.
func (b *bareMCP) Read(ctx context.Context) (string, error) {
	res, err := b.conn.Call(ctx, "read_text_file", b.args, "")
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("the server refused the read")
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

var bm *bareMCP

// BareMCPRead is the floor for an allowed read of an MCP server's tool:
// one workflow, one activity making the call.
func BareMCPRead(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, bm.Read).Get(ctx, &out)
	return out, err
}

// TestMCPGatewayLatency measures an allowed read of a server nobody here
// wrote (the official filesystem server's read_text_file, in front of which
// examples/packs/reference.yaml stands toolgate) three ways, interleaved
// call by call: through toolgate's MCP server (the chain, the workflow, the
// audit row), straight to the server (one tools/call on a connection of
// its own), and as a bare Temporal workflow whose one activity makes that
// call. BENCH_GATEWAY_READS sets the count (100).
func TestMCPGatewayLatency(t *testing.T) {
	reads := 100
	if n, err := strconv.Atoi(os.Getenv("BENCH_GATEWAY_READS")); err == nil && n > 0 {
		reads = n
	}
	testenv.ReferenceServer(t, "mcp-server-filesystem")
	scratch, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_SCRATCH", scratch)
	note := filepath.Join(scratch, "notes.txt")
	if err := os.WriteFile(note, []byte("cold chain: check at 06:00"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := packs.Load("../../examples/packs/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, MCPServers: set.Servers})
	p := testenv.NewIdP(t, "http://127.0.0.1:1")
	ctx := context.Background()
	verify, err := mcpgate.NewVerifier(ctx, p.URL, testenv.MCPAudience, mcpgate.DefaultClaims(s.Policy), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(nil)
	defer srv.Close()
	srv.Config.Handler = (&mcpgate.Server{Temporal: s.Client, TaskQueue: s.TaskQueue, Policy: s.Policy, Verify: verify,
		Credential: mcpgate.VaultCredentials(testenv.ServicePool(t, s.DatabaseURL, "mcp"), p.Exchange(), nil), Revoked: mcpgate.VaultRevocations(testenv.ServicePool(t, s.DatabaseURL, "mcp")),
		Resource: srv.URL + mcpgate.Path, AuthorizationServer: p.URL, Logger: zap.NewNop()}).Handler()
	tok, err := idp.SignIn(ctx, p.URL, testenv.MCPClientID, p.Users["noor"], "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: srv.URL + mcpgate.Path, HTTPClient: testenv.Bearer(tok.AccessToken)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := json.RawMessage(`{"path":` + strconv.Quote(note) + `}`)
	direct, err := mcpupstream.Dial(ctx, set.Servers["files"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	bm = &bareMCP{conn: direct, args: args}
	queue := s.TaskQueue + "-bare-mcp"
	bw := worker.New(s.Client, queue, worker.Options{})
	bw.RegisterWorkflow(BareMCPRead)
	bw.RegisterActivity(bm)
	if err := bw.Start(); err != nil {
		t.Fatal(err)
	}
	defer bw.Stop()

	viaGateway := func() time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files__read_text_file", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("through the gateway: %v %+v", err, res)
		}
		return time.Since(start)
	}
	viaServer := func() time.Duration {
		start := time.Now()
		if res, err := direct.Call(ctx, "read_text_file", args, ""); err != nil || res.IsError {
			t.Fatalf("straight to the server: %v %+v", err, res)
		}
		return time.Since(start)
	}
	viaBare := func(i int) time.Duration {
		start := time.Now()
		run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprint("bare-mcp-", i), TaskQueue: queue}, BareMCPRead)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := run.Get(ctx, &out); err != nil || out == "" {
			t.Fatalf("the bare workflow: %v %q", err, out)
		}
		return time.Since(start)
	}
	viaGateway() // warm up: the first call issues the sign-in's credential and starts the worker's server
	viaServer()
	viaBare(-1)
	var g, d, b series
	for i := range reads {
		g = append(g, viaGateway())
		d = append(d, viaServer())
		b = append(b, viaBare(i))
	}
	rows := [][]string{
		{"allowed read p50 (ms)", f(ms(g.pct(0.5))), f(ms(d.pct(0.5))), f(ms(b.pct(0.5))), ratio(ms(g.pct(0.5)), ms(d.pct(0.5))), ratio(ms(g.pct(0.5)), ms(b.pct(0.5)))},
		{"allowed read p99 (ms)", f(ms(g.pct(0.99))), f(ms(d.pct(0.99))), f(ms(b.pct(0.99))), ratio(ms(g.pct(0.99)), ms(d.pct(0.99))), ratio(ms(g.pct(0.99)), ms(b.pct(0.99)))},
	}
	md := fmt.Sprintf("toolgate as an MCP gateway in front of the official filesystem server (read_text_file), %d allowed reads each way, interleaved, on the %s\n\n"+
		"| measure | through toolgate's /mcp | straight to the server | bare workflow + one activity | toolgate / straight | toolgate / bare |\n|---|---|---|---|---|---|\n", reads, server())
	for _, r := range rows {
		md += fmt.Sprintf("| %s |\n", joinCells(r))
		t.Logf("| %s |", joinCells(r))
	}
	_ = os.MkdirAll(filepath.Join("..", "results"), 0o755)
	_ = os.WriteFile(filepath.Join("..", "results", "mcp-gateway.md"), []byte(md), 0o644)
}

func joinCells(r []string) string {
	out := r[0]
	for _, c := range r[1:] {
		out += " | " + c
	}
	return out
}
