package approvals_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/httpserver"
)

// TestSlowClientsAreCutOff: a client that sends its headers, or its body,
// a byte at a time is disconnected by the server's read timeout instead of
// holding a connection open for ever (slowloris).
func TestSlowClientsAreCutOff(t *testing.T) {
	// A handler that reads the whole body, as a form post does.
	srv := httpserver.New("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) }))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.ReadTimeout > time.Minute {
		t.Fatalf("timeouts: read header %v, read %v, write %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	// Shorter, so the attack below takes a second, not a minute.
	srv.ReadHeaderTimeout, srv.ReadTimeout = 300*time.Millisecond, 600*time.Millisecond
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for name, head := range map[string]string{
		"slow headers": "GET / HTTP/1.1\r\nHost: x\r\n",
		"slow body":    "POST /signin HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, _ = fmt.Fprint(conn, head)
		closed := false
		for time.Since(start) < 5*time.Second {
			if _, err := conn.Write([]byte("a")); err != nil {
				closed = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		conn.Close()
		if !closed {
			t.Errorf("%s: the connection stayed open for 5 s", name)
		}
	}
}
