//go:build bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// rssMB reads this process's resident set size (worker, client, upstream
// and driver: an upper bound for the worker alone).
func rssMB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// TestPendingApprovals holds BENCH_PENDING (10,000) cards pending at once,
// then lets every one expire, and measures RSS and how late each expiry is.
// distinctTransfer is the i-th of the transfers that are each their own
// intent (one card per intent: equivalent calls would end already_pending):
// every store, reason, article and quantity the seed stock can plan — 9,570
// of them over the 11 destination stores; past that they repeat.
func distinctTransfer(stores []int64, i int) (int64, string) {
	type plan struct {
		article int
		upTo    int
	}
	plans := []plan{{40211, 200}, {40207, 30}, {40388, 30}, {50110, 30}}
	reasons := []string{"stockout_risk", "festival_peak", "damaged_delivery"}
	perStore := 0
	for _, p := range plans {
		perStore += p.upTo
	}
	perStore *= len(reasons)
	i %= perStore * len(stores)
	store := stores[i%len(stores)]
	k := i / len(stores)
	reason := reasons[k%len(reasons)]
	k /= len(reasons)
	for _, p := range plans {
		if k < p.upTo {
			return store, fmt.Sprintf(`{"articleId":%d,"quantity":%d,"reason":%q}`, p.article, k+1, reason)
		}
		k -= p.upTo
	}
	return store, ""
}

// liftedTransferLimits is the Mangrove pack with room for many more cards
// than the shipped table's 5 transfers per store per day.
func liftedTransferLimits(t *testing.T) *policy.Policy {
	return testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolRequestStockTransfer {
				d.Rows[i].Limits = []policy.Limit{{Scope: policy.PerResource, Window: policy.Day, MaxCalls: 1_000_000, MaxCents: 1_000_000_000}}
			}
		}
	})
}

func TestPendingApprovals(t *testing.T) {
	n := 9570 // every distinct intent distinctTransfer has
	if v, err := strconv.Atoi(os.Getenv("BENCH_PENDING")); err == nil && v > 0 {
		n = v
	}
	ttl := 10 * time.Minute // long enough for all to be pending at once, even at 20 cards a second
	if n < 2000 {
		ttl = time.Minute
	}
	cache := 1000 // as the worker runs by default (TOOLGATE_WORKFLOW_CACHE_SIZE)
	if v, err := strconv.Atoi(os.Getenv("BENCH_CACHE")); err == nil && v > 0 {
		cache = v
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{ApprovalTTL: ttl, WorkflowCacheSize: cache, Policy: liftedTransferLimits(t)})
	ctx := context.Background()
	runtime.GC()
	before := rssMB()
	// BENCH_PENDING_RATE caps how many cards start per second: the cards
	// expire as fast as they started, so it sets the expiries' arrival rate.
	rate, _ := strconv.ParseFloat(os.Getenv("BENCH_PENDING_RATE"), 64)
	stores := []int64{110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121}
	var next, failed atomic.Int64
	var peak atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				}
				store, args := distinctTransfer(stores, int(i))
				first, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: fmt.Sprint("p", i),
					Args:    json.RawMessage(args),
					Session: policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(store), SessionID: "p", ConversationID: "pending", CredentialRef: "cred-kofi"}})
				if err != nil || first.Status != workflows.StatusPendingApproval {
					failed.Add(1)
					continue
				}
				if i%500 == 0 {
					if r := int64(rssMB()); r > peak.Load() {
						peak.Store(r)
					}
				}
			}
		}()
	}
	wg.Wait()
	started := time.Since(start)
	var pending int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE status = 'pending_approval' AND expires_at > now()`).Scan(&pending)
	runtime.GC()
	atPeak := rssMB()
	if atPeak > float64(peak.Load()) {
		peak.Store(int64(atPeak))
	}
	t.Logf("%d cards started in %s (%.0f/s), %d failed to start; %d pending at once; workflow cache %d; RSS %.0f MB before, %d MB at the peak",
		n, started.Round(time.Second), float64(n)/started.Seconds(), failed.Load(), pending, cache, before, peak.Load())

	deadline := start.Add(ttl + started + 3*time.Minute)
	var expired int
	for time.Now().Before(deadline) {
		_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE status = 'expired'`).Scan(&expired)
		if expired >= n-int(failed.Load()) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	var p50, p99, max float64
	_ = s.Owner.QueryRow(ctx, `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY late), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY late), 0), coalesce(max(late), 0)
		FROM (SELECT extract(epoch FROM a.at - p.expires_at) AS late FROM pending_action p
		      JOIN audit_log a ON a.workflow_id = p.workflow_id AND a.event = 'expired') x`).Scan(&p50, &p99, &max)
	var transfers int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
	t.Logf("%d of %d expired; expiry late by p50 %.2fs, p99 %.2fs, max %.2fs after expires_at; %d transfers ran", expired, n, p50, p99, max, transfers)
	// How fast the worker and server got through them: the busiest 10 s of
	// expired rows and of escalated rows (each card escalates at half its TTL).
	var expiredPeak, escalatedPeak float64
	_ = s.Owner.QueryRow(ctx, `SELECT coalesce(max(c), 0) / 10.0 FROM (SELECT count(*) c FROM audit_log WHERE event = 'expired' GROUP BY floor(extract(epoch FROM at) / 10)) x`).Scan(&expiredPeak)
	_ = s.Owner.QueryRow(ctx, `SELECT coalesce(max(c), 0) / 10.0 FROM (SELECT count(*) c FROM audit_log WHERE event = 'escalated' GROUP BY floor(extract(epoch FROM at) / 10)) x`).Scan(&escalatedPeak)
	t.Logf("at the busiest 10 s: %.1f expiries and %.1f escalations per second written (cards arrived at %.0f/s)", expiredPeak, escalatedPeak, float64(n)/started.Seconds())
	if expired < n-int(failed.Load()) || transfers != 0 || failed.Load() != 0 {
		t.Errorf("%d expired of %d, %d failed to start, %d transfers", expired, n, failed.Load(), transfers)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "results")
	_ = os.MkdirAll(dir, 0o755)
	raw, _ := json.MarshalIndent(map[string]any{"pending": n, "workflow_cache": cache, "start_seconds": started.Seconds(), "pending_at_once": pending,
		"rss_mb_before": before, "rss_mb_peak": peak.Load(), "expired": expired, "late_p50_s": p50, "late_p99_s": p99, "late_max_s": max,
		"start_rate_cap": rate, "expired_per_s_peak": expiredPeak, "escalated_per_s_peak": escalatedPeak}, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, strings.Replace(resultsName(), "e2e", "pending", 1)+".json"), raw, 0o644)
}

// TestDistinctTransfersAreDistinct: the pending run's transfers are each
// their own intent, with no quantity the seed stock cannot plan.
func TestDistinctTransfersAreDistinct(t *testing.T) {
	stores := []int64{110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121}
	seen := map[string]bool{}
	for i := range 9570 {
		store, args := distinctTransfer(stores, i)
		key := fmt.Sprint(store, args)
		if args == "" || seen[key] {
			t.Fatalf("transfer %d (%s) repeats or is empty", i, key)
		}
		seen[key] = true
	}
}
