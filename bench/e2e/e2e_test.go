//go:build bench

// Package e2e measures toolgate end to end against the floor: a
// bare Temporal workflow making the same upstream calls in one activity, on
// the same dev server, upstream and PostgreSQL, interleaved in one run.
// Run it with `make bench`; figures go to bench/results/.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/cost"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// bare is the floor: the same upstream calls, no policy, no audit.
type bare struct {
	upstream string
	http     *http.Client
}

func (b *bare) token(ctx context.Context) (string, error) {
	resp, err := b.http.Post(b.upstream+"/oauth/token", "application/json", strings.NewReader(`{"userId":"kofi","clientSecret":"demo-secret-kofi"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"accessToken"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tr)
	return tr.AccessToken, err
}

// Read is one activity: token exchange, then GET stock.
func (b *bare) Read(ctx context.Context, store int64) (json.RawMessage, error) {
	tok, err := b.token(ctx)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/stores/%d/stock/40211", b.upstream, store), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out json.RawMessage
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// Transfer is one activity: token exchange, then POST a transfer.
func (b *bare) Transfer(ctx context.Context, store int64, key string) (json.RawMessage, error) {
	tok, err := b.token(ctx)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/stores/%d/transfers", b.upstream, store),
		strings.NewReader(`{"articleId":40211,"quantity":1,"fromStoreId":118,"reason":"stockout_risk"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out json.RawMessage
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

var ba *bare

// BareRead is the floor for an allowed read.
func BareRead(ctx workflow.Context, store int64) (json.RawMessage, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, ba.Read, store).Get(ctx, &out)
	return out, err
}

// BareLocalRead is the honest floor for a gateway that runs its call in the
// first workflow task: the same calls as one local activity, started eagerly.
func BareLocalRead(ctx workflow.Context, store int64) (json.RawMessage, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out json.RawMessage
	err := workflow.ExecuteLocalActivity(ctx, ba.Read, store).Get(ctx, &out)
	return out, err
}

// BareApproved is the floor for an approval: wait for a signal, then one activity.
func BareApproved(ctx workflow.Context, store int64) (json.RawMessage, error) {
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, ba.Transfer, store, workflow.GetInfo(ctx).WorkflowExecution.ID).Get(ctx, &out)
	return out, err
}

type series []time.Duration

func (s series) pct(p float64) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c) == 0 {
		return 0
	}
	return c[min(len(c)-1, int(float64(len(c))*p))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// events counts a run's history events and its billable Temporal actions
// (package cost says how Temporal Cloud counts them).
func events(t *testing.T, c client.Client, id string) (int, int) {
	n, err := cost.Of(context.Background(), c, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return n.Events, n.Actions
}

func TestEndToEnd(t *testing.T) {
	reads, approvals, window := 150, 40, 8*time.Second
	// The shipped transfer limits (5 a store a day) would stop the cards'
	// throughput run; lifting them leaves every check in place.
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: liftedTransferLimits(t)})
	ctx := context.Background()
	ba = &bare{upstream: s.Upstream.URL, http: &http.Client{Timeout: 10 * time.Second}}
	bareQueue := s.TaskQueue + "-bare"
	bw := bareWorker(t, s.Client, bareQueue)
	defer bw.Stop()
	kofi := kofiAt
	readTG := func(i int) (time.Duration, string) {
		start := time.Now()
		in := workflows.ToolCallInput{Tool: "get_stock", ToolCallID: fmt.Sprint("r", i), Args: json.RawMessage(`{"articleId":40211}`), Session: kofi("bench", 112)}
		res := s.Run(t, in)
		if res.Status != "executed" {
			t.Fatalf("read: %+v", res)
		}
		return time.Since(start), workflows.WorkflowID("bench", in.ToolCallID)
	}
	readBare := func(i int) (time.Duration, string) {
		start := time.Now()
		id := fmt.Sprint("bare-read-", i)
		run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue}, BareRead, int64(112))
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), id
	}
	readLocal := func(i int) (time.Duration, string) {
		start := time.Now()
		id := fmt.Sprint("bare-local-read-", i)
		run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue, EnableEagerStart: true}, BareLocalRead, int64(112))
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), id
	}
	// Warm up the three paths, then interleave.
	readTG(9_999_999)
	readBare(9_999_999)
	readLocal(9_999_999)
	var tgRead, bareRead, localRead series
	var tgReadID, bareReadID, localReadID string
	for i := range reads {
		d, id := readTG(i)
		tgRead, tgReadID = append(tgRead, d), id
		d, id = readBare(i)
		bareRead, bareReadID = append(bareRead, d), id
		d, id = readLocal(i)
		localRead, localReadID = append(localRead, d), id
	}

	// Approval signal -> executed.
	var tgAppr, bareAppr series
	var tgApprID, bareApprID string
	for i := range approvals {
		// 11 stores of the area (118 is the source), 5 transfers each per day.
		stores := []int64{110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121}
		store := stores[i%len(stores)]
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: fmt.Sprint("a", i),
			Args: json.RawMessage(`{"articleId":40211,"quantity":1,"reason":"stockout_risk"}`), Session: kofi("bench", store)})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %d: %v %+v", i, err, first)
		}
		a := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash,
			Approver: policy.Identity{UserID: "sm", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(store)}}, first.CardRef())
		start := time.Now()
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, a); err != nil {
			t.Fatal(err)
		}
		var res workflows.ToolCallResult
		if err := run.Get(ctx, &res); err != nil || res.Status != "executed" {
			t.Fatalf("approval %d: %v %+v", i, err, res)
		}
		tgAppr, tgApprID = append(tgAppr, time.Since(start)), run.GetID()

		id := fmt.Sprint("bare-appr-", i)
		brun, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue}, BareApproved, store)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // let it reach its wait, as the card had
		start = time.Now()
		if err := s.Client.SignalWorkflow(ctx, id, "", "go", nil); err != nil {
			t.Fatal(err)
		}
		if err := brun.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		bareAppr, bareApprID = append(bareAppr, time.Since(start)), id
	}

	// Throughput at 32 concurrent callers.
	throughput := func(call func(i int)) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(window)
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					call(w*100000 + i)
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / window.Seconds()
	}
	tgTput := throughput(func(i int) { readTG(1_000_000 + i) })
	bareTput := throughput(func(i int) { readBare(1_000_000 + i) })

	// Cards up per second at 32 concurrent callers: each call returns once its
	// card is up (pending_approval); the bare one once its workflow has
	// workflow started (it then waits for a signal).
	var cards atomic.Int64
	tgCards := throughput(func(int) { putCard(t, s, "cards", int(cards.Add(1))) })
	bareCards := throughput(func(i int) {
		id := fmt.Sprint("bare-card-", i)
		if _, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue, EnableEagerStart: true}, BareApproved, int64(112)); err != nil {
			t.Error(err)
		}
	})

	// The same reads with a second worker on each queue (in this process).
	s.AddWorker(t)
	bw2 := bareWorker(t, s.Client, bareQueue)
	defer bw2.Stop()
	tgTput2 := throughput(func(i int) { readTG(2_000_000 + i) })
	bareTput2 := throughput(func(i int) { readBare(2_000_000 + i) })

	tgReadEvents, tgReadActions := events(t, s.Client, tgReadID)
	bareReadEvents, bareReadActions := events(t, s.Client, bareReadID)
	localReadEvents, localReadActions := events(t, s.Client, localReadID)
	tgApprEvents, tgApprActions := events(t, s.Client, tgApprID)
	bareApprEvents, bareApprActions := events(t, s.Client, bareApprID)

	rows := [][]string{
		{"measure", "toolgate", "bare", "toolgate / bare"},
		{"allowed read p50 (ms)", f(ms(tgRead.pct(.5))), f(ms(bareRead.pct(.5))), ratio(ms(tgRead.pct(.5)), ms(bareRead.pct(.5)))},
		{"allowed read p99 (ms)", f(ms(tgRead.pct(.99))), f(ms(bareRead.pct(.99))), ratio(ms(tgRead.pct(.99)), ms(bareRead.pct(.99)))},
		{"approval signal -> executed p50 (ms)", f(ms(tgAppr.pct(.5))), f(ms(bareAppr.pct(.5))), ratio(ms(tgAppr.pct(.5)), ms(bareAppr.pct(.5)))},
		{"approval signal -> executed p99 (ms)", f(ms(tgAppr.pct(.99))), f(ms(bareAppr.pct(.99))), ratio(ms(tgAppr.pct(.99)), ms(bareAppr.pct(.99)))},
		{"reads/s at 32 concurrent, one worker", f(tgTput), f(bareTput), ratio(tgTput, bareTput)},
		{"reads/s at 32 concurrent, two workers", f(tgTput2), f(bareTput2), ratio(tgTput2, bareTput2)},
		{"cards up per second at 32 concurrent (bare: workflows started)", f(tgCards), f(bareCards), ratio(tgCards, bareCards)},
		{"history events per allowed read", fmt.Sprint(tgReadEvents), fmt.Sprint(bareReadEvents), ratio(float64(tgReadEvents), float64(bareReadEvents))},
		{"history events per approved transfer", fmt.Sprint(tgApprEvents), fmt.Sprint(bareApprEvents), ratio(float64(tgApprEvents), float64(bareApprEvents))},
		{"actions per allowed read", fmt.Sprint(tgReadActions), fmt.Sprint(bareReadActions), ratio(float64(tgReadActions), float64(bareReadActions))},
		{"actions per approved transfer", fmt.Sprint(tgApprActions), fmt.Sprint(bareApprActions), ratio(float64(tgApprActions), float64(bareApprActions))},
	}
	var table strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&table, "| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			table.WriteString("|---|---|---|---|\n")
		}
	}
	local := [][]string{
		{"measure", "toolgate", "bare, local activity, eager start", "toolgate / local floor"},
		{"allowed read p50 (ms)", f(ms(tgRead.pct(.5))), f(ms(localRead.pct(.5))), ratio(ms(tgRead.pct(.5)), ms(localRead.pct(.5)))},
		{"allowed read p99 (ms)", f(ms(tgRead.pct(.99))), f(ms(localRead.pct(.99))), ratio(ms(tgRead.pct(.99)), ms(localRead.pct(.99)))},
		{"history events per allowed read", fmt.Sprint(tgReadEvents), fmt.Sprint(localReadEvents), ratio(float64(tgReadEvents), float64(localReadEvents))},
		{"actions per allowed read", fmt.Sprint(tgReadActions), fmt.Sprint(localReadActions), ratio(float64(tgReadActions), float64(localReadActions))},
	}
	table.WriteString("\n")
	for i, r := range local {
		fmt.Fprintf(&table, "| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			table.WriteString("|---|---|---|---|\n")
		}
	}
	t.Logf("end to end, %d reads and %d approvals each way, interleaved; throughput over %s:\n%s", reads, approvals, window, table.String())
	_, file, _, _ := runtimeCaller()
	dir := filepath.Join(filepath.Dir(file), "..", "results")
	_ = os.MkdirAll(dir, 0o755)
	raw, _ := json.MarshalIndent(map[string]any{
		"when": time.Now().UTC().Format(time.RFC3339), "reads": map[string]any{"toolgate_ms": msList(tgRead), "bare_ms": msList(bareRead), "bare_local_ms": msList(localRead)},
		"approvals": map[string]any{"toolgate_ms": msList(tgAppr), "bare_ms": msList(bareAppr)},
		"throughput": map[string]float64{"toolgate": tgTput, "bare": bareTput, "toolgate_two_workers": tgTput2, "bare_two_workers": bareTput2,
			"toolgate_cards": tgCards, "bare_cards": bareCards},
		"server":  server(),
		"events":  map[string]int{"toolgate_read": tgReadEvents, "bare_read": bareReadEvents, "bare_local_read": localReadEvents, "toolgate_transfer": tgApprEvents, "bare_transfer": bareApprEvents},
		"actions": map[string]int{"toolgate_read": tgReadActions, "bare_read": bareReadActions, "bare_local_read": localReadActions, "toolgate_transfer": tgApprActions, "bare_transfer": bareApprActions},
	}, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, resultsName()+".json"), raw, 0o644)
	_ = os.WriteFile(filepath.Join(dir, resultsName()+".md"), []byte(table.String()), 0o644)
}

