package migrations_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/pg"
	"github.com/toolgate/toolgate/internal/testenv"
)

// escapes are what a service's own connection might try, after a bug or an
// injection, to rewrite the audit log.
var escapes = append([]struct{ name, sql string }{
	{"reset role, then update", `RESET ROLE; UPDATE audit_log SET reason = 'ok'`},
	{"reset role, replica mode, update", `RESET ROLE; SET session_replication_role = replica; UPDATE audit_log SET reason = 'ok'`},
	{"reset role, disable triggers, delete", `RESET ROLE; ALTER TABLE audit_log DISABLE TRIGGER ALL; DELETE FROM audit_log`},
	{"become the superuser", `SET ROLE postgres; UPDATE audit_log SET reason = 'ok'`},
	{"replica mode skips triggers", `SET session_replication_role = replica; UPDATE audit_log SET reason = 'ok'`},
	{"disable the triggers", `ALTER TABLE audit_log DISABLE TRIGGER ALL; UPDATE audit_log SET reason = 'ok'`},
	{"drop the trigger", `DROP TRIGGER audit_log_no_update_delete ON audit_log; DELETE FROM audit_log`},
	{"replace the trigger function", `CREATE OR REPLACE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; DELETE FROM audit_log`},
	{"update", `UPDATE audit_log SET reason = 'ok'`},
	{"delete", `DELETE FROM audit_log`},
	{"truncate", `TRUNCATE audit_log`},
	{"drop the table", `DROP TABLE audit_log`},
	{"rename the table", `ALTER TABLE audit_log RENAME TO audit_log_old`},
	{"grant itself update", `GRANT UPDATE ON audit_log TO CURRENT_USER; UPDATE audit_log SET reason = 'ok'`},
	{"forget the event keys, so a replay writes twice", `DELETE FROM audit_keys`},
	{"plant an event key, so a row is never written", `INSERT INTO audit_keys VALUES (audit_key('wf', 'run', 'next'), now())`},
	{"record an archive", `SELECT audit_archive_record('audit_log_2000_01', 0, repeat('0', 64), repeat('0', 64), 'nowhere')`},
	{"backdate a row, into a month already archived", `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES (now() - interval '40 days', 'allowed', 'ok', 't', 'u', 'r', 's', 'c', 'wf2', 'run', 'k')`},
	{"choose a row's id", `INSERT INTO audit_log (id, event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES (1, 'allowed', 'ok', 't', 'u', 'r', 's', 'c', 'wf3', 'run', 'k')`},
	{"forget what a limit counted", `DELETE FROM limit_usage`},
	{"cheapen what a limit counted", `UPDATE limit_usage SET value_cents = 0`},
	{"plant a count that frees nothing", `INSERT INTO limit_usage (workflow_id, run_id, id, at, event, tool, user_id) VALUES ('wf', 'run', 0, now(), 'allowed', 't', 'u')`},
	{"stop the ledger", `ALTER TABLE audit_log DISABLE TRIGGER limit_usage_keep_row`},
	// A table of the session's own, named as one a SECURITY DEFINER function
	// writes, is found before it unless the function searches pg_temp last:
	// the function then writes the session's table, as the owner.
	{"shadow the event keys, so a replay writes twice", `CREATE TEMP TABLE audit_keys (key bytea, at timestamptz) ON COMMIT DROP;
		INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', 'k')`},
	{"shadow the limit ledger, so an admitted call is not counted", `CREATE TEMP TABLE limit_usage (workflow_id text, run_id text, id bigint, at timestamptz,
		event text, tool text, resource_kind text, resource_id text, user_id text, admitted_cents bigint, value_cents bigint) ON COMMIT DROP;
		INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES ('allowed', 'ok', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf-shadow', 'run', 'decision')`},
	{"forge a month's drop", `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES ('partition_dropped', 'retention', '', 'u', 'retention', '', '', 'retention:audit_log_2000_01', 'run', 'dropped')`},
}, monthEscapes(time.Now().UTC().Format("2006_01"))...)

