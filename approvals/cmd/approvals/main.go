// Command approvals serves the card UI on APPROVALS_ADDR (:8080).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/internal/logging"
	"github.com/toolgate/toolgate/internal/pg"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

func main() {
	log := logging.New("approvals")
	defer log.Sync() //nolint:errcheck
	if err := run(log); err != nil {
		log.Error("approvals stopped", zap.Error(err))
		os.Exit(1)
	}
}

func run(log *zap.Logger) error {
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	if cfg.SigningKey == nil {
		return errors.New("TOOLGATE_APPROVAL_SIGNING_KEY is not set: the card UI signs every decision (starter keygen makes a key pair; make dev sets one up)")
	}
	sessionKey, err := config.SessionKey()
	if err != nil {
		return err
	}
	if !cfg.DevMode {
		return errors.New("the card UI has no sign-in to offer outside dev mode: the demo sign-in (one shared password) runs only with TOOLGATE_DEV=1, which make dev sets; real sign-in comes with OpenID Connect")
	}
	if len(sessionKey) == 0 {
		sessionKey = make([]byte, 32)
		_, _ = rand.Read(sessionKey)
		log.Warn("APPROVALS_SESSION_KEY is not set: using a random key, so a restart signs everyone out")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dbURL, err := cfg.ServiceDatabaseURL("approvals")
	if err != nil {
		return err
	}
	pool, err := pg.OpenService(ctx, dbURL, "approvals")
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := client.DialContext(ctx, withLogger(cfg.ClientOptions(), log))
	if err != nil {
		return err
	}
	defer c.Close()
	srv := httpserver.New(cfg.ApprovalsAddr, (&approvals.Server{
		Pool: pool, Temporal: c, Identity: approvals.DemoIdentity{}, Signer: *cfg.SigningKey, SessionKey: sessionKey,
		SecureCookies: os.Getenv("APPROVALS_SECURE_COOKIES") == "1", Logger: log}).Handler())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("card UI listening", zap.String("addr", cfg.ApprovalsAddr))
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func withLogger(o client.Options, log *zap.Logger) client.Options {
	o.Logger = logging.Temporal(log)
	return o
}
