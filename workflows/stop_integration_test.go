package workflows_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// TestStoppingTheWorkerLetsACallFinish: the worker is stopped (SIGTERM's
// path) while a create_task is inside the upstream. The running activity
// finishes, the call ends executed, and the task exists once.
func TestStoppingTheWorkerLetsACallFinish(t *testing.T) {
	arrived := make(chan struct{}, 1)
	s := testenv.NewStackWith(t, testenv.StackOptions{UpstreamWrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tasks") {
				arrived <- struct{}{}
				time.Sleep(2 * time.Second) // a slow store system
			}
			h.ServeHTTP(w, r)
		})
	}})
	ctx := context.Background()
	in := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "c1", Args: json.RawMessage(`{"kind":"recount","articleId":40211,"dueBy":"today"}`), Session: ama("stop")}
	run, err := workflows.Start(ctx, s.Client, s.Policy, s.TaskQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the task never reached the upstream")
	}
	s.StopWorker() // what the worker does on SIGTERM
	s.StartWorker(t)
	res := awaitResult(t, run, time.Minute, "the stopped call did not end")
	var tasks int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.tasks WHERE idempotency_key = $1`, run.GetID()).Scan(&tasks)
	if res.Status != workflows.StatusExecuted || tasks != 1 {
		t.Fatalf("stopped mid-call: %s/%s %q, %d tasks", res.Status, res.Code, res.Message, tasks)
	}
}
