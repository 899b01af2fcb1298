// Command gen writes register/locations.json: the function each guard of
// register/guards.json sits in, read from the source (go generate ./register).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolgate/toolgate/register"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "register/gen:", err)
		os.Exit(1)
	}
}

func run() error {
	gs, err := register.Guards()
	if err != nil {
		return err
	}
	locs, err := register.Locate("..", gs)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(locs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile("locations.json", append(b, '\n'), 0o644)
}
