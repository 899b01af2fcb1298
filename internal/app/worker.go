package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
)

// Worker runs the ToolCall workflow and its activities on every task queue
// the packs' calls run on, with the metrics and codec endpoints beside it.
func Worker(log *zap.Logger, cfg config.Config) error {
	if why := cfg.CodecEndpointProblem(); why != "" {
		return errors.New(why)
	}
	ctx, stop := stopping()
	defer stop()
	pool, err := cfg.OpenPool(ctx, "worker")
	if err != nil {
		return fmt.Errorf("%w (is PostgreSQL up and migrated? make migrate)", err)
	}
	defer pool.Close()
	if err := requireSchema(ctx, pool); err != nil {
		return err
	}
	m, err := metrics.New(pool, log)
	if err != nil {
		return err
	}
	go serve(log, "metrics", cfg.MetricsAddr, metricsMux(m))
	go maintainAuditLog(ctx, pool, log)
	opts := withLogger(cfg.ClientOptions(), log)
	opts.MetricsHandler = m.SDK
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return cfg.DialError(err)
	}
	defer c.Close()
	if cfg.Codec == nil {
		log.Warn("TOOLGATE_CODEC_KEYS is empty: payloads are stored in plaintext (starter keygen makes a key)")
	} else {
		if cfg.CodecAuthToken == "" {
			log.Warn("CODEC_AUTH_TOKEN is not set: the codec endpoint decrypts for anyone who reaches it (dev mode only)")
		}
		go serve(log, "codec endpoint", cfg.CodecAddr, cfg.Codec.Handler(cfg.CodecOrigins, cfg.CodecAuthToken))
	}
	if len(cfg.ApprovalKeys) == 0 {
		log.Warn("TOOLGATE_APPROVAL_KEYS is empty: every approval decision will be refused (starter keygen makes a key pair)")
	}
	if len(cfg.ApproverIssuers) == 0 {
		log.Warn("TOOLGATE_APPROVER_ISSUERS is empty: no identity provider is trusted, so every approval decision will be refused (set it to the card UI's APPROVALS_OIDC_ISSUER)")
	}
	// Process-wide in the SDK: it bounds memory when many cards wait at once.
	worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	acts := activities.New(cfg.Policy, pool, cfg.UpstreamURL, sanitize.Sanitizer{MaxChars: cfg.MaxResultChars}, log, c)
	acts.Previewers, acts.Shapers, acts.Upstreams = cfg.Previewers, cfg.Shapers, cfg.Upstreams
	acts.Exchange, acts.Audiences = cfg.Exchange, cfg.Audiences
	acts.DevMode = cfg.DevMode // demo credentials (cred-ama) only in dev mode
	if len(cfg.MCPServers) > 0 {
		acts.MCP = activities.NewMCPServers(cfg.MCPServers, log)
		defer acts.MCP.Close()
	}
	if h := cfg.Webhook; h != nil {
		acts.Webhook = &activities.Webhook{URL: h.URL, Secret: h.Secret, CardsURL: h.CardsURL}
		log.Info("card events go to a webhook") // its URL may hold a token: not logged
	}
	settings := workflows.Settings{Policy: cfg.Policy, ApprovalTTL: cfg.ApprovalTTL, ApprovalKeys: cfg.ApprovalKeys, WithdrawKeys: cfg.WithdrawKeys, ApproverIssuers: cfg.ApproverIssuers,
		EscalateAfter: cfg.EscalateAfter, SignInTTL: cfg.SignInTTL, Webhooks: cfg.Webhook != nil}
	queues := cfg.Queues()
	log.Info("worker starting", zap.String("temporal", cfg.TemporalAddress), zap.String("namespace", cfg.Namespace), zap.Bool("tls", cfg.Temporal.ConnectionOptions.TLS != nil),
		zap.Strings("taskQueues", queues), zap.String("upstream", cfg.UpstreamURL))
	return runAll(c, queues, settings, acts)
}

