package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditLogIsAppendOnly: UPDATE, DELETE and TRUNCATE are refused for the
// app role and for the owner; the app role may INSERT and SELECT.
func TestAuditLogIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	app := testenv.AppPool(t, url)

	insert := `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
	           VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', $1)`
	if _, err := app.Exec(ctx, insert, "app"); err != nil {
		t.Fatalf("app role cannot insert: %v", err)
	}
	if _, err := owner.Exec(ctx, insert, "owner"); err != nil {
		t.Fatalf("owner cannot insert: %v", err)
	}
	for who, pool := range map[string]*pgxpool.Pool{"app": app, "owner": owner} {
		for _, stmt := range []string{
			`UPDATE audit_log SET reason = 'ok'`,
			`UPDATE audit_log SET reason = 'ok' WHERE id = -1`,
			`DELETE FROM audit_log`,
			`TRUNCATE audit_log`,
		} {
			if _, err := pool.Exec(ctx, stmt); err == nil {
				t.Errorf("%s: %q was allowed", who, stmt)
			}
		}
	}
	var n int
	if err := app.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after the attempts: %d (%v), want 2", n, err)
	}
	if _, err := app.Exec(ctx, insert, "app"); err == nil {
		t.Fatal("a second row with the same event key was written")
	}
}

// TestMigrationsAreIdempotent: applying twice changes nothing and fails nothing.
func TestMigrationsAreIdempotent(t *testing.T) {
	url := testenv.Database(t)
	if err := testenv.Migrate(url); err != nil {
		t.Fatal(err)
	}
}
