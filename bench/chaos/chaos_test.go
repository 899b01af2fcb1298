//go:build chaos

// Package chaos drives mixed tool calls through the real dev server,
// upstream and PostgreSQL while killing the worker with SIGKILL at random,
// and restarting the upstream and PostgreSQL once each; then it checks
// that nothing was lost, duplicated or run without authority.
// Run it with `make chaos` (CHAOS_CALLS=300) or the short pass in make test.
// Against make test-cluster's Temporal (TOOLGATE_TEMPORAL_CLUSTER_DIR) it
// runs two workers, kills one of them at random each time, and kills one
// Temporal service (history or matching) once, restarting it.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// proc is a restartable child process.
type proc struct {
	t    *testing.T
	name string
	bin  string
	env  []string
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *os.File
}

func (p *proc) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = append(os.Environ(), p.env...), p.dir, p.log, p.log
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait() }()
}

func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd = nil
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitListening(addr string) {
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type plan struct {
	id       string
	kind     string // read, task, approve, reject, expire
	workflow string
}

func TestChaos(t *testing.T) {
	calls := 60
	if v, err := strconv.Atoi(os.Getenv("CHAOS_CALLS")); err == nil && v > 0 {
		calls = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("chaos: %d calls, seed %d", calls, seed)

	dir := t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	build := exec.Command("go", "build", "-o", dir+"/", "./worker", "./cmd/upstream")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	db := testenv.Database(t)
	owner := testenv.OwnerPool(t, db)
	c := testenv.Temporal(t)
	upstreamAddr := freeAddr(t)
	queue := fmt.Sprintf("chaos-%d", seed%100000)
	env := []string{
		"TEMPORAL_ADDRESS=" + testenv.TemporalAddress(t), "DATABASE_URL=" + db, "UPSTREAM_URL=http://" + upstreamAddr,
		"UPSTREAM_ADDR=" + upstreamAddr, "UPSTREAM_TOKEN_KEY=chaos-upstream-key-of-at-least-32-chars", "TOOLGATE_TASK_QUEUE=" + queue,
		"TOOLGATE_APPROVAL_TTL=20s", "TOOLGATE_APPROVAL_KEYS=" + testenv.ApprovalKeysEnv(), "TOOLGATE_APPROVER_ISSUERS=" + testenv.Issuer, "TOOLGATE_CODEC_KEYS=" + testenv.CodecKeys,
		"METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0", "TOOLGATE_APPROVAL_SIGNING_KEY=", "LOG_LEVEL=warn",
		"TOOLGATE_DEV=1", // the calls use the seeded demo credential cred-kofi
	}
	logs, _ := os.Create(filepath.Join(dir, "processes.log"))
	upstream := &proc{t: t, name: "upstream", bin: filepath.Join(dir, "upstream"), env: env, dir: dir, log: logs}
	workers := []*proc{{t: t, name: "worker", bin: filepath.Join(dir, "worker"), env: env, dir: dir, log: logs}}
	cluster := os.Getenv("TOOLGATE_TEMPORAL_CLUSTER_DIR")
	if cluster != "" {
		workers = append(workers, &proc{t: t, name: "worker2", bin: filepath.Join(dir, "worker"), env: env, dir: dir, log: logs})
	}
	upstream.start()
	waitListening(upstreamAddr)
	for _, w := range workers {
		w.start()
	}
	t.Cleanup(func() {
		for _, w := range workers {
			w.kill()
		}
		upstream.kill()
	})

	// The chaos: SIGKILL the worker every 1-4 s; restart the upstream a third
	// of the way through the calls and PostgreSQL at two thirds.
	var kills atomic.Int32
	done := make(chan struct{})
	chaosDone := make(chan struct{})
	spacing := 60 * time.Millisecond
	go func() {
		defer close(chaosDone)
		crng := rand.New(rand.NewPCG(seed, 11))
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(1000+crng.IntN(3000)) * time.Millisecond):
			}
			worker := workers[crng.IntN(len(workers))]
			worker.kill()
			kills.Add(1)
			time.Sleep(time.Duration(200+crng.IntN(600)) * time.Millisecond)
			worker.start()
		}
	}()
	restartsDone := make(chan struct{})
	temporalKilled := "none"
	go func() {
		defer close(restartsDone)
		time.Sleep(time.Duration(calls/3) * spacing)
		upstream.kill()
		time.Sleep(time.Second)
		upstream.start()
		waitListening(upstreamAddr)
		t.Log("chaos: upstream restarted")
		if cluster != "" {
			time.Sleep(time.Duration(calls/6) * spacing)
			svc := []string{"history", "matching"}[rand.New(rand.NewPCG(seed, 13)).IntN(2)]
			script := filepath.Join(root, "scripts", "temporal-cluster.sh")
			if out, err := exec.Command(script, "kill", cluster, svc).CombinedOutput(); err != nil {
				t.Errorf("kill Temporal %s: %v\n%s", svc, err, out)
			}
			time.Sleep(2 * time.Second)
			if out, err := exec.Command(script, "revive", cluster, svc).CombinedOutput(); err != nil {
				t.Errorf("restart Temporal %s: %v\n%s", svc, err, out)
			} else {
				temporalKilled = svc
				t.Logf("chaos: Temporal %s killed and restarted", svc)
			}
			time.Sleep(time.Duration(calls/6) * spacing)
		} else {
			time.Sleep(time.Duration(calls/3) * spacing)
		}
		// Only a private cluster (make test's) is restarted; a server named by
		// your own DATABASE_URL is never touched.
		if dir := os.Getenv("TOOLGATE_PG_DATADIR"); dir == "" {
			t.Log("chaos: PostgreSQL not restarted (no private cluster: DATABASE_URL was set)")
		} else if out, err := exec.Command(filepath.Join(root, "scripts", "pg.sh"), "restart", dir).CombinedOutput(); err != nil {
			t.Errorf("restart PostgreSQL: %v\n%s", err, out)
		} else {
			t.Log("chaos: PostgreSQL restarted")
		}
	}()

	// Workflow IDs of their own per run: a cluster keeps the runs before.
	conversation := fmt.Sprintf("chaos%d", seed%1_000_000_000)
	plans := make([]plan, calls)
	results := make([]workflows.ToolCallResult, calls)
	var wg sync.WaitGroup
	var bugs atomic.Int32
	for i := range plans {
		r := rng.IntN(100)
		kind := map[bool]string{true: "read"}[r < 25]
		switch {
		case r < 25:
		case r < 50:
			kind = "task"
		case r < 78:
			kind = "approve"
		case r < 89:
			kind = "reject"
		default:
			kind = "expire"
		}
		store := int64(110 + rng.IntN(12))
		delay := time.Duration(rng.IntN(2000)) * time.Millisecond
		plans[i] = plan{id: fmt.Sprint("c", i), kind: kind, workflow: workflows.WorkflowID(conversation, fmt.Sprint("c", i))}
		wg.Add(1)
		go func(i int, p plan) {
			defer wg.Done()
			time.Sleep(time.Duration(i) * spacing)
			in := workflows.ToolCallInput{ToolCallID: p.id, Session: policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager,
				Resources: mangrove.Stores(store, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121), SessionID: "chaos", ConversationID: conversation, CredentialRef: "cred-kofi"}}
			switch p.kind {
			case "read":
				in.Tool, in.Args = "get_stock", json.RawMessage(`{"articleId":40211}`)
			case "task":
				in.Tool, in.Args = "create_task", json.RawMessage(fmt.Sprintf(`{"kind":"recount","articleId":40211,"dueBy":"today","note":"Chaos task %d"}`, i))
			default:
				// Quantities vary so most transfers are their own intent (equivalent ones end already_pending).
				in.Tool, in.Args = "request_stock_transfer", json.RawMessage(fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"stockout_risk"}`, 1+i%7))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var first workflows.Outcome
			var err error
			for attempt := 0; ; attempt++ { // the agent retries its start while the stack is in trouble
				first, _, err = workflows.Call(ctx, c, testenv.Policy, queue, in)
				if err == nil || attempt == 20 {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				t.Errorf("%s: start: %v", p.id, err)
				bugs.Add(1)
				return
			}
			if first.Status == workflows.StatusPendingApproval && (p.kind == "approve" || p.kind == "reject") {
				time.Sleep(delay)
				decision := signoff.Approve
				if p.kind == "reject" {
					decision = signoff.Reject
				}
				approver := policy.Identity{UserID: fmt.Sprint("sm", store), Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(store)}
				a := testenv.Sign(signoff.Approval{Decision: decision, ArgsHash: first.ArgsHash, Approver: approver}, first.CardRef())
				for attempt := 0; attempt < 20; attempt++ {
					if err := c.SignalWorkflow(ctx, p.workflow, "", workflows.ApprovalSignal, a); err == nil {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
			if err := c.GetWorkflow(ctx, p.workflow, "").Get(ctx, &results[i]); err != nil {
				t.Errorf("%s did not end normally: %v", p.id, err)
				bugs.Add(1)
			}
		}(i, plans[i])
	}
	wg.Wait()
	close(done)
	<-chaosDone
	<-restartsDone

	// The checks.
	ctx := context.Background()
	outcomes := map[string]int{}
	lost, duplicates, unauthorized := 0, 0, 0
	for i, p := range plans {
		res := results[i]
		outcomes[p.kind+":"+string(res.Status)+"/"+string(res.Code)]++
		count := func(key string) int {
			var n int
			if err := owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event_key = $2`, p.workflow, key).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// The rows each ending must have left, in the order the workflow writes them.
		want := map[string]int{"decision": 1}
		switch res.Status {
		case "executed":
			if p.kind != "read" {
				want["outcome"] = 1
			}
			if p.kind == "approve" {
				want["approved"] = 1
			}
		case "failed":
			want["outcome"] = 1
			if count("decision") == 0 {
				delete(want, "decision") // the dry run failed, before any decision
			} else if p.kind == "approve" {
				want["approved"] = 1 // transfers fail only when they run, after approval
			}
		case "rejected":
			want["rejected"] = 1
		case "expired":
			want["expired"] = 1
		case "":
			continue // reported above as a bug
		}
		for key, n := range want {
			got := count(key)
			if got < n {
				lost++
				t.Errorf("%s (%s, %s): audit row %q missing", p.id, p.kind, res.Status, key)
			}
			if got > n {
				duplicates++
				t.Errorf("%s: audit row %q written %d times", p.id, key, got)
			}
		}
		var upstreamRows int
		_ = owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM mangrove.tasks WHERE idempotency_key = $1) + (SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1)`, p.workflow).Scan(&upstreamRows)
		if upstreamRows > 1 {
			duplicates++
			t.Errorf("%s: %d upstream effects", p.id, upstreamRows)
		}
		if res.Status == "executed" && p.kind != "read" && upstreamRows != 1 {
			lost++
			t.Errorf("%s: executed with %d upstream effects", p.id, upstreamRows)
		}
	}
	// No effect upstream without an allowed (task) or approved (transfer) decision.
	if err := owner.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM mangrove.tasks t WHERE NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.workflow_id = t.idempotency_key AND a.event = 'allowed'))
		     + (SELECT count(*) FROM mangrove.transfers t WHERE NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.workflow_id = t.idempotency_key AND a.event = 'approved'))`).Scan(&unauthorized); err != nil {
		t.Fatal(err)
	}
	if unauthorized != 0 {
		t.Errorf("%d upstream effects had no authorizing decision", unauthorized)
	}
	t.Logf("chaos figures: calls=%d workers=%d worker_kills=%d temporal_service_killed=%s upstream_restarts=1 postgres_restarts=1 duplicates=%d lost_audit_events=%d unauthorized_runs=%d workflow_failures=%d",
		calls, len(workers), kills.Load(), temporalKilled, duplicates, lost, unauthorized, bugs.Load())
	t.Logf("chaos outcomes: %v", outcomes)
	refusals := map[string]int{}
	rows, err := owner.Query(ctx, `SELECT reason, count(*) FROM audit_log WHERE event = 'approval_refused' GROUP BY reason`)
	if err == nil {
		for rows.Next() {
			var reason string
			var n int
			_ = rows.Scan(&reason, &n)
			refusals[reason] = n
		}
	}
	t.Logf("chaos approval refusals by reason: %v", refusals)
}
