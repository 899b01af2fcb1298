package testenv

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReferenceServer is the command that starts one of the official MCP
// reference servers from npm (examples/mcp, pinned by its lock file and
// installed by make node) over stdio: its bin name ("mcp-server-filesystem",
// "mcp-server-memory") and its args. Without Node.js or the package the
// test skips, or fails under TOOLGATE_REQUIRE_SERVICES=1.
func ReferenceServer(t testing.TB, bin string, args ...string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path, _ := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "examples", "mcp", "node_modules", ".bin", bin))
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(path); err != nil || nodeErr != nil {
		unavailable(t, "Node.js or the reference server %s is missing (make node installs it): %v %v", bin, err, nodeErr)
	}
	return append([]string{path}, args...)
}

// Build builds the named main packages of the module (e.g. "./worker")
// into a folder of the test's and returns it, for tests that run and kill
// toolgate's own processes.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %v: %v\n%s", pkgs, err, out)
	}
	return dir
}

// NotesServiceToken is the service credential the notes server takes
// besides the provider's tokens for NotesAudience.
const NotesServiceToken = "notes-service-credential-for-the-tests-only"

// NotesServer is an MCP server over streamable HTTP that is an OAuth
// resource server, as the MCP authorization spec has it: every request
// carries a bearer token, the provider's for NotesAudience (its subject is
// whom the call runs as) or NotesServiceToken ("service"). whoami (read
// only) answers with that subject. Tokens holds every token it was sent.
type NotesServer struct {
	mu     sync.Mutex
	tokens []string
}

// Tokens are the bearer tokens the server was sent, in order.
func (n *NotesServer) Tokens() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.tokens)
}

// Notes starts a NotesServer trusting the provider at issuer, and returns
// it with its MCP endpoint.
func Notes(t testing.TB, issuer string) (*NotesServer, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prov, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	verify := prov.Verifier(&oidc.Config{ClientID: NotesAudience}).Verify
	n := &NotesServer{}
	type whoami struct {
		Subject string `json:"subject"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Whom the call runs as.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{Subject: auth.TokenInfoFromContext(ctx).UserID}, nil
		})
	check := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		n.mu.Lock()
		n.tokens = append(n.tokens, token)
		n.mu.Unlock()
		if token == NotesServiceToken {
			return &auth.TokenInfo{UserID: "service", Expiration: time.Now().Add(time.Hour)}, nil
		}
		id, err := verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: id.Subject, Expiration: id.Expiry}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(auth.RequireBearerToken(check, nil)(h))
	t.Cleanup(hs.Close)
	return n, hs.URL + "/mcp"
}
