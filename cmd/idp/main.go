// Command idp runs the demo OpenID provider (dev mode only) on IDP_ADDR
// (127.0.0.1:8082). `idp users` prints the seed users' passwords and TOTP
// secrets for an authenticator app; `idp users add PEOPLE.json` adds a
// pack's people to them.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devenv"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "users" {
		// In a second shell beside make dev: its users file and dev mode.
		devFile, devErr := devenv.Load()
		config.Main("idp", app.IDPUsers(devFile, devErr, os.Args[2:]))
		return
	}
	config.Main("idp", app.IDP)
}
