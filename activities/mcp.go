package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/mcpupstream"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// MCPServers are the worker's connections to the packs' own MCP servers,
// each started or dialed at its first call and again after it ends. Each
// server is its own: a dial to one (30 s at most for a server that never
// finishes its handshake) never holds up a call to another, and a server
// whose dials keep failing is backed off alone.
type MCPServers struct {
	servers map[string]mcpupstream.Server
	log     *zap.Logger

	mu       sync.Mutex // guards entries and stopping; never held across I/O
	entries  map[string]*serverEntry
	stopping bool
}

// serverEntry is one server's connection, the dial under way, and its
// backoff after failed dials.
type serverEntry struct {
	mu       sync.Mutex // never held across I/O
	conn     *mcpupstream.Conn
	dialing  chan struct{} // closed when the dial under way ends
	failures int
	until    time.Time // no dial before this
	last     error
}

// Backoff after a server's dials fail: doubling from mcpBackoffFirst, at
// most mcpBackoffMax.
const (
	mcpBackoffFirst = time.Second
	mcpBackoffMax   = time.Minute
)

// backedOff is the error of a call to a server in its backoff: nothing was
// sent, and the next dial is at until.
type backedOff struct {
	server   string
	wait     time.Duration
	failures int
	last     error
}

func (b *backedOff) Error() string {
	return fmt.Sprintf("the MCP server %s failed its last %d dials (%v); toolgate dials it again in %s", b.server, b.failures, b.last, b.wait.Round(time.Millisecond))
}

// NewMCPServers holds the servers a deployment's packs name (packs.Set's
// Servers); none are started until a call needs one.
func NewMCPServers(servers map[string]mcpupstream.Server, log *zap.Logger) *MCPServers {
	return &MCPServers{servers: servers, log: log, entries: map[string]*serverEntry{}}
}

func (m *MCPServers) entry(name string) *serverEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[name]
	if !ok {
		e = &serverEntry{}
		m.entries[name] = e
	}
	return e
}

// conn is the live connection to the named server, started or dialed now
// if there is none or the last one ended. A call that finds a dial of the
// same server under way waits for it (or its own context); one that finds
// the server backed off fails at once with a *backedOff.
func (m *MCPServers) conn(ctx context.Context, name string) (*mcpupstream.Conn, error) {
	s, ok := m.servers[name]
	if !ok {
		return nil, fmt.Errorf("no MCP server is named %q", name)
	}
	e := m.entry(name)
	for {
		e.mu.Lock()
		if c := e.conn; c != nil && !closed(c) {
			e.mu.Unlock()
			return c, nil
		}
		if wait := time.Until(e.until); wait > 0 {
			err := &backedOff{server: name, wait: wait, failures: e.failures, last: e.last}
			e.mu.Unlock()
			return nil, err
		}
		if ch := e.dialing; ch != nil {
			e.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		e.dialing = make(chan struct{})
		e.mu.Unlock()
		return m.dial(ctx, name, s, e)
	}
}

// dial dials the server for e, which the caller has marked dialing, and
// records what came of it: the connection, or a failure that backs the
// server off. Whatever happens, even a panic, the dial is over for the
// calls waiting on it; a connection made once the worker is stopping is
// closed, not kept.
func (m *MCPServers) dial(ctx context.Context, name string, s mcpupstream.Server, e *serverEntry) (c *mcpupstream.Conn, err error) {
	defer func() {
		m.mu.Lock()
		stopping := m.stopping
		m.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		close(e.dialing)
		e.dialing = nil
		switch {
		case err == nil && stopping:
			_ = c.Close()
			c, err = nil, errors.New("the worker is stopping")
		case err == nil:
			e.conn, e.failures, e.until, e.last = c, 0, time.Time{}, nil
		case !errors.Is(ctx.Err(), context.Canceled):
			// The caller's own cancel is not the server's failure; a
			// timeout or a refusal is.
			e.failures++
			e.last = err
			e.until = time.Now().Add(min(mcpBackoffFirst<<min(e.failures-1, 10), mcpBackoffMax))
			m.log.Warn("an MCP server's dial failed; it is backed off", zap.String("server", name), zap.Int("failures", e.failures),
				zap.Time("until", e.until), zap.Error(err))
		}
	}()
	return mcpupstream.Dial(ctx, s, nil)
}

func closed(c *mcpupstream.Conn) bool {
	select {
	case <-c.Closed():
		return true
	default:
		return false
	}
}

// audience is the audience of the named server's per-person tokens, ""
// when its calls carry none.
func (m *MCPServers) audience(name string) string {
	if m == nil {
		return ""
	}
	return m.servers[name].Audience
}

// connFor is the connection a call runs on: the server's shared one, or,
// with the person's token, one of its own for this call (done closes it).
func (m *MCPServers) connFor(ctx context.Context, name, token string) (c *mcpupstream.Conn, done func(), err error) {
	if token == "" {
		c, err = m.conn(ctx, name)
		return c, func() {}, err
	}
	s, ok := m.servers[name]
	if !ok {
		return nil, nil, fmt.Errorf("no MCP server is named %q", name)
	}
	// A person's own dial is held to the server's backoff, but a failure
	// of it (their token) backs off nobody.
	e := m.entry(name)
	e.mu.Lock()
	if wait := time.Until(e.until); wait > 0 {
		err := &backedOff{server: name, wait: wait, failures: e.failures, last: e.last}
		e.mu.Unlock()
		return nil, nil, err
	}
	e.mu.Unlock()
	c, err = mcpupstream.Dial(ctx, s.As(token), nil)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close() }, nil
}

