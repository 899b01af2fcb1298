//go:build bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/synth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
)

// scaleSizes are the audit rows the scale run measures at
// (BENCH_SCALE_ROWS, comma-separated).
func scaleSizes(t *testing.T) []int64 {
	v := os.Getenv("BENCH_SCALE_ROWS")
	if v == "" {
		v = "0,1000000,5000000"
	}
	var out []int64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 0 || len(out) > 0 && n < out[len(out)-1] {
			t.Fatalf("BENCH_SCALE_ROWS=%q: give audit row counts in rising order, e.g. 0,1000000,5000000", v)
		}
		out = append(out, n)
	}
	return out
}

// The person whose per-user bucket the scale run admits to: a synthetic
// user, signed in at the synthetic history's provider (synth.Issuer).
const (
	scaleUser       = "user-7"
	scaleCredential = "cred-scale-person"
	scaleIssuer     = "https://id.synth.example"
)

// TestScale measures what toolgate's reads of the audit log and the cards
// cost as the log grows: the same database is loaded with a retailer's
// history (synth.Retail, calls at a steady rate going back in time, so the
// most recent days look the same at every size) to each size in turn, and
// each measure is taken at each size in one run. Run it with make
// bench-scale; figures go to bench/results/scale.md.
func TestScale(t *testing.T) {
	sizes := scaleSizes(t)
	ctx := context.Background()
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: liftedTransferLimits(t)})
	ba = &bare{upstream: s.Upstream.URL, http: s.Activities.HTTP}
	bareQueue := s.TaskQueue + "-bare"
	bw := bareWorker(t, s.Client, bareQueue)
	defer bw.Stop()
	shape := synth.Retail
	anchor := time.Now().Add(-time.Hour) // the history ends an hour ago; the measured calls come after it
	cardUI := &approvals.Server{Pool: testenv.ServicePool(t, s.DatabaseURL, "approvals"), Policy: s.Policy}
	auditor := insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}
	area := mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121)

	type measure struct {
		name string
		unit string
		at   []float64
	}
	var table []*measure
	get := func(name, unit string) *measure {
		for _, m := range table {
			if m.name == name {
				return m
			}
		}
		m := &measure{name: name, unit: unit}
		table = append(table, m)
		return m
	}
	if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, acr, auth_time)
		VALUES ($1, $2, 'bench', $3, 'subject-' || $2, 'store_manager', 'mfa', now())`, scaleCredential, scaleUser, scaleIssuer); err != nil {
		t.Fatal(err)
	}
	var loaded, calls int64
	n := 0
	for _, size := range sizes {
		start := time.Now()
		target := int64(math.Ceil(float64(size) / synth.RowsPerCall))
		for calls < target {
			next := min(target, calls+250_000)
			rows, err := shape.LoadCalls(ctx, s.Owner, anchor, calls, next)
			if err != nil {
				t.Fatal(err)
			}
			loaded, calls = loaded+rows, next
		}
		// What the worker's maintenance does every 10 minutes: trim the
		// limit ledger to its 31 days, and count the closed days, 31 a time.
		if _, err := s.App.Exec(ctx, `SELECT limit_usage_trim()`); err != nil {
			t.Fatal(err)
		}
		for {
			var days int
			if err := s.App.QueryRow(ctx, `SELECT audit_log_count_days()`).Scan(&days); err != nil {
				t.Fatal(err)
			}
			if days == 0 {
				break
			}
		}
		if _, err := s.Owner.Exec(ctx, `VACUUM ANALYZE audit_log`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Owner.Exec(ctx, `VACUUM ANALYZE audit_keys`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Owner.Exec(ctx, `VACUUM ANALYZE limit_usage`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Owner.Exec(ctx, `VACUUM ANALYZE pending_action`); err != nil {
			t.Fatal(err)
		}
		t.Logf("size %d: %d audit rows of %d calls loaded in %s", size, loaded, calls, time.Since(start).Round(time.Second))

		admit := func(store string, i int) time.Duration {
			k := policy.LimitKey{Key: "bench-scale:" + store, Tool: mangrove.ToolRequestStockTransfer, Scope: policy.PerResource,
				Resource: policy.ResourceRef{Kind: "store", ID: store}, Window: policy.Day, MaxCalls: 1_000_000}
			sess := kofiAt("scale", 112)
			in := activities.AdmitInput{Tool: mangrove.ToolRequestStockTransfer, Session: sess,
				Verdict: policy.Verdict{Decision: policy.DecisionAllow, Code: policy.CodeOK, Limits: []policy.LimitKey{k}, Args: json.RawMessage(`{}`)}}
			begin := time.Now()
			res, err := s.Activities.AdmitRun(ctx, fmt.Sprintf("scale-%d-%s-%d", size, store, i), "run", in)
			if err != nil || !res.Allowed() {
				t.Fatalf("admission: %v %+v", err, res)
			}
			return time.Since(begin)
		}
		// A per-user limit counts the person behind the credential: a
		// synthetic user's history names them (from migration 033), and
		// their admission reads the vault for who they are.
		personal := func(i int) time.Duration {
			k := policy.LimitKey{Key: "bench-scale-user:" + scaleUser, Tool: "get_stock", Scope: policy.PerUser, UserID: scaleUser, Window: policy.Day, MaxCalls: 1_000_000}
			sess := policy.Session{UserID: scaleUser, Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "b", ConversationID: "scale", CredentialRef: scaleCredential}
			in := activities.AdmitInput{Tool: "get_stock", Session: sess,
				Verdict: policy.Verdict{Decision: policy.DecisionAllow, Code: policy.CodeOK, Limits: []policy.LimitKey{k}, Args: json.RawMessage(`{}`)}}
			begin := time.Now()
			res, err := s.Activities.AdmitRun(ctx, fmt.Sprintf("scale-%d-user-%d", size, i), "run", in)
			if err != nil || !res.Allowed() {
				t.Fatalf("admission: %v %+v", err, res)
			}
			return time.Since(begin)
		}
		var hot, quiet, person series
		for i := range 200 {
			hot = append(hot, admit(shape.HotStore, i))
			quiet = append(quiet, admit("300", i))
			person = append(person, personal(i))
		}
		get("admission, hot bucket (a store's ~400 transfers a day)", "ms").at = append(get("admission, hot bucket (a store's ~400 transfers a day)", "ms").at, ms(hot.pct(.5)))
		get("admission, quiet bucket", "ms").at = append(get("admission, quiet bucket", "ms").at, ms(quiet.pct(.5)))
		get("admission, a person's bucket (per-user limit)", "ms").at = append(get("admission, a person's bucket (per-user limit)", "ms").at, ms(person.pct(.5)))

		for _, pending := range []int{0, 10_000, 100_000} {
			if err := shape.SetPending(ctx, s.Owner, time.Now(), pending); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Owner.Exec(ctx, `ANALYZE pending_action`); err != nil {
				t.Fatal(err)
			}
			var inbox series
			for range 50 {
				begin := time.Now()
				cards, err := cardUI.Inbox(ctx, mangrove.RoleAreaManager, area)
				if err != nil {
					t.Fatal(err)
				}
				if pending > 0 && len(cards) == 0 {
					t.Fatalf("the inbox at %d pending is empty", pending)
				}
				inbox = append(inbox, time.Since(begin))
			}
			m := get(fmt.Sprintf("card UI inbox, %d pending", pending), "ms")
			m.at = append(m.at, ms(inbox.pct(.5)))
		}
		if err := shape.SetPending(ctx, s.Owner, time.Now(), 0); err != nil {
			t.Fatal(err)
		}

		to := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		for _, days := range []int{1, 30} {
			f := insights.Filter{From: to.Add(-time.Duration(days) * 24 * time.Hour), To: to}
			var page series
			for range 3 {
				begin := time.Now()
				if _, err := auditor.Page(ctx, f); err != nil {
					t.Fatal(err)
				}
				page = append(page, time.Since(begin))
			}
			m := get(fmt.Sprintf("insights page, %d days", days), "ms")
			m.at = append(m.at, ms(page.pct(.5)))
		}

		var tgRead, bareRead, tgAppr, bareAppr series
		for i := range 40 {
			begin := time.Now()
			in := workflows.ToolCallInput{Tool: "get_stock", ToolCallID: fmt.Sprint("scale.read.", size, ".", i), Args: json.RawMessage(`{"articleId":40211}`), Session: kofiAt("scale", 112)}
			if res := s.Run(t, in); res.Status != "executed" {
				t.Fatalf("read: %+v", res)
			}
			tgRead = append(tgRead, time.Since(begin))
			begin = time.Now()
			run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprint("scale-bare-read-", size, "-", i), TaskQueue: bareQueue}, BareRead, int64(112))
			if err != nil {
				t.Fatal(err)
			}
			if err := run.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
			bareRead = append(bareRead, time.Since(begin))
		}
		for range 15 {
			n++
			tg, bare := approveOnce(t, s, bareQueue, fmt.Sprint("scale.", size), n)
			tgAppr, bareAppr = append(tgAppr, tg), append(bareAppr, bare)
		}
		get("allowed read p50, toolgate / bare", "×").at = append(get("allowed read p50, toolgate / bare", "×").at, ms(tgRead.pct(.5))/ms(bareRead.pct(.5)))
		get("approval signal → executed p50, toolgate / bare", "×").at = append(get("approval signal → executed p50, toolgate / bare", "×").at, ms(tgAppr.pct(.5))/ms(bareAppr.pct(.5)))
		get("allowed read p50", "ms").at = append(get("allowed read p50", "ms").at, ms(tgRead.pct(.5)))
		get("approval signal → executed p50", "ms").at = append(get("approval signal → executed p50", "ms").at, ms(tgAppr.pct(.5)))

		var bytes, keys int64
		if err := s.Owner.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i WHERE i.inhparent = 'audit_log'::regclass`).
			Scan(&bytes); err != nil {
			t.Fatal(err)
		}
		var ledger int64
		if err := s.Owner.QueryRow(ctx, `SELECT pg_total_relation_size('audit_keys'), pg_total_relation_size('limit_usage')`).Scan(&keys, &ledger); err != nil {
			t.Fatal(err)
		}
		get("audit_log on disk, its months and indexes", "MB").at = append(get("audit_log on disk, its months and indexes", "MB").at, float64(bytes)/1e6)
		get("audit_keys on disk", "MB").at = append(get("audit_keys on disk", "MB").at, float64(keys)/1e6)
		get("limit_usage on disk (32 days of admitted calls)", "MB").at = append(get("limit_usage on disk (32 days of admitted calls)", "MB").at, float64(ledger)/1e6)
	}

	var out strings.Builder
	out.WriteString("| measure |")
	for _, size := range sizes {
		fmt.Fprintf(&out, " %s rows |", human(size))
	}
	fmt.Fprintf(&out, " %s / %s |\n|---|", human(sizes[len(sizes)-1]), human(sizes[0]))
	for range sizes {
		out.WriteString("---|")
	}
	out.WriteString("---|\n")
	for _, m := range table {
		fmt.Fprintf(&out, "| %s (%s) |", m.name, m.unit)
		for _, v := range m.at {
			fmt.Fprintf(&out, " %s |", prec(v))
		}
		last, first := m.at[len(m.at)-1], m.at[0]
		if first > 0 {
			fmt.Fprintf(&out, " %.2f× |\n", last/first)
		} else {
			out.WriteString(" — |\n")
		}
	}
	t.Logf("scale, %s audit rows (%.2f a call, %d calls a day, history ending an hour before the run):\n%s",
		strings.Join(mapSizes(sizes), ", "), synth.RowsPerCall, shape.CallsPerDay, out.String())
	_, file, _, _ := runtimeCaller()
	dir := filepath.Join(filepath.Dir(file), "..", "results")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "scale.md"), []byte(out.String()), 0o644)
}

