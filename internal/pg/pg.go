// Package pg opens the PostgreSQL pools the services use.
package pg

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The roles the services log in as (migration 007). None owns a table or is
// a superuser, so the audit log's triggers and grants hold against them.
const (
	WorkerRole    = "toolgate_worker"
	ApprovalsRole = "toolgate_approvals"
	UpstreamRole  = "toolgate_upstream"
	// MCPRole (migration 018) may only issue credentials for sign-ins.
	MCPRole = "toolgate_mcp"
	// AuditorRole (migration 019) may SELECT the audit log and nothing else:
	// the insights page, starter explain and starter export-evals.
	AuditorRole = "toolgate_auditor"
	// RetentionRole (migration 028) archives and drops whole months of the
	// audit log through two functions, and nothing else; no service holds it.
	RetentionRole = "toolgate_retention"
)

// ServiceURL is the owner's URL with the user replaced by role and the
// password dropped: the default connection of a service, for a server that
// authenticates local roles (trust, peer or a .pgpass file).
func ServiceURL(ownerURL, role string) (string, error) {
	u, err := url.Parse(ownerURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("DATABASE_URL %q is not a postgres:// URL", redactURL(ownerURL))
	}
	u.User = url.User(role)
	return u.String(), nil
}

// Open returns a pool with the URL's own role: for migrations and the tests'
// owner connections.
func Open(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	return open(ctx, databaseURL, nil)
}

// serial are the settings of a service whose every query is a short one on
// the path of a call (admission, a card, the inbox): never a parallel plan,
// whose workers cost more to start than such a query takes (a limit's count
// took 43 ms in parallel and 3.8 ms without, on a log of 5 million rows).
var serial = map[string]string{"max_parallel_workers_per_gather": "0"}

func open(ctx context.Context, databaseURL string, params map[string]string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database %s as %s: %w", cfg.ConnConfig.Database, cfg.ConnConfig.User, err)
	}
	return pool, nil
}

// OpenService returns a service's pool and refuses one whose role could
// undo the audit log's guarantees: a superuser, or the owner of audit_log
// (or a member of the owner's role).
func OpenService(ctx context.Context, databaseURL, service string) (*pgxpool.Pool, error) {
	var params map[string]string
	if service != "auditor" && service != "retention" { // theirs are long reads, which parallel plans serve
		params = serial
	}
	pool, err := open(ctx, databaseURL, params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", service, err)
	}
	var user string
	var super, owns bool
	err = pool.QueryRow(ctx, `SELECT current_user, r.rolsuper,
		coalesce((SELECT pg_has_role(current_user, c.relowner, 'MEMBER') FROM pg_class c WHERE c.oid = to_regclass('audit_log')), false)
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&user, &super, &owns)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: check its database role: %w", service, err)
	}
	if super || owns {
		pool.Close()
		return nil, fmt.Errorf("%s connects as %s, a superuser or the audit log's owner, which could rewrite the audit log; give it its own role (%s by default, from migration 007)",
			service, pgx.Identifier{user}.Sanitize(), RoleOf(service))
	}
	return pool, nil
}

// RoleOf is a service's own role ("worker", "approvals", "upstream", "mcp", "auditor", "retention"), or "".
func RoleOf(service string) string {
	return map[string]string{"worker": WorkerRole, "approvals": ApprovalsRole, "upstream": UpstreamRole, "mcp": MCPRole, "auditor": AuditorRole,
		"retention": RetentionRole}[service]
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparseable)"
}