// Close ends every connection, and with it each stdio server's process.
func (m *MCPServers) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopping = true
	for _, e := range m.entries {
		e.mu.Lock()
		if e.conn != nil {
			_ = e.conn.Close()
			e.conn = nil
		}
		e.mu.Unlock()
	}
}

// unlisted is the activity error of a server whose tools could not be
// listed before a call: nothing was sent. A listing over toolgate's bounds
// is refused for good (a retry reads the same); any other failure is
// retried.
func unlisted(server string, err error) error {
	if errors.Is(err, mcpupstream.ErrListingTooLarge) || errors.Is(err, mcpupstream.ErrAnswerTooLarge) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the MCP server %s lists more than toolgate reads; nothing was sent", server), ErrUpstream, err)
	}
	return temporal.NewApplicationErrorWithCause(fmt.Sprintf("the MCP server %s did not list its tools; nothing was sent", server), ErrUnavailable, errors.New(sanitize.Text(err.Error())))
}

// unreachable is the activity error of a server that could not be
// reached: retryable, and when the server is backed off, retried no
// sooner than its next dial.
func unreachable(server string, err error) error {
	msg := fmt.Sprintf("the MCP server %s could not be reached", server)
	var b *backedOff
	if errors.As(err, &b) {
		return temporal.NewApplicationErrorWithOptions(msg+"; nothing was sent", ErrUnavailable,
			temporal.ApplicationErrorOptions{NextRetryDelay: b.wait, Cause: errors.New(sanitize.Text(err.Error()))})
	}
	return temporal.NewApplicationErrorWithCause(msg, ErrUnavailable, errors.New(sanitize.Text(err.Error())))
}

// callMCP makes an authorized call as one tools/call on its server, once
// the server still defines the tool as accepted. The server's answer
// becomes the JSON the sanitizer reads: its structured content when it
// gives one, else its text.
func (a *Activities) callMCP(ctx context.Context, in CallInput, spec policy.ToolSpec, token string) (json.RawMessage, error) {
	target := spec.MCP
	if a.MCP == nil {
		return nil, temporal.NewNonRetryableApplicationError("the worker holds no MCP servers", ErrUpstream, nil)
	}
	c, done, err := a.MCP.connFor(ctx, target.Server, token)
	if err == nil {
		defer done()
	}
	if err != nil {
		return nil, unreachable(target.Server, err)
	}
	if err := a.checkPin(ctx, c, target.Server, target.Tool, target.Pin, "it was not run"); err != nil {
		return nil, err
	}
	res, err := c.Call(ctx, target.Tool, in.Args, in.IdempotencyKey)
	if errors.Is(err, mcpupstream.ErrAnswerTooLarge) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the MCP server %s answered with more than toolgate reads (%d bytes at most a message); the call may have run", target.Server, mcpupstream.MaxMessage), ErrUpstream, err)
	}
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

// checkPin refuses, as ErrDefinitionChanged, a tool its server no longer
// defines as a person accepted it (pin); what says what was not done.
func (a *Activities) checkPin(ctx context.Context, c *mcpupstream.Conn, server, tool, pin, what string) error {
	def, ok, err := c.Definition(ctx, tool)
	if err != nil {
		return unlisted(server, err)
	}
	if ok && def.Pin() == pin {
		return nil
	}
	a.Logger.Warn("an MCP tool's definition is not the one accepted; refused",
		zap.String("server", server), zap.String("tool", tool), zap.String("accepted", pin), zap.String("now", def.Pin()))
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s on %s is no longer defined as a person accepted it, so %s; a person must read and accept the new definition first", tool, server, what),
		ErrDefinitionChanged, nil)
}

