package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/synth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/migrations"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// beforePartitions is the last migration with audit_log as one table.
const beforePartitions = 27

// TestUpgradeKeepsTheLog: a database at migration 027, one table holding
// sixty days of a retailer's history over three months, is upgraded to the
// partitioned log. Every row is there with every value it had; each event
// key is kept once, so a replayed row of an old call writes nothing; each
// limit bucket, its calls released, edited and expired among them, counts
// from the limit ledger what it counted from the log;
// each outcome and decision has its
// seconds; each
// closed day is counted, and each month is a partition.
func TestUpgradeKeepsTheLog(t *testing.T) {
	ctx := context.Background()
	url := testenv.DatabaseAt(t, beforePartitions)
	owner := testenv.OwnerPool(t, url)
	shape := synth.Retail
	shape.CallsPerDay = 500
	// The history's calls are 172.8 s apart and end half a gap before now,
	// so a day's window starts between two calls, 86 s from either.
	gap := 86400 * time.Second / time.Duration(shape.CallsPerDay)
	anchor := time.Now().Add(-gap / 2)
	if _, err := shape.LoadCalls(ctx, owner, anchor, 0, 30_000); err != nil {
		t.Fatal(err)
	}
	snapshot := func(drop ...string) (rows int, digest string) {
		t.Helper()
		drop = append([]string{}, drop...) // never NULL
		if err := owner.QueryRow(ctx, `SELECT count(*), md5(string_agg((to_jsonb(a) - $1::text[])::text, E'\n' ORDER BY id)) FROM audit_log a`, drop).
			Scan(&rows, &digest); err != nil {
			t.Fatal(err)
		}
		return rows, digest
	}
	buckets := []policy.LimitKey{
		{Key: "hot", Tool: shape.HotTool, Scope: policy.PerResource, Resource: policy.ResourceRef{Kind: "store", ID: shape.HotStore}, Window: policy.Day},
		{Key: "hot-hour", Tool: shape.HotTool, Scope: policy.PerResource, Resource: policy.ResourceRef{Kind: "store", ID: shape.HotStore}, Window: policy.Hour},
		{Key: "quiet", Tool: "get_stock", Scope: policy.PerResource, Resource: policy.ResourceRef{Kind: "store", ID: "300"}, Window: policy.Day},
		{Key: "user", Tool: "get_stock", Scope: policy.PerUser, UserID: "user-1", Window: policy.Day},
	}
	usage := func(query func(policy.LimitKey, *signoff.Person) (string, []any, error)) []policy.Usage {
		t.Helper()
		var out []policy.Usage
		for _, k := range buckets {
			sql, args, err := query(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			var u policy.Usage
			if err := owner.QueryRow(ctx, sql, args...).Scan(&u.Calls, &u.Cents); err != nil {
				t.Fatal(err)
			}
			out = append(out, u)
		}
		return out
	}
	// What gives back or re-prices a reservation, in the hot bucket: two
	// of its transfers released, a card edited to a new value, one edited
	// to none (it counts as requested), and one expired.
	plain := usage(activities.UsageFromLog)
	if _, err := owner.Exec(ctx, `
		INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id, value_cents, workflow_id, run_id, event_key)
		SELECT now() - make_interval(secs => s), e, 'ok', $1, 'user-1', 'store_manager', 's', 'c', 'store', $2, v, w, r, k
		FROM (VALUES (1, 'released', NULL::bigint, 'synth-0', 'run-0', 'released'), (1, 'released', NULL, 'synth-100', 'run-100', 'released'),
		             (600, 'needs_approval', 500, 'card-edited', 'run', 'decision'), (500, 'edited', 900, 'card-edited', 'run', 'edit-1'),
		             (600, 'needs_approval', 700, 'card-edited-to-none', 'run', 'decision'), (500, 'edited', NULL, 'card-edited-to-none', 'run', 'edit-1'),
		             (600, 'needs_approval', 300, 'card-expired', 'run', 'decision'), (1, 'expired', NULL, 'card-expired', 'run', 'expired')) AS x(s, e, v, w, r, k)`,
		shape.HotTool, shape.HotStore); err != nil {
		t.Fatal(err)
	}
	rows, digest := snapshot()
	limits := usage(activities.UsageFromLog)
	if limits[0].Calls == 0 || limits[0].Cents == 0 {
		t.Fatalf("the hot bucket counts %+v: the history reaches no limit, so this proves nothing", limits[0])
	}
	if want := (policy.Usage{Calls: plain[0].Calls - 2 + 2, Cents: plain[0].Cents - synthCents(0) - synthCents(100) + 900 + 700}); limits[0] != want {
		t.Fatalf("the hot bucket counts %+v with its releases, edits and expiry, want %+v: the log is not what this test means", limits[0], want)
	}

	if err := migrations.Apply(ctx, url); err != nil {
		t.Fatal(err)
	}
	if n, d := snapshot("seconds", "version_by", "requester_issuer", "requester_subject", "approver_via"); n != rows || d != digest { // the columns the upgrade adds
		t.Fatalf("after the upgrade %d rows (digest %s), before %d (%s): a row was lost or changed", n, d, rows, digest)
	}
	// Admission counts from the ledger the upgrade fills (migration 029).
	for i, u := range usage(activities.UsageQuery) {
		if u != limits[i] {
			t.Errorf("bucket %s counts %+v after the upgrade, %+v before", buckets[i].Key, u, limits[i])
		}
	}
	var partitioned bool
	var months, keys, missing, wrong int
	_ = owner.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = 'audit_log'::regclass`).Scan(&partitioned)
	_ = owner.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'audit_log'::regclass`).Scan(&months)
	_ = owner.QueryRow(ctx, `SELECT count(*) FROM audit_keys`).Scan(&keys)
	// A read's outcome comes 0.2 s after it was allowed, an approved card's 1 s after its approval,
	// which comes 90 s after the card went up, and a rejection 300 s after.
	_ = owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE seconds IS NULL),
		count(*) FILTER (WHERE event IN ('executed', 'failed') AND seconds NOT IN (0.2, 1) OR event = 'approved' AND seconds <> 90 OR event = 'rejected' AND seconds <> 300)
		FROM audit_log WHERE event IN ('executed', 'failed', 'approved', 'rejected')`).Scan(&missing, &wrong)
	if !partitioned || months < 3+3 || keys != rows || missing != 0 || wrong != 0 {
		t.Fatalf("partitioned %v in %d months (want the history's 3 and 3 ahead), %d event keys for %d rows, %d outcomes without seconds, %d with wrong ones",
			partitioned, months, keys, rows, missing, wrong)
	}
	tag, err := owner.Exec(ctx, `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		VALUES ('allowed', 'ok', 'get_stock', 'user-1', 'store_manager', 's', 'c', 'synth-7', 'run-7', 'decision')`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("a replayed row of a call from before the upgrade: %v, %d written", err, tag.RowsAffected())
	}
	var days, counted, inDays int
	_ = owner.QueryRow(ctx, `SELECT count(*), coalesce(sum(rows), 0), (SELECT count(*) FROM audit_log WHERE at < (max(d.day) + 1)::timestamp AT TIME ZONE 'UTC')
		FROM audit_days d`).Scan(&days, &counted, &inDays)
	if days < 58 || counted != inDays {
		t.Fatalf("%d closed days counted, holding %d rows; the log holds %d in them", days, counted, inDays)
	}
}

// synthCents is what synth.Retail's call g is admitted at, when it names a
// value (a hot transfer does): 960 cents a case, 1 to 40 cases.
func synthCents(g int64) int64 { return 960 * (1 + g%40) }
