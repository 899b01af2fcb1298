// Command northgate serves the Northgate Bank stand-in (package upstream)
// on NORTHGATE_ADDR (127.0.0.1:8085), taking tokens the provider at
// NORTHGATE_ISSUER issues for NORTHGATE_AUDIENCE (http://NORTHGATE_ADDR).
// "northgate code dana" prints the one-time code dana's app shows now.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/domains/northgate/upstream"
	"github.com/toolgate/toolgate/internal/httpserver"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "code" {
		code, err := upstream.Demo().Code(os.Args[2], time.Now())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(code)
		return
	}
	addr := env("NORTHGATE_ADDR", "127.0.0.1:8085")
	issuer, audience := os.Getenv("NORTHGATE_ISSUER"), env("NORTHGATE_AUDIENCE", "http://"+addr)
	if issuer == "" {
		log.Fatal("northgate: NORTHGATE_ISSUER must name the identity provider whose tokens the bank takes")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := upstream.New(ctx, issuer, audience, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("Northgate Bank stand-in listening on %s for tokens from %s to %s", addr, issuer, audience)
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
