// Command approvals serves the card UI on APPROVALS_ADDR (:8080).
package main

import (
	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/config"
)

func main() { config.Main("approvals", app.Approvals) }
