// Package synth loads the measured shape of a deployment's history into a
// toolgate database, by SQL on the server: the audit rows of calls at a
// steady rate going back in time from an anchor, the cards those calls put
// up, and cards pending for the inbox. Calls are numbered, so a history can
// be grown in steps (calls 0 to n, then n to m, further back) while its
// most recent days stay the same. The scale benchmark and the tests that
// read query plans load it; no service does.
package synth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the loaders write through: a pool or a transaction, as the
// owner (the rows name their own times, which only the owner may).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Shape is a deployment's traffic: the measured one is Retail.
type Shape struct {
	// CallsPerDay is the steady rate the history is written at.
	CallsPerDay int
	// Stores and Users are how many resources and requesters calls spread
	// over; stores are numbered from FirstStore.
	Stores, Users, FirstStore int
	// Tools are the tools calls spread over.
	Tools []string
	// HotStore takes one call in HotEvery, all to HotTool: a bucket with
	// hundreds of admissions a day.
	HotStore string
	HotEvery int
	HotTool  string
}

// Retail is the shape the scale benchmark measures: a retailer's 320
// stores and 2,000 people calling 12 tools, 20,000 calls a day (32,000
// audit rows, 1.6 a call), one store's transfers a hot bucket of
// about 400 admissions a day.
var Retail = Shape{
	CallsPerDay: 20_000, Stores: 320, Users: 2_000, FirstStore: 101,
	Tools: []string{"get_stock", "list_deliveries", "search_procedures", "create_task", "request_stock_transfer", "get_article",
		"list_tasks", "get_store", "list_transfers", "get_prices", "list_staff", "get_schedule"},
	HotStore: "112", HotEvery: 25, HotTool: "request_stock_transfer",
}

// RowsPerCall is the audit rows a call writes on average in this shape:
// of 20 calls, 9 allowed and run with an outcome row (allowed, executed),
// 9 denied, one card approved and run (needs_approval, approved,
// executed) and one rejected (needs_approval, rejected): 1.6 rows a call.
const RowsPerCall = (9*2 + 9*1 + 3 + 2) / 20.0

// callsSQL writes calls [$2, $3) of a history whose call g was made at
// $1 less g/$4 days, each call's rows by its kind (g % 20), and the card
// of each card call. $5 stores from $6, $7 users, $8 tools; $9 the hot
// store, one call in $10, all to tool $11.
const callsSQL = `
WITH calls AS (
  SELECT g, $1::timestamptz - make_interval(secs => g::float8 * 86400 / $4) AS at, g % 20 AS kind,
         CASE WHEN g % $10 = 0 THEN $9 ELSE ($6 + (g * 7919) % $5)::text END AS store,
         CASE WHEN g % $10 = 0 THEN $11 ELSE ($8::text[])[1 + (g * 31) % cardinality($8::text[])] END AS tool,
         'user-' || ((g * 104729) % $7) AS user_id
  FROM generate_series($2::bigint, $3::bigint - 1) g
), audit AS (
  INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, args, resource_kind, resource_id,
                         value_cents, workflow_id, run_id, event_key, approver_id, approver_role, message, result{derived}{person})
  SELECT c.at + e.after, e.event, e.reason, c.tool, c.user_id, 'store_manager', 'session-' || c.user_id, 'conversation-' || (c.g / 7),
         jsonb_build_object('articleId', 40000 + c.g % 500, 'quantity', 1 + c.g % 40, 'reason', 'stockout_risk'),
         'store', c.store, CASE WHEN c.kind >= 18 OR c.tool = $11 THEN 960 * (1 + c.g % 40) END,
         'synth-' || c.g, 'run-' || c.g, e.key, e.approver, CASE WHEN e.approver IS NOT NULL THEN 'area_manager' END, e.message,
         CASE WHEN e.event = 'executed' THEN jsonb_build_object('number', 'TR-' || c.g, 'status', 'created', 'etaHours', c.g % 48) END{seconds}{personValues}
  FROM calls c CROSS JOIN LATERAL (VALUES
      (0, 'allowed', 'ok', 'decision', interval '0', NULL::text, NULL::text, NULL::float8),
      (0, 'executed', 'ok', 'outcome', interval '200 milliseconds', NULL, NULL, 0.2),
      (1, 'denied', 'rate_limit', 'decision', interval '0', NULL,
          'The store has used its limit of 30 tasks a day; it frees at midnight. Tell the person, and do not call again today.', NULL),
      (2, 'needs_approval', 'ok', 'decision', interval '0', NULL, NULL, NULL),
      (2, 'approved', 'ok', 'approved', interval '90 seconds', 'approver-' || (c.g % 97), 'Looks right.', 90),
      (2, 'executed', 'ok', 'outcome', interval '91 seconds', NULL, NULL, 1),
      (3, 'needs_approval', 'ok', 'decision', interval '0', NULL, NULL, NULL),
      (3, 'rejected', 'ok', 'rejected', interval '300 seconds', 'approver-' || (c.g % 97), 'Not this week.', 300)
    ) AS e(kind, event, reason, key, after, approver, message, seconds)
  WHERE e.kind = CASE WHEN c.kind < 9 THEN 0 WHEN c.kind < 18 THEN 1 WHEN c.kind = 18 THEN 2 ELSE 3 END
  RETURNING {returning}
){keys}, cards AS (
  INSERT INTO pending_action (workflow_id, run_id, version, tool, requested_by, requester_role, resource_kind, resource_id, args, args_hash, card,
                              value_cents, approver_role, status, expires_at, created_at, updated_at, decided_by, decided_role, decided_at)
  SELECT 'synth-' || c.g, 'run-' || c.g, 3, c.tool, c.user_id, 'store_manager', 'store', c.store,
         jsonb_build_object('articleId', 40000 + c.g % 500, 'quantity', 1 + c.g % 40), md5(c.g::text),
         'Move ' || (1 + c.g % 40) || ' cases from store 118 to store ' || c.store || '.', 960 * (1 + c.g % 40), 'area_manager',
         CASE WHEN c.kind = 18 THEN 'executed' ELSE 'rejected' END, c.at + interval '30 minutes', c.at, c.at + interval '91 seconds',
         'approver-' || (c.g % 97), 'area_manager', c.at + interval '90 seconds'
  FROM calls c WHERE c.kind >= 18
  RETURNING 1
)
SELECT (SELECT count(*) FROM audit), (SELECT count(*) FROM cards)`

