// Package testenv starts the real parts integration tests need: a fresh
// PostgreSQL database with migrations, the Mangrove upstream on a real HTTP
// port, a Temporal dev server on a free port, and a worker. Without a
// service the tests skip, unless TOOLGATE_REQUIRE_SERVICES=1 (set by
// `make test` and .ci/run), where they fail.
package testenv

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/logging"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/pg"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/migrations"
	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/packs/mangrove/upstream"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// ApprovalSigner signs the tests' decisions; ApprovalKeys verify them.
var ApprovalSigner, ApprovalKeys = func() (signoff.Signer, signoff.ApprovalKeys) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	return signoff.Signer{KeyID: "test", Key: priv}, signoff.ApprovalKeys{"test": pub}
}()

// Issuer is the identity provider the tests' workers trust for approvers'
// sign-ins (TOOLGATE_APPROVER_ISSUERS).
const Issuer = "https://id.toolgate.test"

// Sign signs a decision for a card, now. A decision without evidence gets
// a fresh mfa sign-in at Issuer as its approver, which any card accepts.
func Sign(a signoff.Approval, card signoff.CardRef) signoff.Approval {
	return SignAt(a, card, time.Now())
}

// SignAt signs a decision as if at time at, signed in then (see Sign).
func SignAt(a signoff.Approval, card signoff.CardRef, at time.Time) signoff.Approval {
	if a.Evidence == nil {
		a.Evidence = Evidence(a.Approver.UserID, at)
	}
	return ApprovalSigner.Sign(a, card, at.UTC().Format(time.RFC3339))
}

// Evidence is an mfa sign-in of user at Issuer at time at.
func Evidence(user string, at time.Time) *signoff.AuthEvidence {
	return &signoff.AuthEvidence{Issuer: Issuer, Subject: user, ACR: policy.ACRMFA, AMR: []string{"pwd", "otp"}, AuthTime: at.UTC().Format(time.RFC3339)}
}

// SigningKeyEnv is the tests' TOOLGATE_APPROVAL_SIGNING_KEY, for processes.
func SigningKeyEnv() string {
	return ApprovalSigner.KeyID + ":" + base64.StdEncoding.EncodeToString(ApprovalSigner.Key)
}

// CodecKeys is the tests' TOOLGATE_CODEC_KEYS. The key is fixed, so
// histories recorded by tests (the golden files) stay readable later.
const CodecKeys = "test:dG9vbGdhdGUtdGVzdC1rZXktb25seS1mb3ItdGVzdHM="

// WithdrawSigner signs the tests' MCP servers' withdrawals; WithdrawKeys
// verify them, and a withdrawal alone.
var WithdrawSigner, WithdrawKeys = func() (signoff.Signer, signoff.ApprovalKeys) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	return signoff.Signer{KeyID: "test-withdraw", Key: priv}, signoff.ApprovalKeys{"test-withdraw": pub}
}()

// ApprovalKeysEnv is the tests' TOOLGATE_APPROVAL_KEYS, for worker processes.
func ApprovalKeysEnv() string {
	return "test:" + base64.StdEncoding.EncodeToString(ApprovalKeys["test"])
}

// Codec encrypts the tests' payloads.
var Codec = func() *codec.Codec {
	c, err := codec.Parse(CodecKeys, "")
	if err != nil {
		panic(err)
	}
	return c
}()

// CodecServer serves the codec endpoint on a loopback port, for CLI calls.
func CodecServer(t testing.TB) string {
	srv := httptest.NewServer(Codec.Handler([]string{"http://localhost:8233"}, ""))
	t.Cleanup(srv.Close)
	return srv.URL
}

// UpstreamKey signs the test upstream's tokens.
var UpstreamKey = []byte("test-upstream-signing-key")

// Required reports whether missing services must fail the tests.
func Required() bool { return os.Getenv("TOOLGATE_REQUIRE_SERVICES") == "1" }

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("TOOLGATE_REQUIRE_SERVICES=1 but "+format, args...)
	}
	t.Skipf("skipped: "+format+" (set TOOLGATE_REQUIRE_SERVICES=1 to fail instead)", args...)
}