// Accepted checks, as the person, that a team's MCP server still defines a
// tool as a person accepted it. It runs before a card without a dry run
// goes up, so nobody is asked to approve a call that cannot run; the call
// checks again before it is sent.
func (a *Activities) Accepted(ctx context.Context, in PreviewInput) error {
	spec, _ := a.Policy.Spec(in.Tool)
	if spec.MCP == nil || a.MCP == nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s is not a tool of an MCP server this worker holds", in.Tool), ErrBadInput, nil)
	}
	token, err := a.exchange(ctx, in.Acting)
	if err != nil {
		return err
	}
	c, done, err := a.MCP.connFor(ctx, spec.MCP.Server, token)
	if err != nil {
		return unreachable(spec.MCP.Server, err)
	}
	defer done()
	return a.checkPin(ctx, c, spec.MCP.Server, spec.MCP.Tool, spec.MCP.Pin, "no card was put up")
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

// previewMCP is an MCP tool's dry run: its read-only preview tool, called
// on the same server with the call's args it names, only while the server
// still defines it as accepted. The card is the exact args, field by
// field, and what the preview read now (sanitized, at most
// previewCardRunes); a preview the server refuses (a file not there yet)
// is shown as its answer, not a failure. A person reads its text content,
// else its structured content. The action is the args as asked.
func (a *Activities) previewMCP(ctx context.Context, in PreviewInput, spec policy.ToolSpec, token string) (PreviewResult, error) {
	target, p := spec.MCP, spec.MCP.Preview
	if a.MCP == nil {
		return PreviewResult{}, temporal.NewNonRetryableApplicationError("the worker holds no MCP servers", ErrUpstream, nil)
	}
	var asked map[string]json.RawMessage
	if err := json.Unmarshal(in.Args, &asked); err != nil {
		return PreviewResult{}, badArgs(err)
	}
	args := map[string]json.RawMessage{}
	for name, from := range p.Args {
		if v, ok := asked[from]; ok {
			args[name] = v
		}
	}
	c, done, err := a.MCP.connFor(ctx, target.Server, token)
	if err == nil {
		defer done()
	}
	if err != nil {
		return PreviewResult{}, unreachable(target.Server, err)
	}
	// Both the tool and its dry run must still be as accepted: a card is
	// never put up for a call that could not run once approved.
	if err := a.checkPin(ctx, c, target.Server, target.Tool, target.Pin, "nothing was run and no card put up"); err != nil {
		return PreviewResult{}, err
	}
	if err := a.checkPin(ctx, c, target.Server, p.Tool, p.Pin, fmt.Sprintf("the dry run of %s was not run", target.Tool)); err != nil {
		return PreviewResult{}, err
	}
	body, _ := json.Marshal(args)
	// What the dry run reads is shown to the caller too: it must be theirs
	// to read with the preview tool's own row, with its narrowing.
	caller := policy.Session{UserID: in.UserID, Role: in.Role, Resources: in.EarlierResources.Or(in.Resources), SessionID: "dryrun",
		ConversationID: in.ConversationID, CredentialRef: in.CredentialRef}
	card := a.Policy.CardText(in.Tool, in.Args)
	v := a.Policy.Check(policy.Request{Tool: p.Row, Args: body, Session: caller}, nil)
	if v.Code != policy.CodeOK || v.Decision != policy.DecisionAllow {
		return PreviewResult{Action: in.Args, Card: card + " · Now: not shown (" + p.Row + " is not the caller's to read with: " + string(v.Code) + ")"}, nil
	}
	body = v.Args
	res, err := c.Call(ctx, p.Tool, body, "")
	if errors.Is(err, mcpupstream.ErrAnswerTooLarge) {
		return PreviewResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the MCP server %s answered the dry run with more than toolgate reads (%d bytes at most a message)", target.Server, mcpupstream.MaxMessage), ErrUpstream, err)
	}
	if err != nil {
		return PreviewResult{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the MCP server %s did not answer the dry run", target.Server), ErrUnavailable, errors.New(sanitize.Text(err.Error())))
	}
	now := resultText(res)
	if strings.TrimSpace(now) == "" && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			now = string(b)
		}
	}
	if len(now) > maxAnswer {
		now = now[:maxAnswer]
	}
	label := "Now"
	if res.IsError {
		label = "Now, " + p.Tool + " answered"
	}
	return PreviewResult{Action: in.Args, Card: card + " · " + label + ": " + previewShown(sanitize.Text(now))}, nil
}

// previewShown is what a preview read shows on its card: a JSON answer as
// its compact JSON when that fits, any other as a string value (cut to
// previewCardRunes), each as policy writes a value it did not write.
func previewShown(now string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(now)) == nil && utf8.RuneCount(b.Bytes()) <= previewCardRunes {
		return policy.CardJSON(b.String())
	}
	return policy.CardValue(clipText(now, previewCardRunes))
}

// previewCardRunes bounds what a preview adds to a card: enough to see
// what a write replaces, not a whole file.
const previewCardRunes = 600
