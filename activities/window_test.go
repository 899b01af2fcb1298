package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// TestLimitCountReadsOnlyItsWindow: what admission reads to count a limit
// bucket is the bucket's window, not its history. A bucket with 20,000 rows
// older than its window and 10 inside it is counted; the plan's scans of
// the limit ledger may touch the window's rows, and must not read (and
// then filter away) the history, as a volatile window start makes every
// scan do. Two calls in three name a person (p<n> behind the user ID u<n>),
// and a per-user bucket is counted for a call that names one and for one
// that names none.
func TestLimitCountReadsOnlyItsWindow(t *testing.T) {
	const history, window = 20_000, 10
	ctx := context.Background()
	url := testenv.Database(t)
	owner := testenv.OwnerPool(t, url)
	if _, err := owner.Exec(ctx, `
		INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id, value_cents, workflow_id, run_id, event_key,
		                       requester_issuer, requester_subject)
		SELECT clock_timestamp() - make_interval(days => 2) - make_interval(secs => g), 'allowed', 'ok', 'request_stock_transfer', 'u' || (g % 50), 'area_manager', 's', 'c',
		       'store', '112', 100, 'old-' || g, 'run', 'decision', CASE WHEN g % 3 <> 0 THEN $3 END, CASE WHEN g % 3 <> 0 THEN 'p' || (g % 50) END
		FROM generate_series(1, $1) g
		UNION ALL
		SELECT clock_timestamp() - make_interval(secs => g), 'allowed', 'ok', 'request_stock_transfer', 'u' || (g % 50), 'area_manager', 's', 'c',
		       'store', '112', 100, 'new-' || g, 'run', 'decision', CASE WHEN g % 3 <> 0 THEN $3 END, CASE WHEN g % 3 <> 0 THEN 'p' || (g % 50) END
		FROM generate_series(1, $2) g`, history, window, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `ANALYZE audit_log`); err != nil {
		t.Fatal(err)
	}
	p7 := &signoff.Person{Issuer: testenv.Issuer, Subject: "p7"}
	for _, c := range []struct {
		name string
		k    policy.LimitKey
		who  *signoff.Person
		// counts is whether the bucket counts call g of the window.
		counts func(g int) bool
	}{
		{"resource", policy.LimitKey{Key: "r", Tool: "request_stock_transfer", Scope: policy.PerResource, Resource: policy.ResourceRef{Kind: "store", ID: "112"}, Window: policy.Day},
			nil, func(int) bool { return true }},
		// p7's calls, and the calls under u7 that name nobody.
		{"person", policy.LimitKey{Key: "u", Tool: "request_stock_transfer", Scope: policy.PerUser, UserID: "u7", Window: policy.Day},
			p7, func(g int) bool { return g%50 == 7 }},
		// A call that names nobody: every call under u7.
		{"unnamed", policy.LimitKey{Key: "u", Tool: "request_stock_transfer", Scope: policy.PerUser, UserID: "u7", Window: policy.Day},
			nil, func(g int) bool { return g%50 == 7 }},
	} {
		k := c.k
		t.Run(c.name, func(t *testing.T) {
			sql, args, err := activities.UsageQuery(k, c.who)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := owner.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // read only
			var plan []byte
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			var calls int64
			if err := tx.QueryRow(ctx, sql, args...).Scan(&calls, new(int64)); err != nil {
				t.Fatal(err)
			}
			var want int64
			for g := 1; g <= window; g++ {
				if c.counts(g) {
					want++
				}
			}
			if calls != want {
				t.Fatalf("counted %d calls in the window, want %d", calls, want)
			}
			read := rowsRead(t, plan, "a")
			if read == 0 && calls > 0 {
				t.Fatalf("the plan names no scan of limit_usage a, so this proves nothing:\n%s", plan)
			}
			if read > 2*window {
				t.Errorf("the count read %d rows of limit_usage a to count %d in its window (history %d): the window does not bound the scan\n%s", read, calls, history, plan)
			}
		})
	}
}

// rowsRead sums, over the plan's scans of the relation aliased alias, the
// rows they returned and the rows they read and filtered away.
func rowsRead(t *testing.T, plan []byte, alias string) int {
	t.Helper()
	var top []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan: %v %s", err, plan)
	}
	total := 0
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		// A month's scan is the alias with a suffix: a_1, a_2.
		if a, _ := n["Alias"].(string); a == alias || strings.HasPrefix(a, alias+"_") {
			for _, f := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
				if v, ok := n[f].(float64); ok {
					loops, _ := n["Actual Loops"].(float64)
					total += int(v * max(loops, 1))
				}
			}
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(top[0].Plan)
	return total
}
