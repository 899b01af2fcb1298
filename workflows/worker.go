package workflows

import (
	"time"

	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/worker"
)

// WorkerOptions are the options every toolgate worker runs with, so the
// worker process and the tests stop the same way.
func WorkerOptions() worker.Options {
	return worker.Options{WorkerStopTimeout: StopTimeout()}
}

// StopTimeout is how long a stopping worker (SIGTERM) lets running
// activities finish: longer than the longest attempt any of them may take,
// so a write in flight ends with its real outcome, not a cancellation.
func StopTimeout() time.Duration {
	longest := bookkeepingTimeout
	for _, name := range policy.Default().Names() {
		if spec, _ := policy.Default().Spec(name); spec.Timeout > longest {
			longest = spec.Timeout
		}
	}
	return longest + 5*time.Second
}
