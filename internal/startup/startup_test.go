// Package startup_test starts the real processes the way a careless
// deployment would, and checks that they refuse to run on demo secrets,
// short secrets, without an OpenID provider, or the demo provider outside
// dev mode, and that every
// listener defaults to loopback.
package startup_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/mangrove/upstream"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// build compiles the three services once.
func build(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./worker", "./cmd/upstream", "./cmd/approvals", "./cmd/idp", "./cmd/mcp")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return dir
}

// start runs a service from an empty directory (no .dev/keys.env) with only
// the given environment and reports whether it is still running after a
// few seconds, and what it printed.
func start(t *testing.T, bin string, env []string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	out, err := cmd.CombinedOutput()
	return ctx.Err() != nil && err != nil, string(out)
}

// TestServicesRefuseDemoSecretsOutsideDevMode: without TOOLGATE_DEV=1, a
// service with a demo or short secret, the card UI without an OpenID
// provider (in dev mode too), or the demo provider, exits at once saying
// which variable to set.
func TestServicesRefuseDemoSecretsOutsideDevMode(t *testing.T) {
	dir := build(t)
	db := testenv.Database(t)
	base := []string{"DATABASE_URL=" + db, "TEMPORAL_ADDRESS=127.0.0.1:1", "UPSTREAM_ADDR=127.0.0.1:0", "APPROVALS_ADDR=127.0.0.1:0",
		"METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0"}
	strong := "UPSTREAM_TOKEN_KEY=" + strings.Repeat("k", 40)
	for _, c := range []struct {
		name, bin string
		env       []string
		mentions  string
	}{
		{"upstream with the demo key", "upstream", nil, "UPSTREAM_TOKEN_KEY"},
		{"upstream with the published demo key", "upstream", []string{"UPSTREAM_TOKEN_KEY=" + upstream.DemoKey}, "UPSTREAM_TOKEN_KEY"},
		{"upstream with a short key", "upstream", []string{"UPSTREAM_TOKEN_KEY=secret"}, "UPSTREAM_TOKEN_KEY"},
		{"card UI with a short session key", "approvals", []string{"APPROVALS_SESSION_KEY=short", "TOOLGATE_APPROVAL_SIGNING_KEY=" + testenv.SigningKeyEnv()}, "APPROVALS_SESSION_KEY"},
		{"card UI with no OpenID provider", "approvals", []string{"APPROVALS_SESSION_KEY=" + strings.Repeat("s", 40), "TOOLGATE_APPROVAL_SIGNING_KEY=" + testenv.SigningKeyEnv()}, "APPROVALS_OIDC_ISSUER"},
		{"card UI in dev mode with no OpenID provider", "approvals", []string{"TOOLGATE_DEV=1", "TOOLGATE_APPROVAL_SIGNING_KEY=" + testenv.SigningKeyEnv()}, "APPROVALS_OIDC_CLIENT_SECRET"},
		{"worker with an open codec endpoint", "worker", []string{"TOOLGATE_CODEC_KEYS=" + testenv.CodecKeys}, "CODEC_AUTH_TOKEN"},
		{"worker with a short codec token", "worker", []string{"TOOLGATE_CODEC_KEYS=" + testenv.CodecKeys, "CODEC_AUTH_TOKEN=short"}, "CODEC_AUTH_TOKEN"},
		{"MCP server with no OpenID provider", "mcp", nil, "MCP_OIDC_ISSUER"},
		{"MCP server with a bad wait", "mcp", []string{"MCP_OIDC_ISSUER=http://127.0.0.1:1", "MCP_MAX_WAIT=soon"}, "MCP_MAX_WAIT"},
		{"demo identity provider outside dev mode", "idp", []string{"IDP_CLIENT_SECRET=" + strings.Repeat("c", 40)}, "TOOLGATE_DEV"},
		{"demo identity provider with a short client secret", "idp", []string{"TOOLGATE_DEV=1", "IDP_USERS_FILE=users.json", "IDP_CLIENT_SECRET=short"}, "IDP_CLIENT_SECRET"},
	} {
		running, out := start(t, filepath.Join(dir, c.bin), append(append([]string{}, base...), c.env...))
		if running || !strings.Contains(out, c.mentions) {
			t.Errorf("%s: running=%v, output does not name %s:\n%.600s", c.name, running, c.mentions, out)
		}
	}
	// The same upstream with a strong key, and in dev mode with the demo key, runs.
	for name, env := range map[string][]string{"strong key": {strong}, "dev mode": {"TOOLGATE_DEV=1"}} {
		if running, out := start(t, filepath.Join(dir, "upstream"), append(append([]string{}, base...), env...)); !running {
			t.Errorf("upstream with a %s should run:\n%.600s", name, out)
		}
	}
}