// runAll runs one worker per task queue the packs' calls run on
// (TOOLGATE_TASK_QUEUES) until the process is interrupted or one of them
// fails; then every one stops at once, each letting its running
// activities finish, so stopping takes one worker's stop timeout, not one
// per queue.
func runAll(c client.Client, queues []string, s workflows.Settings, acts *activities.Activities) error {
	stop := make(chan any)
	errs := make(chan error, len(queues))
	for _, q := range queues {
		w := workflows.NewWorker(c, q, s, acts)
		go func() {
			if err := w.Run(stop); err != nil {
				errs <- fmt.Errorf("worker on task queue %s: %w", q, err)
				return
			}
			errs <- nil
		}()
	}
	var first error
	left := len(queues)
	select {
	case <-worker.InterruptCh():
	case first = <-errs:
		left--
	}
	close(stop)
	for ; left > 0; left-- {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// serve runs a side HTTP endpoint of the worker; failing to bind is logged, not fatal.
func serve(log *zap.Logger, what, addr string, h http.Handler) {
	srv := httpserver.New(addr, h)
	log.Info(what+" listening", zap.String("addr", addr))
	if err := srv.ListenAndServe(); err != nil {
		log.Error(what+" stopped", zap.String("addr", addr), zap.Error(err))
	}
}

func metricsMux(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

// requireSchema refuses a database this service's guarantees do not hold
// on: one older than the audit log by month (migration 028), whose one
// table needs the insert conflict target a worker no longer names, so a
// retried insert would fail the call instead of writing nothing; one
// without the limit ledger (029), which admission counts from; and one
// where the service's role may make temporary tables (030 revokes it), so
// that a table of its own could stand in for one the owner's functions
// write; and one whose limits count user IDs rather than people (033),
// where a decision row that names its person could not be written (033
// comes after 031's signed card versions and 032's bound seeded secrets);
// one that cannot record a withdrawn card (034), or spend an MCP
// requestState once (035).
// The worker, the card UI and the MCP server check it at start.
func requireSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var partitioned, ledger, temporary, versioned, personal, withdrawable, spendable bool
	var db string
	if err := pool.QueryRow(ctx, `SELECT to_regclass('public.audit_keys') IS NOT NULL, to_regclass('public.limit_usage') IS NOT NULL,
		has_database_privilege(current_database(), 'TEMPORARY'), current_database(),
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('public.pending_action') AND attname = 'signed_version' AND NOT attisdropped),
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('public.limit_usage') AND attname = 'requester_subject' AND NOT attisdropped),
		EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass('public.audit_log') AND conname = 'audit_log_event_check'
		        AND pg_get_constraintdef(oid) LIKE '%''withdrawn''%'),
		to_regprocedure('public.spend_mcp_request_state(text,timestamptz)') IS NOT NULL`).
		Scan(&partitioned, &ledger, &temporary, &db, &versioned, &personal, &withdrawable, &spendable); err != nil {
		return fmt.Errorf("read the database's schema: %w", err)
	}
	if !partitioned {
		return errors.New("the database is older than this service: its audit log is not yet by month (migration 028); run starter migrate (make migrate) as the owner first")
	}
	if !ledger {
		return errors.New("the database is older than this service: it has no limit ledger (migration 029); run starter migrate (make migrate) as the owner first")
	}
	if !versioned {
		return errors.New("the database is older than this service: its cards do not say which version a decision's signature names (migration 031); run starter migrate (make migrate) as the owner first")
	}
	if !personal {
		return errors.New("the database is older than this service: its limits count user IDs, not people (migration 033); run starter migrate (make migrate) as the owner first")
	}
	if !withdrawable {
		return errors.New("the database is older than this service: its audit log cannot say a card was withdrawn (migration 034); run starter migrate (make migrate) as the owner first")
	}
	if !spendable {
		return errors.New("the database is older than this service: an MCP requestState cannot be spent once (migration 035); run starter migrate (make migrate) as the owner first")
	}
	if temporary {
		return fmt.Errorf("this service's role may make temporary tables in database %s, so a table of its own could stand in for one the owner's functions write: run starter migrate (make migrate) as the owner (migration 030 revokes it), and where the owner does not own the database, run as the database's owner: REVOKE TEMPORARY ON DATABASE %s FROM PUBLIC",
			pgx.Identifier{db}.Sanitize(), pgx.Identifier{db}.Sanitize())
	}
	return nil
}

// auditMaintenanceEvery is how often the worker keeps the audit log: months
// ahead, closed days counted, and the limit ledger trimmed.
const auditMaintenanceEvery = 10 * time.Minute

// maintainAuditLog keeps the audit log (migration 028) at start and every
// auditMaintenanceEvery until ctx ends, each step its own transaction: its
// months three ahead (audit_log_add_months), and each day counted for the
// insights page an hour after it ends (audit_log_count_days), and the limit
// ledger rid of what no window reaches (limit_usage_trim). A failure is
// logged and tried again; an insert never waits on it (a row that finds no
// month makes the months at once, activities.insertAudit).
func maintainAuditLog(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) {
	tick := time.NewTicker(auditMaintenanceEvery)
	defer tick.Stop()
	for {
		if _, err := pool.Exec(ctx, `SELECT audit_log_add_months()`); err != nil && ctx.Err() == nil {
			log.Warn("audit log: the months ahead were not made; tried again", zap.Duration("in", auditMaintenanceEvery), zap.Error(err))
		}
		var days int
		if err := pool.QueryRow(ctx, `SELECT audit_log_count_days()`).Scan(&days); err != nil && ctx.Err() == nil {
			log.Warn("audit log: the closed days were not counted; tried again", zap.Duration("in", auditMaintenanceEvery), zap.Error(err))
		} else if days > 0 {
			log.Info("audit log: closed days counted for the insights page", zap.Int("days", days))
		}
		var trimmed int64
		if err := pool.QueryRow(ctx, `SELECT limit_usage_trim()`).Scan(&trimmed); err != nil && ctx.Err() == nil {
			log.Warn("limits: the ledger was not trimmed; tried again", zap.Duration("in", auditMaintenanceEvery), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
