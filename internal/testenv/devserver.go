package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
)

// devServerProcess is the tests' Temporal dev server: the CLI's start-dev
// on a free port, started so that it is killed with the test binary
// (Pdeathsig), even when a test panics and TestMain never stops it; a
// guard proved by make prove panics often, and each left one running.
type devServerProcess struct {
	cmd    *exec.Cmd
	addr   string
	client client.Client
	exited chan error
}

// startDevServer starts the CLI at path with args after start-dev's own,
// and returns once its frontend answers a health check. A server that
// exits before it comes up is started again, twice at most: start-dev
// picks its inner services' ports itself, and another test binary's server
// starting at the same moment can take one first.
func startDevServer(ctx context.Context, path string, args []string) (*devServerProcess, error) {
	for attempt := 1; ; attempt++ {
		d, err := startDevServerOnce(ctx, path, args)
		if !errors.Is(err, errExitedEarly) || attempt == 3 {
			return d, err
		}
	}
}

// errExitedEarly is a dev server that exited before its frontend answered.
var errExitedEarly = errors.New("exited before it came up")

func startDevServerOnce(ctx context.Context, path string, args []string) (*devServerProcess, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	all := append([]string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--namespace", namespace,
		"--headless", "--log-level", "error", "--dynamic-config-value", "frontend.enableServerVersionCheck=false"}, args...)
	cmd := exec.Command(path, all...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// The signal comes when the thread that started the child ends, so it
	// is started from a thread locked to a goroutine that never returns:
	// that thread ends only with the process.
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		started <- cmd.Start()
		select {}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	d := &devServerProcess{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan error, 1)}
	go func() { d.exited <- cmd.Wait() }()
	for {
		c, err := client.Dial(client.Options{HostPort: d.addr, Namespace: namespace, Logger: sdkLogger})
		if err == nil {
			if _, err = c.CheckHealth(ctx, &client.CheckHealthRequest{}); err == nil {
				d.client = c
				return d, nil
			}
			c.Close()
		}
		select {
		case <-ctx.Done():
			_ = d.Stop()
			return nil, fmt.Errorf("the dev server at %s did not come up: %w (last: %v)", d.addr, ctx.Err(), err)
		case exit := <-d.exited:
			return nil, fmt.Errorf("the dev server at %s %w: %v", d.addr, errExitedEarly, exit)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Client is a client of the server's namespace.
func (d *devServerProcess) Client() client.Client { return d.client }

// FrontendHostPort is the server's frontend address.
func (d *devServerProcess) FrontendHostPort() string { return d.addr }

// Stop ends the server and waits for it.
func (d *devServerProcess) Stop() error {
	if d.client != nil {
		d.client.Close()
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		return err
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		return <-d.exited
	}
}
