package mcpupstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/mcpupstream"
)

// TestAnswersAreBoundedWhereTheyAreRead: a server that answers a call with
// more than MaxMessage, over streamable HTTP as an event stream or as a
// JSON body, is refused at the transport with ErrAnswerTooLarge, not read
// whole first; a stdio server whose frame runs past it is refused the
// same way; a server that lists more tools than toolgate reads is refused
// with ErrListingTooLarge.
func TestAnswersAreBoundedWhereTheyAreRead(t *testing.T) {
	type none struct{}
	huge := strings.Repeat("a", mcpupstream.MaxMessage+1)
	for _, jsonBody := range []bool{false, true} {
		server := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
		mcp.AddTool(server, &mcp.Tool{Name: "small", Description: "A small answer."}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
		mcp.AddTool(server, &mcp.Tool{Name: "huge", Description: "An answer without end."}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: huge}}}, nil, nil
		})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: jsonBody}))
		c, err := mcpupstream.Dial(context.Background(), mcpupstream.Server{Name: "big", URL: srv.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Call(context.Background(), "small", json.RawMessage(`{}`), ""); err != nil || res.IsError {
			t.Fatalf("a small answer (JSON body %v): %v", jsonBody, err)
		}
		if _, err := c.Call(context.Background(), "huge", json.RawMessage(`{}`), ""); !errors.Is(err, mcpupstream.ErrAnswerTooLarge) {
			t.Errorf("an answer over %d bytes (JSON body %v): %v", mcpupstream.MaxMessage, jsonBody, err)
		}
		_ = c.Close()
		srv.Close()
	}

	// A stdio "server" whose first line never ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := mcpupstream.Dial(ctx, mcpupstream.Server{Name: "flood", Command: []string{"/bin/sh", "-c", fmt.Sprintf(`printf '{"jsonrpc":"2.0","id":1,"result":"'; head -c %d /dev/zero | tr '\000' a; sleep 30`, mcpupstream.MaxMessage+1)}}, nil)
	if !errors.Is(err, mcpupstream.ErrAnswerTooLarge) {
		t.Errorf("a stdio frame over %d bytes: %v", mcpupstream.MaxMessage, err)
	}

	many := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, nil)
	for i := range mcpupstream.MaxTools + 1 {
		mcp.AddTool(many, &mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: "One of many."}, func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return many }, nil))
	defer srv.Close()
	c, err := mcpupstream.Dial(context.Background(), mcpupstream.Server{Name: "many", URL: srv.URL}, nil)
	if err == nil {
		_ = c.Close()
	}
	if !errors.Is(err, mcpupstream.ErrListingTooLarge) {
		t.Errorf("a listing of %d tools: %v", mcpupstream.MaxTools+1, err)
	}
}
