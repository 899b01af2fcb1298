// Package mcpupstream is toolgate's client of the MCP servers a team already
// runs. It starts a server over stdio or dials it over streamable HTTP, lists
// its tools, and pins each tool's definition (what a model reads and what
// decides its tier: name, title, description, input schema, annotations) by
// a hash, so that a definition changed after a person accepted it is seen
// before any model reads the new text. It makes one tools/call at a time as
// it is told; whether a call may run, retry or wait for a person is decided
// elsewhere.
//
// A stdio server is started with an environment of its own (PATH and what
// its pack names), never toolgate's: toolgate's database URL, keys and
// tokens do not reach a process somebody else wrote.
package mcpupstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is one upstream MCP server as a pack names it: a command run over
// stdio (Command, with Env and Dir) or a streamable HTTP endpoint (URL, with
// HTTPClient carrying how toolgate authenticates to it). Exactly one of
// Command and URL is set.
type Server struct {
	// Name is the server's name in its pack: the namespace of its tools.
	Name    string
	Command []string
	// Env is the stdio server's whole environment beside PATH.
	Env map[string]string
	Dir string
	URL string
	// HTTPClient makes the HTTP server's requests (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Bearer, when set, is sent with each of the HTTP server's requests
	// (Authorization: Bearer): a service credential, or the person's token
	// of a connection made for one call (As).
	Bearer string
	// Audience, when set, makes every call to the HTTP server run as the
	// signed-in person: with a token of theirs the provider issues for this
	// audience (RFC 8693), on a connection of its own (As).
	Audience string
	// KeyMeta is the _meta field in which the server accepts an idempotency
	// key; empty when it accepts none, and then no key is sent.
	KeyMeta string
}

// Definition is one upstream tool as the server describes it.
type Definition struct {
	Name        string               `json:"name"`
	Title       string               `json:"title,omitempty"`
	Description string               `json:"description,omitempty"`
	InputSchema json.RawMessage      `json:"inputSchema"`
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
}

// PinPrefix starts every pin: the hash that names it.
const PinPrefix = "sha256:"

// Pin is the definition's hash: the same for the same definition however
// the server orders its JSON keys, different when any word a model reads
// or any hint changes.
func (d Definition) Pin() string {
	var schema any
	dec := json.NewDecoder(bytes.NewReader(d.InputSchema))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		schema = string(d.InputSchema)
	}
	// The hints as toolgate writes them, not as an SDK version marshals
	// them: an upgrade must not change every pin.
	type hints struct {
		Title       string `json:"title"`
		ReadOnly    bool   `json:"readOnly"`
		Destructive *bool  `json:"destructive"`
		Idempotent  bool   `json:"idempotent"`
		OpenWorld   *bool  `json:"openWorld"`
	}
	var h *hints
	if a := d.Annotations; a != nil {
		h = &hints{a.Title, a.ReadOnlyHint, a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint}
	}
	canonical, err := json.Marshal(struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		InputSchema any    `json:"inputSchema"`
		Annotations *hints `json:"annotations"`
	}{d.Name, d.Title, d.Description, schema, h})
	if err != nil {
		// A definition that does not marshal pins to nothing a pack can name.
		return PinPrefix + "unreadable"
	}
	sum := sha256.Sum256(canonical)
	return PinPrefix + hex.EncodeToString(sum[:])
}

// Conn is a live connection to one upstream server and the tools it
// offers now.
type Conn struct {
	server  Server
	session *mcp.ClientSession

	mu    sync.Mutex
	tools map[string]Definition
	// ready is set once Dial has its session and first list: a change
	// announced before then is not followed (the first list is newer).
	ready bool
	// changed is called, outside mu, with the new definitions each time
	// the server announces that its tools changed and they are listed again.
	changed func(map[string]Definition)
	closed  chan struct{}
	// over records that the server sent a message over MaxMessage (the
	// SDK's error loses why its connection ended).
	over atomic.Bool
}

// dialTimeout bounds starting or dialing a server and listing its tools.
const dialTimeout = 30 * time.Second

// Dial starts or dials the server, lists its tools, and follows its
// announcements of changed tools, calling changed (which may be nil) with
// each new list.
func Dial(ctx context.Context, s Server, changed func(map[string]Definition)) (*Conn, error) {
	// A server may announce a change before the handshake is done: relist
	// follows announcements only once the first list is taken.
	c := &Conn{server: s, changed: changed, closed: make(chan struct{})}
	transport, err := s.transport(&c.over)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) { c.relist(ctx) },
	})
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, c.named(fmt.Errorf("MCP server %s: %w", s.Name, err))
	}
	c.session = session
	go func() {
		_ = session.Wait()
		close(c.closed)
	}()
	tools, err := c.list(ctx)
	if err != nil {
		_ = session.Close()
		return nil, err
	}
	c.mu.Lock()
	c.tools, c.ready = tools, true
	c.mu.Unlock()
	return c, nil
}

// As is the server reached with token for a bearer: one person's
// connection, for one call.
func (s Server) As(token string) Server {
	s.Bearer = token
	return s
}