// TestListenersDefaultToLoopback: every address a process listens on
// defaults to 127.0.0.1.
func TestListenersDefaultToLoopback(t *testing.T) {
	for _, k := range config.Vars {
		t.Setenv(k, "")
	}
	c, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(c)
	found := 0
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !strings.HasSuffix(name, "Addr") {
			continue
		}
		found++
		host, _, err := net.SplitHostPort(v.Field(i).String())
		if err != nil || host != "127.0.0.1" {
			t.Errorf("%s defaults to %q, not 127.0.0.1", name, v.Field(i).String())
		}
	}
	if found < 3 {
		t.Fatalf("only %d listen addresses in the config", found)
	}
	// The upstream reads its own settings.
	t.Setenv("TOOLGATE_DEV", "1")
	if u, err := upstream.SettingsFromEnv(); err != nil || u.Addr != "127.0.0.1:8081" {
		t.Errorf("the upstream defaults to %q (%v), not 127.0.0.1:8081", u.Addr, err)
	}
	t.Setenv("MCP_OIDC_ISSUER", "http://127.0.0.1:8082")
	if s, err := mcpgate.SettingsFromEnv(); err != nil || s.Addr != "127.0.0.1:8090" || s.Resource != "http://127.0.0.1:8090/mcp" {
		t.Errorf("the MCP server defaults to %q (%s, %v), not 127.0.0.1:8090", s.Addr, s.Resource, err)
	}
	if s := idp.SettingsFromEnv(); s.Addr != "127.0.0.1:8082" || s.Issuer != "http://127.0.0.1:8082" {
		t.Errorf("the demo identity provider defaults to %q (%s), not 127.0.0.1:8082", s.Addr, s.Issuer)
	}
}

// TestTheWorkerRefusesADatabaseBeforeItsMigrations: a worker started on a
// database whose audit log is not yet by month (migration 027), or that
// has no limit ledger (028), or where its role may make temporary tables,
// exits at once saying what to run, and starts on the migrated one: on the
// older table its inserts, which name no conflict target, would fail a
// retried call instead of writing nothing; without the ledger it could
// count no limit; without 031 it could write no card, without 033 no
// decision that names its person, without 034 no withdrawn card, without 035 no MCP requestState spent once; and a temporary
// table of its own could stand in for one the owner's functions write.
func TestTheWorkerRefusesADatabaseBeforeItsMigrations(t *testing.T) {
	dir := build(t)
	env := []string{"TEMPORAL_ADDRESS=127.0.0.1:1", "METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0"}
	running, out := start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 27)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 028") {
		t.Errorf("the worker on a database at migration 027: running=%v:\n%.600s", running, out)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 28)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 029") {
		t.Errorf("the worker on a database at migration 028: running=%v:\n%.600s", running, out)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 30)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 031") {
		t.Errorf("the worker on a database at migration 030: running=%v:\n%.600s", running, out)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 32)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 033") {
		t.Errorf("the worker on a database at migration 032: running=%v:\n%.600s", running, out)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 33)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 034") {
		t.Errorf("the worker on a database at migration 033: running=%v:\n%.600s", running, out)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.DatabaseAt(t, 34)}, env...))
	if running || !strings.Contains(out, "run starter migrate") || !strings.Contains(out, "migration 035") {
		t.Errorf("the worker on a database at migration 034: running=%v:\n%.600s", running, out)
	}
	// A database whose owner could not take temporary tables from PUBLIC
	// (migration 030 only warns when the owner does not own the database).
	open := testenv.Database(t)
	if _, err := testenv.OwnerPool(t, open).Exec(context.Background(), `DO $$ BEGIN EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO PUBLIC', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	running, out = start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + open}, env...))
	if running || !strings.Contains(out, "may make temporary tables") || !strings.Contains(out, "REVOKE TEMPORARY ON DATABASE") {
		t.Errorf("the worker on a database where its role may make temporary tables: running=%v:\n%.600s", running, out)
	}
	if _, out := start(t, filepath.Join(dir, "worker"), append([]string{"DATABASE_URL=" + testenv.Database(t)}, env...)); strings.Contains(out, "migration 0") {
		t.Errorf("the worker on a migrated database refused it:\n%.600s", out)
	}
}

// TestAPreviewRowWithLimitsIsRefusedAtStart: the worker binary, given the
// reference pack with limits on read_text_file (write_file's dry run),
// refuses to start, naming the row's limits and what to change: a dry
// run's read is not counted against them, so a caller at the limit would
// read on, a card at a time. The pack as published starts.
func TestAPreviewRowWithLimitsIsRefusedAtStart(t *testing.T) {
	dir := build(t)
	packDir := t.TempDir()
	body, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "packs", "reference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "packs", "reference.pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	const plain = "    policy: {roles: [writer, keeper], decision: allow}\n  - server: files\n    tool: list_directory\n"
	limited := strings.Replace(string(body), plain,
		"    policy: {roles: [writer, keeper], decision: allow, limits: [{scope: user, window: hour, maxCalls: 30}]}\n  - server: files\n    tool: list_directory\n", 1)
	if limited == string(body) {
		t.Fatal("the reference pack no longer reads as this test expects")
	}
	for name, text := range map[string]string{"published.yaml": string(body), "limited.yaml": limited} {
		if err := os.WriteFile(filepath.Join(packDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(packDir, strings.TrimSuffix(name, ".yaml")+".pins.json"), pins, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"DATABASE_URL=" + testenv.Database(t), "TEMPORAL_ADDRESS=127.0.0.1:1", "METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0",
		"TOOLGATE_SCRATCH=" + t.TempDir()}
	running, out := start(t, filepath.Join(dir, "worker"), append([]string{"TOOLGATE_PACKS=" + filepath.Join(packDir, "limited.yaml")}, env...))
	if running || !strings.Contains(out, "tools[0].policy.limits") || !strings.Contains(out, "dry run of files__write_file") {
		t.Errorf("the worker with a dry run's row that has limits: running=%v:\n%.800s", running, out)
	}
	if _, out := start(t, filepath.Join(dir, "worker"), append([]string{"TOOLGATE_PACKS=" + filepath.Join(packDir, "published.yaml")}, env...)); strings.Contains(out, "policy.limits") {
		t.Errorf("the worker refused the published reference pack:\n%.800s", out)
	}
}