// ServerURL is the PostgreSQL server tests create their databases on:
// TOOLGATE_TEST_DATABASE_URL (make test's private cluster), else the server
// of DATABASE_URL, else 127.0.0.1:5432.
func ServerURL() string {
	if v := os.Getenv("TOOLGATE_TEST_DATABASE_URL"); v != "" {
		return v
	}
	if v := os.Getenv("DATABASE_URL"); v != "" {
		if u, err := url.Parse(v); err == nil && u.Scheme != "" {
			u.Path = "/postgres"
			return u.String()
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// Migrate applies the migrations to url.
func Migrate(url string) error {
	return migrateTo(url, -1)
}

func migrateTo(url string, version int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return migrations.ApplyTo(ctx, url, version)
}

// Database creates a fresh, migrated database for the test and drops it after.
func Database(t testing.TB) string {
	t.Helper()
	return DatabaseAt(t, -1)
}

// DatabaseAt is Database migrated up to version alone (every migration
// when negative): where an upgrade test starts.
func DatabaseAt(t testing.TB, version int32) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		unavailable(t, "PostgreSQL is not reachable at %s: %v", ServerURL(), err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "toolgate_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	cfg, _ := pgx.ParseConfig(ServerURL())
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), ServerURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	// Test packages run in parallel processes; the migrations create
	// cluster-wide roles, and two first runs on a fresh cluster race on them
	// (a unique violation in pg_authid). One migration at a time.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		t.Fatalf("lock migrations: %v", err)
	}
	err = migrateTo(url, version)
	_, _ = admin.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrateLock)
	if err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	return url
}

// migrateLock serializes the test processes' migrations (in the server's
// postgres database, which they all connect to first).
const migrateLock = 7_431_001

// Services are the processes, and starter retention, that log in with their
// own database role.
var Services = []string{"worker", "approvals", "upstream", "mcp", "auditor", "retention"}