// bareWorker starts a worker for the floor's workflows on queue.
func bareWorker(t *testing.T, c client.Client, queue string) worker.Worker {
	bw := worker.New(c, queue, worker.Options{})
	bw.RegisterWorkflow(BareRead)
	bw.RegisterWorkflow(BareApproved)
	bw.RegisterWorkflow(BareLocalRead)
	bw.RegisterWorkflow(BareUpdated)
	bw.RegisterActivity(ba)
	if err := bw.Start(); err != nil {
		t.Fatal(err)
	}
	return bw
}

// server names the Temporal the run measured: an existing one
// (testenv.Configured, make bench-cluster) or the dev server the tests start.
func server() string {
	if testenv.Configured() {
		return "cluster at " + testenv.ExistingAddress()
	}
	return "dev server"
}

// resultsName is the file stem a run writes under bench/results: e2e for
// the dev server, e2e-cluster for make bench-cluster.
func resultsName() string {
	if testenv.Configured() {
		return "e2e-cluster"
	}
	return "e2e"
}

func f(v float64) string        { return fmt.Sprintf("%.1f", v) }
func ratio(a, b float64) string { return fmt.Sprintf("%.2f×", a/b) }
func msList(s series) []float64 {
	out := make([]float64, len(s))
	for i, d := range s {
		out[i] = ms(d)
	}
	return out
}

func runtimeCaller() (uintptr, string, int, bool) { return runtime.Caller(1) }
