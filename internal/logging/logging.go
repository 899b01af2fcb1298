// Package logging builds the zap logger every process uses and hands it to
// the Temporal SDK through the SDK's slog support.
package logging

import (
	"log/slog"
	"os"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// New returns a JSON zap logger for a named process. LOG_LEVEL=debug turns on debug lines.
func New(process string) *zap.Logger {
	cfg := zap.NewProductionConfig()
	if os.Getenv("LOG_LEVEL") == "debug" {
		cfg.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	}
	l, err := cfg.Build()
	if err != nil {
		l = zap.NewExample()
	}
	return l.With(zap.String("process", process))
}

// Temporal adapts a zap logger for the SDK. Workflow loggers add the
// workflow and run IDs to every line.
func Temporal(l *zap.Logger) log.Logger {
	return log.NewStructuredLogger(slog.New(zapslog.NewHandler(l.Core())))
}

// Main runs a process's body with its logger and exits 1, logged, when the
// body fails: every process's main is one line.
func Main(process string, run func(*zap.Logger) error) {
	l := New(process)
	if err := run(l); err != nil {
		l.Error(process+" stopped", zap.Error(err))
		_ = l.Sync()
		os.Exit(1)
	}
	_ = l.Sync()
}