// bearer adds a token to each request of an HTTP server's client made
// to the server's own origin, never to one a redirect names.
type bearer struct {
	token  string
	origin string
	next   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme+"://"+r.URL.Host != b.origin {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// transport is how the server is reached, every message it sends read
// within MaxMessage (over records one that is not).
func (s Server) transport(over *atomic.Bool) (mcp.Transport, error) {
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return nil, fmt.Errorf("MCP server %s: give a command or a URL, not both", s.Name)
	case len(s.Command) > 0:
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Dir = s.Dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for _, k := range sortedKeys(s.Env) {
			cmd.Env = append(cmd.Env, k+"="+s.Env[k])
		}
		return &commandTransport{cmd: cmd, over: over, max: MaxMessage}, nil
	case s.URL != "":
		base := http.DefaultClient
		if s.HTTPClient != nil {
			base = s.HTTPClient
		}
		next := base.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		if s.Bearer != "" {
			u, err := url.Parse(s.URL)
			if err != nil {
				return nil, fmt.Errorf("MCP server %s: %w", s.Name, err)
			}
			next = bearer{token: s.Bearer, origin: u.Scheme + "://" + u.Host, next: next}
		}
		client := *base
		client.Transport = boundedBodies{next: next, over: over, max: MaxMessage}
		return &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &client, MaxEventSize: MaxMessage + 64<<10}, nil
	}
	return nil, fmt.Errorf("MCP server %s: give a command or a URL", s.Name)
}

// list reads every page of the server's tools, within MaxTools,
// MaxListingBytes and a bound on pages.
func (c *Conn) list(ctx context.Context) (map[string]Definition, error) {
	tools := map[string]Definition{}
	size, cursor := 0, ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("MCP server %s: %w (%d pages at most)", c.server.Name, ErrListingTooLarge, maxListPages)
		}
		res, err := c.session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, c.named(fmt.Errorf("MCP server %s: listing its tools: %w", c.server.Name, err))
		}
		for _, t := range res.Tools {
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("MCP server %s: tool %s: its input schema: %w", c.server.Name, t.Name, err)
			}
			if _, dup := tools[t.Name]; dup {
				return nil, fmt.Errorf("MCP server %s: offers two tools named %s", c.server.Name, t.Name)
			}
			if size += len(t.Name) + len(t.Title) + len(t.Description) + len(schema); len(tools) == MaxTools || size > MaxListingBytes {
				return nil, fmt.Errorf("MCP server %s: %w (%d tools and %d bytes of definitions at most)", c.server.Name, ErrListingTooLarge, MaxTools, MaxListingBytes)
			}
			tools[t.Name] = Definition{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema, Annotations: t.Annotations}
		}
		if cursor = res.NextCursor; cursor == "" {
			return tools, nil
		}
	}
}

// named is err, or ErrAnswerTooLarge when the server sent a message over
// MaxMessage since the last error named so (the SDK's own error loses the
// cause). It ends the connection then: an HTTP one may outlive the message.
func (c *Conn) named(err error) error {
	if err == nil || !c.over.Swap(false) {
		return err
	}
	if c.session != nil {
		_ = c.session.Close()
	}
	if errors.Is(err, ErrAnswerTooLarge) {
		return err
	}
	return fmt.Errorf("MCP server %s: %w (%d bytes at most)", c.server.Name, ErrAnswerTooLarge, MaxMessage)
}

// relist reads the tools again after the server announced a change,
// within listTimeout. A list that fails keeps the last one: the pin is
// held to a fresh listing before each call anyway (Definition).
func (c *Conn) relist(ctx context.Context) {
	c.mu.Lock()
	ready := c.ready
	c.mu.Unlock()
	if !ready {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	tools, err := c.list(ctx)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	if c.changed != nil {
		c.changed(tools)
	}
}

// listTimeout bounds one listing of a server's tools.
const listTimeout = 10 * time.Second

// Definition lists the server's tools now and returns the one named: what
// a call is about to run, never a list the server may have changed since
// without saying so.
func (c *Conn) Definition(ctx context.Context, tool string) (Definition, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	tools, err := c.list(ctx)
	if err != nil {
		return Definition{}, false, err
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	d, ok := tools[tool]
	return d, ok, nil
}

// Definitions are the server's tools as last listed.
func (c *Conn) Definitions() map[string]Definition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Definition, len(c.tools))
	for k, v := range c.tools {
		out[k] = v
	}
	return out
}

// ErrClosed is returned by Call on a connection whose server has gone.
var ErrClosed = errors.New("the MCP server's connection is closed")

// Call makes one tools/call with the args as given, sending key as the
// server's idempotency key where it accepts one.
func (c *Conn) Call(ctx context.Context, tool string, args json.RawMessage, key string) (*mcp.CallToolResult, error) {
	select {
	case <-c.closed:
		return nil, fmt.Errorf("MCP server %s: %w", c.server.Name, ErrClosed)
	default:
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if c.server.KeyMeta != "" && key != "" {
		params.Meta = mcp.Meta{c.server.KeyMeta: key}
	}
	res, err := c.session.CallTool(ctx, params)
	if err != nil {
		return nil, c.named(fmt.Errorf("MCP server %s: %s: %w", c.server.Name, tool, err))
	}
	return res, nil
}

// Closed is closed when the server's connection ends.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Close ends the connection (and a stdio server's process).
func (c *Conn) Close() error { return c.session.Close() }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
