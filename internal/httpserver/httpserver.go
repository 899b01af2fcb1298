// Package httpserver builds every HTTP server toolgate's processes run, so
// none forgets a timeout: a slow or idle client is cut off instead of
// holding a connection open.
package httpserver

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Timeouts of every server. WriteTimeout leaves room for the card UI's
// wait on a decision's outcome (10 s).
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// New returns a server for addr with toolgate's timeouts and header limit.
func New(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes}
}

// Run serves srv until ctx ends, then shuts it down, giving requests in
// flight five seconds. It returns nil after a shutdown.
func Run(ctx context.Context, srv *http.Server) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
