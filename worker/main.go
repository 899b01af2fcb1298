// Command worker runs toolgate's ToolCall workflow and its activities.
package main

import (
	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/config"
)

func main() { config.Main("worker", app.Worker) }
