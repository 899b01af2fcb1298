package mcpgate_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
)

// conformance is the official conformance suite (testdata/conformance:
// the npm package pinned by its lock file, and Node 22 from npm, which it
// needs), or a skip when it is not installed and services are not required.
func conformance(t *testing.T) (node, cli, dir string) {
	t.Helper()
	dir, _ = filepath.Abs("testdata/conformance")
	bin := filepath.Join(dir, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "conformance")); err != nil {
		if testenv.Required() {
			t.Fatalf("TOOLGATE_REQUIRE_SERVICES=1 but the conformance suite is missing (make node installs it): %v", err)
		}
		t.Skip("skipped: no conformance suite (make node)")
	}
	return filepath.Join(bin, "node"), filepath.Join(bin, "conformance"), dir
}

// serverScenarios are the suite's server scenarios this test runs: every
// input-required result and tasks scenario, the stateless lifecycle of
// 2026-07-28 and its custom headers, as the suite lists them.
func serverScenarios(t *testing.T, ctx context.Context) []string {
	t.Helper()
	node, cli, dir := conformance(t)
	cmd := exec.CommandContext(ctx, node, cli, "list")
	cmd.Dir = dir
	listed, err := cmd.Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	var out []string
	server := false
	for _, line := range strings.Split(string(listed), "\n") {
		if !strings.HasPrefix(line, " ") {
			server = strings.HasPrefix(line, "Server scenarios")
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "- "), " ")
		if server && (strings.HasPrefix(name, "input-required-result-") || strings.HasPrefix(name, "tasks-") ||
			name == "server-stateless" || name == "http-custom-header-server-validation") {
			out = append(out, name)
		}
	}
	return out
}

// runConformance runs one server scenario against serverURL with the
// baseline of checks toolgate does not pass yet (testdata/conformance/
// baseline.yml), and returns whether it passed, its checks and what it
// printed.
func runConformance(t *testing.T, ctx context.Context, serverURL, scenario string) (bool, []conformanceCheck, string) {
	t.Helper()
	node, cli, dir := conformance(t)
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", serverURL, "--scenario", scenario, "--expected-failures", "baseline.yml", "-o", out)
	cmd.Dir = dir
	printed, err := cmd.CombinedOutput()
	var checks []conformanceCheck
	_ = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			b, _ := os.ReadFile(path)
			var some []conformanceCheck
			if json.Unmarshal(b, &some) == nil {
				checks = append(checks, some...)
			}
		}
		return nil
	})
	return err == nil, checks, string(printed)
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID, Status, ErrorMessage string
}

// TestTheConformanceSuite runs the official MCP conformance suite's server
// scenarios (every input-required result and tasks scenario, and the
// stateless lifecycle) against toolgate's front door, through the real
// stack, signed in as ama: the suite has no OAuth of its own, so a
// loopback proxy adds her bearer token to each request. Each scenario must
// pass but for the checks its baseline names, and a named check that
// starts to pass fails the run until its entry goes.
func TestTheConformanceSuite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	scenarios := serverScenarios(t, ctx)
	if len(scenarios) < 26 {
		t.Fatalf("the suite lists %d of the scenarios, not 26 or more: %v", len(scenarios), scenarios)
	}
	g := newGate(t, 0)
	target, _ := url.Parse(g.url)
	token := g.token(t, "ama", idp.ACRPassword)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	var passed int
	for _, scenario := range scenarios {
		ok, checks, printed := runConformance(t, ctx, front.URL+"/mcp", scenario)
		if !ok {
			t.Errorf("%s did not pass (beyond its baseline):\n%s", scenario, printed)
			continue
		}
		for _, c := range checks {
			if c.Status == "SUCCESS" {
				passed++
			}
		}
	}
	t.Logf("%d scenarios, %d checks passed", len(scenarios), passed)
}
