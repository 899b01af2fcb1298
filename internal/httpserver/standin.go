package httpserver

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// StandIn runs the stand-in for another system, an OAuth resource server
// called name, until the process is stopped. It listens on <prefix>_ADDR
// (addr when unset) and takes the tokens the provider at <prefix>_ISSUER
// issues for <prefix>_AUDIENCE (http:// and its address when unset);
// handler builds its routes once the provider is known.
func StandIn(name, prefix, addr string, handler func(ctx context.Context, issuer, audience string) (http.Handler, error)) {
	if v := os.Getenv(prefix + "_ADDR"); v != "" {
		addr = v
	}
	issuer, audience := os.Getenv(prefix+"_ISSUER"), os.Getenv(prefix+"_AUDIENCE")
	if issuer == "" {
		log.Fatalf("%s: %s_ISSUER must name the identity provider whose tokens %s takes", name, prefix, name)
	}
	if audience == "" {
		audience = "http://" + addr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, err := handler(ctx, issuer, audience)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	log.Printf("%s stand-in listening on %s for tokens from %s to %s", name, addr, issuer, audience)
	if err := Run(ctx, New(addr, h)); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
}
