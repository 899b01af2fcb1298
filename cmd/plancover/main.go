// Command plancover serves the PlanCover stand-in (package upstream) on
// PLANCOVER_ADDR (127.0.0.1:8084), taking tokens the provider at
// PLANCOVER_ISSUER issues for PLANCOVER_AUDIENCE (http://PLANCOVER_ADDR).
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/domains/plancover/upstream"
	"github.com/toolgate/toolgate/internal/httpserver"
)

func main() {
	addr := env("PLANCOVER_ADDR", "127.0.0.1:8084")
	issuer, audience := os.Getenv("PLANCOVER_ISSUER"), env("PLANCOVER_AUDIENCE", "http://"+addr)
	if issuer == "" {
		log.Fatal("plancover: PLANCOVER_ISSUER must name the identity provider whose tokens PlanCover takes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := upstream.New(ctx, issuer, audience, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("PlanCover stand-in listening on %s for tokens from %s to %s", addr, issuer, audience)
	if err := httpserver.Run(ctx, httpserver.New(addr, s.Handler())); err != nil {
		log.Fatal(err)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
