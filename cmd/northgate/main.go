// Command northgate serves the Northgate Bank stand-in (package upstream)
// on NORTHGATE_ADDR (127.0.0.1:8085), taking tokens the provider at
// NORTHGATE_ISSUER issues for NORTHGATE_AUDIENCE (http://NORTHGATE_ADDR).
// "northgate code dana" prints the one-time code dana's app shows now.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/packs/northgate/upstream"
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
	httpserver.StandIn("Northgate Bank", "NORTHGATE", "127.0.0.1:8085", func(ctx context.Context, issuer, audience string) (http.Handler, error) {
		s, err := upstream.New(ctx, issuer, audience, 30*time.Second)
		if err != nil {
			return nil, err
		}
		return s.Handler(), nil
	})
}
