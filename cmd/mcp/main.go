// Command mcp serves toolgate's MCP server on MCP_ADDR (127.0.0.1:8090).
package main

import (
	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/config"
)

func main() { config.Main("mcp", app.MCP) }