// monthEscapes are the escapes through this month's partition.
func monthEscapes(month string) []struct{ name, sql string } {
	m := "audit_log_" + month
	return []struct{ name, sql string }{
		{"update this month", `UPDATE ` + m + ` SET reason = 'ok'`},
		{"delete this month's rows", `DELETE FROM ` + m},
		{"truncate this month", `TRUNCATE ` + m},
		{"detach this month", `ALTER TABLE audit_log DETACH PARTITION ` + m},
		{"drop this month", `DROP TABLE ` + m},
		{"drop this month as retention does", `SELECT audit_partition_drop('` + m + `', repeat('0', 64))`},
	}
}

// TestServicesCannotRewriteTheAuditLog runs every escape from each
// service's own connection, as the service opens it: each is refused, and
// the rows and triggers are as they were.
func TestServicesCannotRewriteTheAuditLog(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner := testenv.OwnerPool(t, url)
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', 'k'),
		       ('allowed', 'ok', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', 'k2')`); err != nil {
		t.Fatal(err)
	}
	for _, service := range testenv.Services {
		pool := testenv.ServicePool(t, url, service)
		for _, e := range escapes {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = conn.Exec(ctx, e.sql)
			conn.Release()
			if err == nil {
				t.Errorf("%s: %q was allowed", service, e.name)
			}
		}
	}
	var rows, reasons, triggers int
	_ = owner.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE reason = 'role') FROM audit_log`).Scan(&rows, &reasons)
	_ = owner.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'audit_log'::regclass AND tgenabled = 'O'`).Scan(&triggers)
	var keys, counted int
	_ = owner.QueryRow(ctx, `SELECT count(*) FROM audit_keys`).Scan(&keys)
	_ = owner.QueryRow(ctx, `SELECT count(*) FROM limit_usage WHERE workflow_id = 'wf' AND value_cents IS NULL`).Scan(&counted)
	// No update, no truncate, a resource on insert (migration 023), one row per event key (028),
	// the limit ledger (029).
	if rows != 2 || reasons != 1 || triggers != 5 || keys != 2 || counted != 1 {
		t.Fatalf("after the escapes: %d rows, %d unchanged, %d triggers enabled, %d event keys, %d calls the ledger counts", rows, reasons, triggers, keys, counted)
	}
}

// TestServicesRefuseAPowerfulRole: a service pointed at the owner's or a
// superuser's connection refuses to start, and no service role holds a
// privilege on audit_log beyond what it needs.
func TestServicesRefuseAPowerfulRole(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	for _, service := range testenv.Services {
		if pool, err := pg.OpenService(ctx, url, service); err == nil {
			pool.Close()
			t.Errorf("%s started on the owner's connection", service)
		} else if !strings.Contains(err.Error(), "own role") {
			t.Errorf("%s: %v", service, err)
		}
	}
	owner := testenv.OwnerPool(t, url)
	for _, role := range []string{pg.WorkerRole, pg.ApprovalsRole, pg.UpstreamRole, pg.MCPRole, pg.AuditorRole, pg.RetentionRole} {
		for _, priv := range []string{"UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
			var has bool
			if err := owner.QueryRow(ctx, `SELECT has_table_privilege($1, 'audit_log', $2)`, role, priv).Scan(&has); err != nil || has {
				t.Errorf("%s holds %s on audit_log (%v)", role, priv, err)
			}
		}
	}
}

