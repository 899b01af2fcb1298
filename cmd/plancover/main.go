// Command plancover serves the PlanCover stand-in (package upstream) on
// PLANCOVER_ADDR (127.0.0.1:8084), taking tokens the provider at
// PLANCOVER_ISSUER issues for PLANCOVER_AUDIENCE (http://PLANCOVER_ADDR).
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/packs/plancover/upstream"
)

func main() {
	httpserver.StandIn("PlanCover", "PLANCOVER", "127.0.0.1:8084", func(ctx context.Context, issuer, audience string) (http.Handler, error) {
		s, err := upstream.New(ctx, issuer, audience, 30*time.Second)
		if err != nil {
			return nil, err
		}
		return s.Handler(), nil
	})
}
