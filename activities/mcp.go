package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// ErrDefinitionChanged refuses a call of an MCP tool whose server now
// defines it otherwise than an operator accepted (its pin): nothing is
// sent until a person accepts the new definition.
const ErrDefinitionChanged = "definition_changed"

// MCPServers are the worker's connections to the packs' own MCP servers,
// each started or dialed at its first call and again after it ends.
type MCPServers struct {
	servers map[string]mcpupstream.Server
	log     *zap.Logger

	mu    sync.Mutex
	conns map[string]*mcpupstream.Conn
}

// NewMCPServers holds the servers a deployment's packs name (packs.Set's
// Servers); none are started until a call needs one.
func NewMCPServers(servers map[string]mcpupstream.Server, log *zap.Logger) *MCPServers {
	return &MCPServers{servers: servers, log: log, conns: map[string]*mcpupstream.Conn{}}
}

// conn is the live connection to the named server, started or dialed now
// if there is none or the last one ended.
func (m *MCPServers) conn(ctx context.Context, name string) (*mcpupstream.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[name]; ok {
		select {
		case <-c.Closed():
		default:
			return c, nil
		}
	}
	s, ok := m.servers[name]
	if !ok {
		return nil, fmt.Errorf("no MCP server is named %q", name)
	}
	c, err := mcpupstream.Dial(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	m.conns[name] = c
	return c, nil
}

// Close ends every connection, and with it each stdio server's process.
func (m *MCPServers) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, c := range m.conns {
		_ = c.Close()
		delete(m.conns, name)
	}
}

// callMCP makes an authorized call as one tools/call on its server, once
// the server still defines the tool as accepted. The server's answer
// becomes the JSON the sanitizer reads: its structured content when it
// gives one, else its text.
func (a *Activities) callMCP(ctx context.Context, in CallInput, spec policy.ToolSpec) (json.RawMessage, error) {
	target := spec.MCP
	if a.MCP == nil {
		return nil, temporal.NewNonRetryableApplicationError("the worker holds no MCP servers", ErrUpstream, nil)
	}
	c, err := a.MCP.conn(ctx, target.Server)
	if err != nil {
		return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the MCP server %s could not be reached", target.Server), ErrUnavailable, errors.New(sanitize.Text(err.Error())))
	}
	def, ok, err := c.Definition(ctx, target.Tool)
	if err != nil {
		return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the MCP server %s did not list its tools; nothing was sent", target.Server), ErrUnavailable, errors.New(sanitize.Text(err.Error())))
	}
	if !ok || def.Pin() != target.Pin {
		a.Logger.Warn("an MCP tool's definition is not the one accepted; the call is refused",
			zap.String("server", target.Server), zap.String("tool", target.Tool), zap.String("accepted", target.Pin), zap.String("now", def.Pin()))
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s on %s is no longer defined as a person accepted it, so it was not run; a person must read and accept the new definition first", target.Tool, target.Server), ErrDefinitionChanged, nil)
	}
	res, err := c.Call(ctx, target.Tool, in.Args, in.IdempotencyKey)
	if err != nil {
		return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the MCP server %s did not answer", target.Server), ErrUnavailable, errors.New(sanitize.Text(err.Error())))
	}
	if res.IsError {
		return nil, temporal.NewNonRetryableApplicationError(sanitize.Text(clipText(resultText(res), 300)), ErrUpstream, nil)
	}
	answer, err := json.Marshal(map[string]string{"text": resultText(res)})
	if res.StructuredContent != nil {
		answer, err = json.Marshal(res.StructuredContent)
	}
	if err != nil || len(answer) > maxAnswer {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the MCP server %s answered with more than toolgate reads (%d bytes at most), or with what does not read as JSON", target.Server, maxAnswer), ErrUpstream, nil)
	}
	return answer, nil
}

// maxAnswer bounds an MCP server's answer, as an HTTP upstream's is.
const maxAnswer = 1 << 20

// resultText is a result's text content; other kinds of content are named,
// not passed on.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, "[an image, left out]")
		case *mcp.AudioContent:
			parts = append(parts, "[audio, left out]")
		default:
			parts = append(parts, "[content that is not text, left out]")
		}
	}
	return strings.Join(parts, "\n")
}

func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
