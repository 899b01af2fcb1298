// Command upstream serves the Mangrove demo API that toolgate calls. It is
// another system: it reads its own settings and imports nothing of toolgate.
package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove/upstream"
	"go.uber.org/zap"
)

func main() {
	log, err := zap.NewProduction()
	if err != nil {
		log = zap.NewExample()
	}
	log = log.With(zap.String("process", "upstream"))
	defer log.Sync() //nolint:errcheck
	s, err := upstream.SettingsFromEnv()
	if err != nil {
		log.Fatal("config", zap.Error(err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := s.OpenPool(ctx)
	if err != nil {
		log.Fatal("database", zap.Error(err))
	}
	defer pool.Close()
	srv := s.HTTPServer((&upstream.Server{Pool: pool, Key: []byte(s.Key), Logger: log}).Handler())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("upstream listening", zap.String("addr", s.Addr))
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("listen", zap.Error(err))
	}
}