// ServicePool opens a pool as the service does: its own role, checked to be
// neither a superuser nor the audit log's owner.
func ServicePool(t testing.TB, url, service string) *pgxpool.Pool {
	t.Helper()
	u, err := pg.ServiceURL(url, pg.RoleOf(service))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pg.OpenService(context.Background(), u, service)
	if err != nil {
		t.Fatalf("%s pool: %v", service, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AppPool opens the worker's pool.
func AppPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	return ServicePool(t, url, "worker")
}

// OwnerPool opens a pool with the URL's own role.
func OwnerPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("owner pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Upstream starts the Mangrove demo on a real loopback port.
func Upstream(t testing.TB, url string) *httptest.Server {
	t.Helper()
	return UpstreamWith(t, url, nil)
}

// UpstreamWith starts the Mangrove demo with its handler wrapped (nil: as is),
// for tests that slow or watch the upstream.
func UpstreamWith(t testing.TB, url string, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	h := (&upstream.Server{Pool: ServicePool(t, url, "upstream"), Key: UpstreamKey, Logger: zaptest.NewLogger(t)}).Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TemporalCLI finds the temporal binary: $TOOLGATE_TEMPORAL_CLI, the repo's bin/, or PATH.
func TemporalCLI() (string, error) {
	if p := os.Getenv("TOOLGATE_TEMPORAL_CLI"); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	local := filepath.Join(filepath.Dir(file), "..", "..", "bin", "temporal")
	if _, err := os.Stat(local); err == nil {
		return local, nil
	}
	return exec.LookPath("temporal")
}

var (
	devOnce   sync.Once
	devServer *devServerProcess
	devErr    error
	// existing is the server the tests target instead of a dev server of
	// their own (Configured), and its client.
	existing       string
	existingClient client.Client
	// namespace is the tests' namespace: default on the dev server, the
	// configured one on an existing server.
	namespace = config.DefaultNamespace
)

// Configured reports whether the tests use the Temporal server that
// Temporal's client configuration names (TEMPORAL_ADDRESS, a profile, TLS)
// instead of starting a dev server: TOOLGATE_TEST_TEMPORAL=configured, set
// by make test-cluster and make bench-cluster.
func Configured() bool { return os.Getenv("TOOLGATE_TEST_TEMPORAL") == "configured" }

// ExistingAddress is the configured server's address once a test has
// reached it ("" on the dev server).
func ExistingAddress() string { return existing }

// SecondNamespace is a namespace besides default on the tests' dev server,
// with toolgate's search attributes, for tests of a configured namespace.
const SecondNamespace = "toolgate-tls"

// Namespace is the namespace the tests' calls run in.
func Namespace() string { return namespace }

// DevServerArgs are the dev server flags toolgate runs with everywhere.
var DevServerArgs = []string{
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	// One task-queue partition: with the default four and a worker's two
	// pollers, a first workflow task written to a partition nobody polls
	// waited about 2 s to be forwarded (7 of 600 reads, BENCHMARKS.md).
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	// Bounds on what anyone with namespace access can pile onto one call:
	// 1,000 signals per run and 256 KB per payload keep a flooded card's
	// history far under Temporal's 50 MB limit (workflows.MaxRefusedDecisions
	// ends it long before).
	"--dynamic-config-value", "history.maximumSignalsPerExecution=1000",
	"--dynamic-config-value", "limit.blobSize.error=262144",
}

// Temporal returns a client of a dev server shared by the test binary,
// started on a free port from the CLI found by TemporalCLI; or, when
// Configured, of the server Temporal's client configuration names (make
// test-cluster's cluster), whose namespace and search attributes must
// already be set up, and which must hold no earlier run's calls (tests use
// fixed workflow IDs).
func Temporal(t testing.TB) client.Client {
	t.Helper()
	devOnce.Do(func() {
		if Configured() {
			opts, err := config.TemporalClient()
			if err != nil {
				devErr = err
				return
			}
			opts.Logger = sdkLogger
			existing, namespace = opts.HostPort, opts.Namespace
			existingClient, devErr = client.Dial(opts)
			return
		}
		path, err := TemporalCLI()
		if err != nil {
			devErr = fmt.Errorf("no temporal CLI (run make tools): %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append([]string{}, DevServerArgs...)
		for _, sa := range workflows.SearchAttributes() {
			args = append(args, "--search-attribute", sa.Name+"="+sa.Type)
		}
		args = append(args, "--namespace", SecondNamespace)
		devServer, devErr = startDevServer(ctx, path, args)
	})
	if devErr != nil {
		unavailable(t, "the Temporal server could not be reached or started: %v", devErr)
	}
	base := existingClient
	if base == nil {
		base = devServer.Client()
	}
	c, err := client.NewClientFromExisting(base, client.Options{Namespace: namespace, DataConverter: Codec.DataConverter(), Logger: sdkLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TemporalAddress is the shared dev server's frontend, for CLI calls in tests.
func TemporalAddress(t testing.TB) string {
	Temporal(t)
	if existing != "" {
		return existing
	}
	return devServer.FrontendHostPort()
}

// sdkLogger keeps the SDK's lines in tests to warnings and errors
// (TOOLGATE_TEST_LOG=debug for all of them).
var sdkLogger = func() log.Logger {
	level := zap.WarnLevel
	if os.Getenv("TOOLGATE_TEST_LOG") == "debug" {
		level = zap.DebugLevel
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	l, err := cfg.Build()
	if err != nil {
		l = zap.NewNop()
	}
	return logging.Temporal(l)
}()

// Main runs the tests and then stops the shared dev server.
func Main(m *testing.M) {
	code := m.Run()
	if devServer != nil {
		_ = devServer.Stop()
	}
	if existingClient != nil {
		existingClient.Close()
	}
	os.Exit(code)
}

// Stack is everything one integration test drives.
type Stack struct {
	DatabaseURL string
	Owner       *pgxpool.Pool
	App         *pgxpool.Pool
	Upstream    *httptest.Server
	Client      client.Client
	// Policy is the packs the stack's worker gates (Policy unless
	// StackOptions.Policy says otherwise).
	Policy     *policy.Policy
	TaskQueue  string
	Logs       *observer.ObservedLogs
	Activities *activities.Activities
	settings   workflows.Settings
	worker     worker.Worker
}

// Shipped is the packs the tests gate by default, the shipped ones;
// Policy is their policy.
var (
	Shipped = packs.MustLoad(packs.Default)
	Policy  = Shipped.Policy
)

// Mangrove is the policy of the Mangrove pack after edit changed it (a
// row's limit, a tool's spec): what a test that changes the table runs.
func Mangrove(t testing.TB, edit func(*policy.Pack)) *policy.Policy {
	t.Helper()
	d := mangrove.Policy()
	edit(&d)
	p, err := policy.New(d)
	if err != nil {
		t.Fatalf("the edited Mangrove pack: %v", err)
	}
	return p
}

// UsePolicy restarts the stack's worker gating p: the calls in flight
// carry their recorded verdicts, new calls are judged by p.
func (s *Stack) UsePolicy(t testing.TB, p *policy.Policy) {
	t.Helper()
	s.StopWorker()
	s.Policy, s.settings.Policy, s.Activities.Policy = p, p, p
	s.StartWorker(t)
}

// NewStack starts a database, the upstream, and a worker on its own task
// queue of the shared dev server, with the default approval TTL.
func NewStack(t testing.TB) *Stack {
	t.Helper()
	return NewStackTTL(t, 0)
}

// NewStackTTL is NewStack with the worker's approval TTL set.
func NewStackTTL(t testing.TB, ttl time.Duration) *Stack {
	t.Helper()
	return NewStackWith(t, StackOptions{ApprovalTTL: ttl})
}

// StackOptions change how NewStackWith builds the stack.
type StackOptions struct {
	ApprovalTTL time.Duration
	// Policy, when set, is the packs the worker gates instead of Policy;
	// Shapers, when set, reshape their answers (packs.Set.Shapers).
	Policy  *policy.Policy
	Shapers map[string]pack.Shaper
	// Previewers, when set, are the packs' dry runs (packs.Set.Previewers).
	Previewers map[string]pack.Previewer
	// MCPServers, when set, are the packs' own MCP servers (packs.Set.Servers).
	MCPServers map[string]mcpupstream.Server
	// Metrics, when set, receives the worker's and client's SDK metrics.
	Metrics client.MetricsHandler
	// WorkflowCacheSize, when set, caps the worker's sticky cache (process-wide).
	WorkflowCacheSize int
	// UpstreamWrap, when set, wraps the upstream's handler.
	UpstreamWrap func(http.Handler) http.Handler
	// ApproverIssuers are identity providers the worker trusts besides Issuer.
	ApproverIssuers []string
	// SignInTTL is how long a call waits for a sign-in (the default when zero).
	SignInTTL time.Duration
	// Webhook, when set, hears about cards.
	Webhook *activities.Webhook
	// EscalateAfter is the worker's escalation fraction (the default when zero; 1 never escalates).
	EscalateAfter float64
	// Upstreams give packs their own upstream, by pack name (TOOLGATE_UPSTREAMS).
	Upstreams map[string]string
	// Exchange and Audiences: the packs whose upstreams take the
	// provider's tokens, each with its audience (TOOLGATE_EXCHANGE_*).
	Exchange  *exchange.Client
	Audiences map[string]string
}

// NewStackWith starts a stack with options.
func NewStackWith(t testing.TB, o StackOptions) *Stack {
	t.Helper()
	ttl := o.ApprovalTTL
	if o.WorkflowCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(o.WorkflowCacheSize)
	}
	s := &Stack{DatabaseURL: Database(t)}
	s.Owner = OwnerPool(t, s.DatabaseURL)
	s.App = AppPool(t, s.DatabaseURL)
	s.Upstream = UpstreamWith(t, s.DatabaseURL, o.UpstreamWrap)
	s.Client = Temporal(t)
	if o.Metrics != nil {
		c, err := client.NewClientFromExisting(s.Client, client.Options{Namespace: namespace, DataConverter: Codec.DataConverter(), MetricsHandler: o.Metrics, Logger: sdkLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		s.Client = c
	}
	core, logs := observer.New(zap.DebugLevel)
	s.Logs = logs
	s.Policy = Policy
	if o.Policy != nil {
		s.Policy = o.Policy
	}
	s.Activities = NewActivities(s.App, s.Upstream.URL, zap.New(core))
	s.Activities.Policy = s.Policy
	if o.Shapers != nil {
		s.Activities.Shapers = o.Shapers
	}
	if o.Previewers != nil {
		s.Activities.Previewers = o.Previewers
	}
	if o.MCPServers != nil {
		s.Activities.MCP = activities.NewMCPServers(o.MCPServers, zap.New(core))
		t.Cleanup(s.Activities.MCP.Close)
	}
	s.Activities.Temporal = s.Client
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	s.TaskQueue = "toolgate-test-" + hex.EncodeToString(b)
	s.Activities.Webhook, s.Activities.Upstreams = o.Webhook, o.Upstreams
	s.Activities.Exchange, s.Activities.Audiences = o.Exchange, o.Audiences
	s.settings = workflows.Settings{Policy: s.Policy, ApprovalTTL: ttl, ApprovalKeys: ApprovalKeys, WithdrawKeys: WithdrawKeys, ApproverIssuers: append([]string{Issuer}, o.ApproverIssuers...), SignInTTL: o.SignInTTL,
		Webhooks: o.Webhook != nil, EscalateAfter: o.EscalateAfter}
	s.StartWorker(t)
	t.Cleanup(s.StopWorker)
	return s
}

// StartWorker starts a worker on the stack's task queue (after StopWorker).
func (s *Stack) StartWorker(t testing.TB) {
	t.Helper()
	w := workflows.NewWorker(s.Client, s.TaskQueue, s.settings, s.Activities)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	s.worker = w
}

// AddWorker starts one more worker on the stack's task queue, in this
// process, stopped when the test ends (the benchmarks' second worker).
func (s *Stack) AddWorker(t testing.TB) {
	t.Helper()
	w := workflows.NewWorker(s.Client, s.TaskQueue, s.settings, s.Activities)
	if err := w.Start(); err != nil {
		t.Fatalf("start a second worker: %v", err)
	}
	t.Cleanup(w.Stop)
}

// StopWorker stops the stack's worker; calls wait until one starts again.
func (s *Stack) StopWorker() {
	if s.worker != nil {
		s.worker.Stop()
		s.worker = nil
	}
}

// NewActivities builds the activities as a dev-mode worker does (without
// a Temporal client; NewStack sets one).
func NewActivities(pool *pgxpool.Pool, upstreamURL string, log *zap.Logger) *activities.Activities {
	a := activities.New(Policy, pool, upstreamURL, sanitize.Sanitizer{}, log, nil)
	a.Previewers, a.Shapers = Shipped.Previewers, Shipped.Shapers
	a.DevMode = true // the tests use the seeded demo credentials
	return a
}

// First starts (or attaches to) a ToolCall and returns its first outcome:
// the result of a call that ends without waiting, else what it waits for
// (a card, a sign-in).
func (s *Stack) First(t testing.TB, in workflows.ToolCallInput) workflows.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, in)
	if err != nil {
		t.Fatalf("call %s: %v", in.Tool, err)
	}
	return out
}

// Run starts (or attaches to) a ToolCall and waits for its result.
func (s *Stack) Run(t testing.TB, in workflows.ToolCallInput) workflows.ToolCallResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := workflows.Start(ctx, s.Client, s.Policy, s.TaskQueue, in)
	if err != nil {
		t.Fatalf("start %s: %v", in.Tool, err)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("%s: %v", in.Tool, err)
	}
	return res
}
