package workflows

import (
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// WorkerOptions are the options every toolgate worker runs with, so the
// worker process and the tests stop the same way.
func WorkerOptions(p *policy.Policy) worker.Options {
	return worker.Options{WorkerStopTimeout: StopTimeout(p)}
}

// StopTimeout is how long a stopping worker (SIGTERM) lets running
// activities finish: longer than the longest attempt any of them may take,
// so a write in flight ends with its real outcome, not a cancellation.
func StopTimeout(p *policy.Policy) time.Duration {
	longest := bookkeepingTimeout
	for _, n := range p.Names() {
		spec, _ := p.Spec(n)
		longest = max(longest, spec.Timeout)
	}
	return longest + 5*time.Second
}

// NewWorker builds a toolgate worker on a task queue: the options above,
// the ToolCall workflow with its settings and every activity. The worker
// process and the tests' stacks both build theirs here.
func NewWorker(c client.Client, taskQueue string, s Settings, a *activities.Activities) worker.Worker {
	w := worker.New(c, taskQueue, WorkerOptions(s.Policy))
	Register(w, s)
	activities.Register(w, a)
	return w
}
