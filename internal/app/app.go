// Package app is each toolgate process's wiring: its settings in, its
// service running until the process is told to stop. A main under cmd/,
// worker/ or starter/ is one line over it, so what each process starts, and in what order, is
// read here in one place.
package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgate/toolgate/internal/logging"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// stopping is a context that ends when the process is interrupted or
// terminated.
func stopping() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// withLogger is Temporal client options that log through log.
func withLogger(o client.Options, log *zap.Logger) client.Options {
	o.Logger = logging.Temporal(log)
	return o
}