// Into a log by month (migration 028), a row's derived columns and its
// event key are what the insert trigger would write, written by the loader
// itself with the triggers off for its own transaction: the trigger's
// look-up of each outcome's start, planned for a month still empty, would
// read the whole month a row. So is the limit ledger's row of each call
// admitted in the days it keeps whose card was not rejected (migration 029),
// and from migration 033 the person each decision row names (Issuer, and
// "subject-" and the user ID).
var (
	oneTableSQL = strings.NewReplacer("{derived}", "", "{seconds}", "", "{returning}", "1", "{keys}", "", "{person}", "", "{personValues}", "").Replace(callsSQL)
	byMonthSQL  = byMonth(false, false)
	ledgerSQL   = byMonth(true, false)
	personSQL   = byMonth(true, true)
)

// Issuer is the provider the people of a synthetic history signed in at.
const Issuer = "https://id.synth.example"

// byMonth is callsSQL for a log by month, with the ledger's rows (ledger)
// and the person each decision row names (person).
func byMonth(ledger, person bool) string {
	returning := "workflow_id, run_id, event_key, at, id, event, tool, resource_kind, resource_id, user_id, value_cents"
	columns, values, whose := "", "", ""
	if person {
		columns = ", requester_issuer, requester_subject"
		values = `, CASE WHEN e.key = 'decision' THEN '` + Issuer + `' END, CASE WHEN e.key = 'decision' THEN 'subject-' || c.user_id END`
		whose = ", a.requester_issuer, a.requester_subject"
		returning += columns
	}
	rows := ""
	if ledger {
		rows = `, ledger AS (
  INSERT INTO limit_usage (workflow_id, run_id, id, at, event, tool, resource_kind, resource_id, user_id, admitted_cents, value_cents` + columns + `)
  SELECT a.workflow_id, a.run_id, a.id, a.at, a.event, a.tool, a.resource_kind, a.resource_id, a.user_id, a.value_cents, a.value_cents` + whose + `
  FROM audit a WHERE a.event IN ('allowed', 'needs_approval') AND a.at > now() - limit_usage_keep()
    AND NOT EXISTS (SELECT 1 FROM audit r WHERE r.workflow_id = a.workflow_id AND r.run_id = a.run_id AND r.event IN ('rejected', 'expired', 'released', 'withdrawn'))
  RETURNING 1)`
	}
	return strings.NewReplacer("{derived}", ", seconds", "{seconds}", ", e.seconds", "{person}", columns, "{personValues}", values,
		"{returning}", returning,
		"{keys}", `, keys AS (INSERT INTO audit_keys (key, at) SELECT audit_key(a.workflow_id, a.run_id, a.event_key), a.at FROM audit a RETURNING 1)`+rows).Replace(callsSQL)
}

