package activities_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// TestTheLedgerCountsWhatTheLogCounts: admission counts limits from the
// ledger (limit_usage) that a trigger keeps as the log is written; it must
// give every bucket, in every window, what the log itself gives. 600 calls
// over two days, each admitted or denied, some cards edited (once, twice,
// or to no value), some rejected, expired or released, the rest run, are
// written to the log in their order, each row replayed; then every bucket
// is counted both ways. Calls name one of two people behind their user IDs,
// or nobody, and a per-user bucket is counted for each.
func TestTheLedgerCountsWhatTheLogCounts(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner := testenv.OwnerPool(t, url)
	rng := rand.New(rand.NewPCG(39, 29))
	tools := []string{"request_stock_transfer", "create_task"}
	stores := []string{"112", "113", "114"}
	users := []string{"ama", "kofi", "lena"}
	now := time.Now()
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit it does nothing
	written := 0
	// Each row is written twice, as a retried activity would: the second
	// must reach neither the log nor the ledger.
	people := []*signoff.Person{nil, {Issuer: testenv.Issuer, Subject: "person-1"}, {Issuer: testenv.Issuer, Subject: "person-2"}}
	var person *signoff.Person
	insert := func(wf, key, event, tool, store, user string, cents *int64, at time.Time) {
		t.Helper()
		var iss, sub any
		if person != nil && key == "decision" {
			iss, sub = person.Issuer, person.Subject
		}
		for range 2 {
			if _, err := tx.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id,
				value_cents, workflow_id, run_id, event_key, requester_issuer, requester_subject)
				VALUES ($1, $2, 'ok', $3, $4, 'store_manager', 's', 'c', 'store', $5, $6, $7, 'run', $8, $9, $10)`,
				at, event, tool, user, store, cents, wf, key, iss, sub); err != nil {
				t.Fatalf("%s %s: %v", wf, event, err)
			}
		}
		written++
	}
	cents := func() *int64 { v := int64(100 * (1 + rng.IntN(50))); return &v }
	ended := map[string]int{}
	for i := range 600 {
		wf, tool, store, user := fmt.Sprint("ledger-", i), tools[rng.IntN(2)], stores[rng.IntN(3)], users[rng.IntN(3)]
		person = people[rng.IntN(len(people))]
		at := now.Add(-time.Duration(rng.Int64N(int64(48 * time.Hour))))
		decision := []string{"allowed", "needs_approval", "denied"}[rng.IntN(3)]
		insert(wf, "decision", decision, tool, store, user, cents(), at)
		if decision == "needs_approval" {
			for e := range rng.IntN(3) {
				v := cents()
				if rng.IntN(4) == 0 {
					v = nil
				}
				at = at.Add(time.Second)
				insert(wf, fmt.Sprint("edit-", e), "edited", tool, store, user, v, at)
			}
		}
		end := []string{"executed", "failed", "released", "rejected", "expired"}[rng.IntN(5)]
		if decision == "allowed" && (end == "rejected" || end == "expired") || decision == "denied" {
			end = "executed"
		}
		ended[end]++
		insert(wf, "end", end, tool, store, user, nil, at.Add(time.Second))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id LIKE 'ledger-%'`).Scan(&rows); err != nil || rows != written {
		t.Fatalf("the log holds %d rows of %d written twice (%v)", rows, written, err)
	}
	if ended["released"] == 0 || ended["rejected"] == 0 || ended["expired"] == 0 {
		t.Fatalf("the calls end %v: some give nothing back, so this proves nothing", ended)
	}
	type bucket struct {
		policy.LimitKey
		who *signoff.Person
	}
	var keys []bucket
	for _, tool := range tools {
		for _, w := range []policy.Window{policy.Hour, policy.Day, 2 * policy.Day} {
			for _, s := range stores {
				keys = append(keys, bucket{LimitKey: policy.LimitKey{Key: "r", Tool: tool, Scope: policy.PerResource, Resource: policy.ResourceRef{Kind: "store", ID: s}, Window: w}})
			}
			for _, u := range users {
				for _, who := range people {
					keys = append(keys, bucket{LimitKey: policy.LimitKey{Key: "u", Tool: tool, Scope: policy.PerUser, UserID: u, Window: w}, who: who})
				}
			}
		}
	}
	count := func(query func(policy.LimitKey, *signoff.Person) (string, []any, error), k bucket) policy.Usage {
		t.Helper()
		sql, args, err := query(k.LimitKey, k.who)
		if err != nil {
			t.Fatal(err)
		}
		var u policy.Usage
		if err := owner.QueryRow(ctx, sql, args...).Scan(&u.Calls, &u.Cents); err != nil {
			t.Fatal(err)
		}
		return u
	}
	counted := map[bool]int{}
	for _, k := range keys {
		ledger, log := count(activities.UsageQuery, k), count(activities.UsageFromLog, k)
		if ledger != log {
			t.Errorf("%s %s %s%s %v over %ds: the ledger counts %+v, the log %+v", k.Tool, k.Scope, k.Resource.ID, k.UserID, k.who, k.Window, ledger, log)
		}
		counted[k.who != nil] += ledger.Calls
	}
	if counted[false] == 0 || counted[true] == 0 {
		t.Fatalf("buckets count %v calls (by whether they name a person): some count none, so this proves nothing", counted)
	}
}
