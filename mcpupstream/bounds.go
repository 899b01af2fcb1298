package mcpupstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessage bounds one message a server sends, where it is read: a stdio
// frame (a line), an HTTP answer's JSON body, one server-sent event. It
// leaves room for an outcome of 1 MiB (what the worker keeps) sent both as
// structured content and as its text, as go-sdk servers do.
const MaxMessage = 4 << 20

// Bounds of one listing of a server's tools.
const (
	MaxTools        = 500
	maxListPages    = 50
	MaxListingBytes = 2 << 20
)

// ErrAnswerTooLarge is a message over MaxMessage: the reading stops there,
// and the connection with it.
var ErrAnswerTooLarge = errors.New("the MCP server sent a message larger than toolgate reads")

// ErrListingTooLarge is a listing of a server's tools over its bounds.
var ErrListingTooLarge = errors.New("the MCP server lists more tools than toolgate reads")

// frameMode says what one message is in a stream being read.
type frameMode int

const (
	wholeStream frameMode = iota // an HTTP answer's JSON body
	eachLine                     // stdio: newline-delimited JSON
	eachEvent                    // server-sent events: up to a blank line
)

// boundedReader reads r, failing with ErrAnswerTooLarge once one message
// passes MaxMessage, and recording that it did in over (the connection's,
// so a caller can name the cause the SDK's own error loses).
type boundedReader struct {
	r     io.Reader
	mode  frameMode
	over  *atomic.Bool
	frame int // bytes of the current message
	line  int // bytes of the current line, for eachEvent
	max   int
}

func (b *boundedReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	for i := 0; i < n; i++ {
		switch c := p[i]; {
		case c == '\n' && b.mode == eachLine:
			b.frame = 0
			continue
		case c == '\n' && b.mode == eachEvent:
			if b.line == 0 {
				b.frame = 0
			}
			b.line = 0
		case c != '\r':
			b.line++
		}
		if b.frame++; b.frame > b.max {
			b.over.Store(true)
			return i, fmt.Errorf("%w (%d bytes at most)", ErrAnswerTooLarge, b.max)
		}
	}
	return n, err
}

// boundedBodies bounds each answer's body an HTTP server sends: a JSON
// body whole, an event stream event by event.
type boundedBodies struct {
	next http.RoundTripper
	over *atomic.Bool
	max  int
}

func (t boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	mode := wholeStream
	if media, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); media == "text/event-stream" {
		mode = eachEvent
	}
	res.Body = struct {
		io.Reader
		io.Closer
	}{&boundedReader{r: res.Body, mode: mode, over: t.over, max: t.max}, res.Body}
	return res, nil
}

// commandTransport runs a stdio server as go-sdk's CommandTransport does,
// its answers read through a boundedReader.
type commandTransport struct {
	cmd  *exec.Cmd
	over *atomic.Bool
	max  int
}

// stdioTerminate is how long closing waits for the server to exit after
// its stdin is closed, and again after SIGTERM, before it is killed.
const stdioTerminate = 5 * time.Second

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	return (&mcp.IOTransport{
		Reader: io.NopCloser(&boundedReader{r: stdout, mode: eachLine, over: t.over, max: t.max}),
		Writer: &serverStdin{WriteCloser: stdin, cmd: t.cmd},
		// The SDK's own cap, past ours, so ours names the cause first.
		MaxLineLength: t.max + 64<<10,
	}).Connect(ctx)
}

// serverStdin closes a stdio server as the MCP specification asks: its
// stdin first, then SIGTERM if it has not exited, then SIGKILL.
type serverStdin struct {
	io.WriteCloser
	cmd *exec.Cmd
}

func (s *serverStdin) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing the server's stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(stdioTerminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing the server: %w", err)
	}
	<-exited
	return nil
}
