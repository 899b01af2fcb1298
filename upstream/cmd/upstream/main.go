// Command upstream serves the Mangrove demo API that toolgate calls.
package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/internal/logging"
	"github.com/toolgate/toolgate/internal/pg"
	"github.com/toolgate/toolgate/upstream"
	"go.uber.org/zap"
)

func main() {
	log := logging.New("upstream")
	defer log.Sync() //nolint:errcheck
	cfg, err := config.FromEnv()
	if err != nil {
		log.Fatal("config", zap.Error(err))
	}
	if err := cfg.UpstreamSecret(); err != nil {
		log.Fatal("config", zap.Error(err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dbURL, err := cfg.ServiceDatabaseURL("upstream")
	if err != nil {
		log.Fatal("config", zap.Error(err))
	}
	pool, err := pg.OpenService(ctx, dbURL, "upstream")
	if err != nil {
		log.Fatal("database", zap.Error(err))
	}
	defer pool.Close()
	srv := httpserver.New(cfg.UpstreamAddr, (&upstream.Server{Pool: pool, Key: []byte(cfg.UpstreamKey), Logger: log}).Handler())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("upstream listening", zap.String("addr", cfg.UpstreamAddr))
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("listen", zap.Error(err))
	}
}
