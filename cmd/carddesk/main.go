// Command carddesk serves the card desk stand-in (package carddesk) on
// CARDDESK_ADDR (127.0.0.1:8083), taking tokens the provider at
// CARDDESK_ISSUER issues for CARDDESK_AUDIENCE (http://CARDDESK_ADDR).
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/examples/carddesk"
	"github.com/toolgate/toolgate/internal/httpserver"
)

func main() {
	httpserver.StandIn("card desk", "CARDDESK", "127.0.0.1:8083", func(ctx context.Context, issuer, audience string) (http.Handler, error) {
		desk, err := carddesk.New(ctx, issuer, audience, 30*time.Second)
		if err != nil {
			return nil, err
		}
		return desk.Handler(), nil
	})
}
