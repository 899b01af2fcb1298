//go:build bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
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
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// TestCardThroughput puts cards up from 32 concurrent callers for a window
// and says where the CPU went: this process (worker, client, upstream),
// the Temporal server and PostgreSQL, in CPU milliseconds per card. Beside
// it, on the same server, two floors that do nothing but wait: a bare
// workflow started eagerly (as make bench's), and one started by
// Update-with-Start whose update returns at once (the round trip a card
// needs to answer with its first outcome). With BENCH_CPUPROFILE=<file> it
// writes this process's CPU profile of a first, extra toolgate round.
// BENCH_WINDOW (seconds) and BENCH_ROUNDS set the window and the rounds.
// make bench-cards runs it.
func TestCardThroughput(t *testing.T) {
	window, rounds := 5*time.Second, 3
	if v, err := strconv.Atoi(os.Getenv("BENCH_WINDOW")); err == nil && v > 0 {
		window = time.Duration(v) * time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{ApprovalTTL: time.Hour, Policy: liftedTransferLimits(t)})
	ctx := context.Background()
	bareQueue := s.TaskQueue + "-bare"
	bw := bareWorker(t, s.Client, bareQueue)
	defer bw.Stop()
	var next, cards atomic.Int64
	card := func() { putCard(t, s, "card-throughput", int(cards.Add(1))) }
	eager := func() {
		id := fmt.Sprint("bare-card-", next.Add(1))
		if _, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue, EnableEagerStart: true}, BareApproved, int64(112)); err != nil {
			t.Error(err)
		}
	}
	withStart := func() {
		id := fmt.Sprint("bare-uws-", next.Add(1))
		op := s.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue, WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
			BareUpdated)
		h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "first", WaitForStage: client.WorkflowUpdateStageCompleted}})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err != nil {
			t.Error(err)
		}
	}
	for range 20 { // warm up: connections, caches
		card()
		eager()
		withStart()
	}
	// Rounds, interleaved: the server's cost per call grows with the
	// workflows left open, so each shape takes its turn as the count grows.
	runs := []struct {
		name string
		put  func()
	}{{"toolgate cards", card}, {"bare, eager start", eager}, {"bare, Update-with-Start", withStart}}
	if f := os.Getenv("BENCH_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			t.Fatal(err)
		}
		measureCPU(t, runs[0].name+" (profiled)", window, runs[0].put)
		pprof.StopCPUProfile()
	}
	rates := map[string][]float64{}
	server := map[string][]float64{}
	for range rounds {
		for _, run := range runs {
			rate, srv := measureCPU(t, run.name, window, run.put)
			rates[run.name] = append(rates[run.name], rate)
			server[run.name] = append(server[run.name], srv)
		}
	}
	for _, run := range runs {
		t.Logf("cards: summary: %-24s per second %v, Temporal server ms CPU per call %v", run.name, rounded(rates[run.name]), rounded(server[run.name]))
	}
}

// rounded prints figures to one decimal.
func rounded(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// BareUpdated is the floor for a card's first outcome: started by
// Update-with-Start, its update answers at once; then it waits, as a card.
func BareUpdated(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandler(ctx, "first", func(ctx workflow.Context) (string, error) { return "up", nil }); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	return nil
}

// measureCPU runs put from 32 concurrent callers for the window, logs the
// rate and each part's CPU per call, and returns the rate and the Temporal
// server's CPU milliseconds per call.
func measureCPU(t *testing.T, name string, window time.Duration, put func()) (rate, serverMS float64) {
	before := cpuByPart(t)
	var n atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < window {
				put()
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	took, after, calls := time.Since(start), cpuByPart(t), float64(n.Load())
	t.Logf("cards: %s: %.0f in %.1f s = %.1f per second", name, calls, took.Seconds(), calls/took.Seconds())
	var total time.Duration
	for _, part := range []string{"toolgate (worker, client, upstream)", "temporal server", "postgres"} {
		d := after[part] - before[part]
		total += d
		t.Logf("cards: %s: %-36s %6.2f ms CPU per call (%4.0f%% of a core)", name, part, float64(d.Microseconds())/1000/calls, 100*d.Seconds()/took.Seconds())
		if part == "temporal server" {
			serverMS = float64(d.Microseconds()) / 1000 / calls
		}
	}
	t.Logf("cards: %s: %-36s %6.2f ms CPU per call (%4.0f%% of the machine's 2 cores)", name, "all", float64(total.Microseconds())/1000/calls, 50*total.Seconds()/took.Seconds())
	return calls / took.Seconds(), serverMS
}

// putCard puts up the k-th distinct transfer card (each its own intent, of
// the 9,570 distinctTransfer has) in conversation conv.
func putCard(t *testing.T, s *testenv.Stack, conv string, k int) {
	stores := []int64{110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121}
	store, args := distinctTransfer(stores, k)
	first, _, err := workflows.Call(context.Background(), s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer",
		ToolCallID: fmt.Sprint("card", k), Args: json.RawMessage(args), Session: kofiAt(conv, store)})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Errorf("card %d: %v %+v", k, err, first)
	}
}

// kofiAt is kofi, the area manager, signed in for one store.
func kofiAt(conv string, store int64) policy.Session {
	return policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(store), SessionID: "b", ConversationID: conv, CredentialRef: "cred-kofi"}
}

// cpuByPart reads the CPU time (user + system) used so far by this
// process, the Temporal server it started and every PostgreSQL process.
func cpuByPart(t *testing.T) map[string]time.Duration {
	out := map[string]time.Duration{}
	self := os.Getpid()
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		comm := s[open+1 : close]
		f := strings.Fields(s[close+2:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		d := time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
		switch {
		case pid == self:
			out["toolgate (worker, client, upstream)"] += d
		case ppid == self && comm == "temporal":
			out["temporal server"] += d
		case comm == "postgres":
			out["postgres"] += d
		}
	}
	if out["temporal server"] == 0 && !testenv.Configured() {
		t.Log("cards: no Temporal server process found among this process's children")
	}
	return out
}