// approveOnce puts up one transfer card and approves it, and runs the bare
// workflow's wait and signal beside it: the time from each signal to its
// call's end.
func approveOnce(t *testing.T, s *testenv.Stack, bareQueue, prefix string, i int) (time.Duration, time.Duration) {
	ctx := context.Background()
	stores := []int64{110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121}
	store := stores[i%len(stores)]
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: fmt.Sprint(prefix, ".a", i),
		Args: json.RawMessage(`{"articleId":40211,"quantity":1,"reason":"stockout_risk"}`), Session: kofiAt(prefix, store)})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("card %d: %v %+v", i, err, first)
	}
	a := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash,
		Approver: policy.Identity{UserID: "sm", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(store)}}, first.CardRef())
	begin := time.Now()
	if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, a); err != nil {
		t.Fatal(err)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != "executed" {
		t.Fatalf("approval %d: %v %+v", i, err, res)
	}
	tg := time.Since(begin)
	id := fmt.Sprint(prefix, "-bare-appr-", i)
	brun, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue}, BareApproved, store)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let it reach its wait, as the card had
	begin = time.Now()
	if err := s.Client.SignalWorkflow(ctx, id, "", "go", nil); err != nil {
		t.Fatal(err)
	}
	if err := brun.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return tg, time.Since(begin)
}

func human(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%gM", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%gk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func mapSizes(s []int64) []string {
	out := make([]string, len(s))
	for i, n := range s {
		out[i] = human(n)
	}
	return out
}

func prec(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