// TestTheAuditorReadsTheAuditLogAndNothingElse: over every table, view,
// sequence and function of toolgate's schemas, the auditor's role holds
// SELECT on audit_log, the day counts made from it and the list of archived
// months, and no other privilege; from its own connection a
// write to the audit log, a read of a card, the vault or a session, and
// the MCP server's credential function are refused.
func TestTheAuditorReadsTheAuditLogAndNothingElse(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner := testenv.OwnerPool(t, url)
	rows, err := owner.Query(ctx, `SELECT c.oid::regclass::text, c.relkind::text, p.priv,
		CASE c.relkind WHEN 'S' THEN has_sequence_privilege($1, c.oid, p.priv) ELSE has_table_privilege($1, c.oid, p.priv) END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER', 'USAGE']) p(priv)
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND c.relkind IN ('r', 'v', 'm', 'p', 'S')
		AND ((c.relkind = 'S' AND p.priv IN ('SELECT', 'UPDATE', 'USAGE')) OR (c.relkind <> 'S' AND p.priv <> 'USAGE'))`, pg.AuditorRole)
	if err != nil {
		t.Fatal(err)
	}
	held, tables := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var rel, kind, priv string
		var has bool
		if err := rows.Scan(&rel, &kind, &priv, &has); err != nil {
			t.Fatal(err)
		}
		tables[rel] = true
		if has {
			held[rel+" "+priv] = true
		}
	}
	rows.Close()
	if len(tables) < 10 || !tables["vault.credentials"] || !tables["pending_action"] {
		t.Fatalf("the privilege scan saw only %v", tables)
	}
	// The log, the day counts made from it and the list of archived months.
	read := map[string]bool{"audit_log SELECT": true, "audit_daily SELECT": true, "audit_days SELECT": true, "audit_archives SELECT": true}
	if len(held) != len(read) || !maps.Equal(held, read) {
		t.Fatalf("the auditor holds %v; want SELECT on audit_log, audit_daily, audit_days and audit_archives alone", held)
	}
	var fns []string
	frows, err := owner.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND has_schema_privilege($1, n.oid, 'USAGE') AND has_function_privilege($1, p.oid, 'EXECUTE')
		AND p.prorettype <> 'trigger'::regtype`, pg.AuditorRole)
	if err != nil {
		t.Fatal(err)
	}
	for frows.Next() {
		var f string
		_ = frows.Scan(&f)
		fns = append(fns, f)
	}
	frows.Close()
	if len(fns) > 0 {
		t.Fatalf("the auditor may call %v", fns)
	}
	auditor := testenv.ServicePool(t, url, "auditor")
	if _, err := auditor.Exec(ctx, `SELECT count(*) FROM audit_log`); err != nil {
		t.Fatalf("the auditor cannot read the audit log: %v", err)
	}
	for _, stmt := range []string{
		`INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		 VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', 'auditor')`,
		`SELECT * FROM pending_action`,
		`SELECT * FROM vault.credentials`,
		`SELECT * FROM approver_sessions`,
		`SELECT * FROM sign_in_log`,
		`SELECT * FROM tool_calls`,
		`SELECT * FROM mangrove.transfers`,
		`SELECT vault.issue_for_sign_in('ama', 'i', 's', 'store_manager', '{112}'::bigint[], 'pwd', now())`,
		`SELECT vault.issue_for_sign_in_resources('ama', 'i', 's', 'store_manager', '{"store": ["112"]}'::jsonb, 'pwd', now())`,
		`CREATE TABLE public.notes (x int)`,
	} {
		if _, err := auditor.Exec(ctx, stmt); err == nil {
			t.Errorf("the auditor may %q", stmt)
		}
	}
}

// TestDefinerFunctionsSearchTheSessionsTablesLast: every SECURITY DEFINER
// function (each runs as the owner, for a service) searches pg_temp last,
// so a table a session makes for itself never stands in for the one the
// function means, even where a role may make temporary tables.
func TestDefinerFunctionsSearchTheSessionsTablesLast(t *testing.T) {
	ctx := context.Background()
	owner := testenv.OwnerPool(t, testenv.Database(t))
	rows, err := owner.Query(ctx, `SELECT p.oid::regprocedure::text, coalesce((SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%'), '')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var fn, path string
		if err := rows.Scan(&fn, &path); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.HasSuffix(path, ", pg_temp") {
			t.Errorf("%s runs as the owner with %q: set its search_path with pg_temp last", fn, path)
		}
	}
	if n < 10 {
		t.Fatalf("only %d SECURITY DEFINER functions: the scan is not seeing them", n)
	}
}