// LoadCalls writes calls [from, to) of the history that ends at anchor, as
// their audit rows and cards, making the months of the audit log they fall
// in. It returns the audit rows written. db must be able to begin a
// transaction as a superuser (the tests' and benchmarks' owner).
func (s Shape) LoadCalls(ctx context.Context, db interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}, anchor time.Time, from, to int64) (int64, error) {
	var rows, cards int64
	oldest := anchor.Add(-time.Duration(float64(to) * float64(24*time.Hour) / float64(s.CallsPerDay)))
	var partitioned, ledger, person bool
	if err := db.QueryRow(ctx, `SELECT to_regprocedure('audit_log_partition(date)') IS NOT NULL, to_regclass('limit_usage') IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('limit_usage') AND attname = 'requester_subject' AND NOT attisdropped)`).
		Scan(&partitioned, &ledger, &person); err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	if _, err := db.Exec(ctx, `SELECT audit_log_partition(m::date) FROM generate_series(date_trunc('month', $1::timestamptz AT TIME ZONE 'UTC'),
		date_trunc('month', $2::timestamptz AT TIME ZONE 'UTC'), interval '1 month') m`, oldest, anchor); partitioned && err != nil {
		return 0, fmt.Errorf("synth: the months of calls %d to %d: %w", from, to, err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit it does nothing
	sql := oneTableSQL
	if partitioned {
		switch {
		case person:
			sql = personSQL
		case ledger:
			sql = ledgerSQL
		default:
			sql = byMonthSQL
		}
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return 0, fmt.Errorf("synth: the triggers off: %w", err)
		}
	}
	err = tx.QueryRow(ctx, sql, anchor, from, to, s.CallsPerDay, s.Stores, s.FirstStore, s.Users, s.Tools, s.HotStore, s.HotEvery, s.HotTool).
		Scan(&rows, &cards)
	if err != nil {
		return 0, fmt.Errorf("synth: calls %d to %d: %w", from, to, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("synth: calls %d to %d: %w", from, to, err)
	}
	return rows, nil
}

// pendingSQL writes $1 synthetic pending cards, put up
// in the hour before $2 and expiring an hour after it: routed to a store
// manager (an area manager for one in three, escalated to one for one in
// ten), over $3 stores from $4, one in a hundred naming no resource; each
// asked for by one of 2,000 people, signed in at urn:synth.
const pendingSQL = `
INSERT INTO pending_action (workflow_id, run_id, version, tool, requested_by, requester_role, resource_kind, resource_id, args, args_hash, card,
                            value_cents, approver_role, escalated_role, status, expires_at, created_at, updated_at, requester_issuer, requester_subject)
SELECT 'synth-pending-' || i, 'run', 1, 'request_stock_transfer', 'user-' || (i % 2000), 'store_manager',
       CASE WHEN i % 100 <> 0 THEN 'store' END, CASE WHEN i % 100 <> 0 THEN ($4 + (i * 7919) % $3)::text END,
       jsonb_build_object('articleId', 40211, 'quantity', 1 + i % 40), md5(i::text), 'Move ' || (1 + i % 40) || ' cases from store 118.',
       960 * (1 + i % 40), CASE WHEN i % 3 = 0 THEN 'area_manager' ELSE 'store_manager' END,
       CASE WHEN i % 10 = 1 THEN 'area_manager' END, 'pending_approval',
       $2::timestamptz + interval '1 hour', $2::timestamptz - make_interval(secs => i::float8 * 3600 / greatest($1, 1)), $2::timestamptz,
       'urn:synth', 'user-' || (i % 2000)
FROM generate_series(1, $1::bigint) i`

// SetPending makes n synthetic cards pending (none when n is 0), replacing
// the ones an earlier call made.
func (s Shape) SetPending(ctx context.Context, db DB, anchor time.Time, n int) error {
	if _, err := db.Exec(ctx, `DELETE FROM pending_action WHERE workflow_id LIKE 'synth-pending-%'`); err != nil {
		return fmt.Errorf("synth: clear pending cards: %w", err)
	}
	if _, err := db.Exec(ctx, pendingSQL, n, anchor, s.Stores, s.FirstStore); err != nil {
		return fmt.Errorf("synth: %d pending cards: %w", n, err)
	}
	return nil
}
