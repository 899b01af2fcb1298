// Command carddesk serves the card desk stand-in (package carddesk) on
// CARDDESK_ADDR (127.0.0.1:8083), taking tokens the provider at
// CARDDESK_ISSUER issues for CARDDESK_AUDIENCE (http://CARDDESK_ADDR).
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/examples/carddesk"
	"github.com/toolgate/toolgate/internal/httpserver"
)

func main() {
	addr := env("CARDDESK_ADDR", "127.0.0.1:8083")
	issuer, audience := os.Getenv("CARDDESK_ISSUER"), env("CARDDESK_AUDIENCE", "http://"+addr)
	if issuer == "" {
		log.Fatal("carddesk: CARDDESK_ISSUER must name the identity provider whose tokens the desk takes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	desk, err := carddesk.New(ctx, issuer, audience, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("card desk stand-in listening on %s for tokens from %s to %s", addr, issuer, audience)
	if err := httpserver.Run(ctx, httpserver.New(addr, desk.Handler())); err != nil {
		log.Fatal(err)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
