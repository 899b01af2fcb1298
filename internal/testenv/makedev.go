package testenv

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/idp"
)

// DevStack is make dev (scripts/dev.sh, as the Makefile runs it) in a
// folder of its own, with this tree's binaries in its bin/, its own
// PostgreSQL cluster and Temporal dev server.
type DevStack struct {
	// Root is the folder make dev runs in, as a checkout's root.
	Root string
	// Issuer is the demo provider's URL, Cards the card UI's, MCP the MCP
	// endpoint's, Database the private cluster's, Temporal the frontend's
	// address.
	Issuer, Cards, MCP, Database, Temporal string
	// Printed is what make dev has printed so far.
	Printed func() string
	// Group is make dev's process group; Parent, with UnderMake, make.
	Group, Parent int
	// Moved maps each address make dev listens on by default
	// (127.0.0.1:8090, localhost:8090) to the free one it listens on here.
	Moved map[string]string
}

// MakeDevOptions say how a DevStack differs from a newcomer's make dev.
type MakeDevOptions struct {
	// AsCheckout copies every file of the repository into Root, so
	// commands written for a checkout beside make dev (the docs') run
	// there, with make dev's ports moved as DevStack.Moved says. Without
	// it, Root holds only what make dev reads, and a card is answered at
	// once over MCP. Either way every port is moved to a free one, so a
	// make dev of the machine's own may run beside it.
	AsCheckout bool
	// UnderMake runs make dev as the docs say it, `make dev` with Make's
	// arguments (PACKS=… UPSTREAMS=… PEOPLE=…), in a whole checkout
	// (AsCheckout); DevStack.Parent is make.
	UnderMake bool
	Make      []string
	// Files are written into Root before make dev starts (name to text),
	// and Env are settings it starts with, as make passes the variables of
	// its command line (make dev PACKS=…): a team's own pack and people.
	Files map[string]string
	Env   []string
	// Temporal is the Temporal CLI make dev runs, in place of the one on
	// PATH (or make tools' bin/temporal): a stand-in that fails as a real
	// one can.
	Temporal string
}

// MakeDevPorts are the ports make dev listens on unless told otherwise.
var MakeDevPorts = []string{"7233", "8233", "8080", "8081", "8082", "8083", "8084", "8085", "8088", "8089", "8090", "9090"}

// MakeDev starts make dev and returns once its servers answer; the test's
// end stops it as Ctrl-C does, and checks it left no .dev/env behind.
func MakeDev(t testing.TB, o MakeDevOptions) *DevStack {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	repo, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, dir := range []string{filepath.Dir(root), root} { // the private cluster's postgres user reads through them
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.UnderMake {
		o.AsCheckout = true
	}
	files := []string{"scripts/dev.sh", "scripts/pg.sh", "examples/packs/carddesk.yaml", "examples/packs/reference.yaml", "examples/packs/reference.pins.json"}
	if o.AsCheckout {
		files = checkoutFiles(t, repo)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, info.Mode().Perm()|0o644); err != nil {
			t.Fatal(err)
		}
		// Its time too: make compares them (the npm packages are up to date).
		if err := os.Chtimes(filepath.Join(root, f), info.ModTime(), info.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(root, "bin")+"/", "./cmd/...", "./worker", "./starter")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	temporal, err := exec.LookPath("temporal")
	if err != nil {
		temporal, err = exec.LookPath(filepath.Join(repo, "bin", "temporal"))
	}
	if err != nil {
		t.Fatalf("the Temporal CLI (make tools): %v", err)
	}
	if o.Temporal != "" {
		temporal = o.Temporal
	}
	if err := os.Symlink(temporal, filepath.Join(root, "bin", "temporal")); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"staticcheck", "workflowcheck"} { // make tools takes them as they are
		if _, err := os.Stat(filepath.Join(repo, "bin", tool)); err == nil {
			if err := os.Symlink(filepath.Join(repo, "bin", tool), filepath.Join(root, "bin", tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The npm packages (make node installs them): the reference servers the
	// reference pack starts, and the clients the docs run.
	ReferenceServer(t, "mcp-server-filesystem")
	for _, dir := range []string{"examples/mcp", "examples/temporal-ts", "mcpgate/testdata/client"} {
		if _, err := os.Stat(filepath.Join(repo, dir, "node_modules")); err != nil {
			continue
		}
		link, target := filepath.Join(root, dir), filepath.Join(repo, dir)
		if o.AsCheckout {
			link, target = filepath.Join(link, "node_modules"), filepath.Join(target, "node_modules")
		}
		if _, err := os.Lstat(link); err == nil && !o.AsCheckout {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range o.Files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &DevStack{Root: root}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(repo, "internal/testenv/no-temporal-config.toml")}
	// Every port moved to a free one, so make dev may run beside this one.
	moved, taken := map[string]string{}, map[string]bool{}
	for _, p := range MakeDevPorts {
		moved[p] = unclaimedPort(t, taken)
	}
	_, uiPort, _ := net.SplitHostPort(moved["8233"])
	d.Issuer, d.Cards, d.MCP, d.Temporal = "http://"+moved["8082"], "http://"+moved["8080"], "http://"+moved["8090"]+"/mcp", moved["7233"]
	d.Moved = map[string]string{}
	for p, to := range moved {
		d.Moved["127.0.0.1:"+p], d.Moved["localhost:"+p] = to, to
	}
	env[0] = "PATH=" + filepath.Join(root, "bin") + ":" + os.Getenv("PATH")
	env = append(env, "TEMPORAL_ADDRESS="+d.Temporal, "TOOLGATE_TEMPORAL_UI_PORT="+uiPort, "UPSTREAM_ADDR="+moved["8081"], "CARDDESK_ADDR="+moved["8083"],
		"PLANCOVER_ADDR="+moved["8084"], "NORTHGATE_ADDR="+moved["8085"], "IDP_ADDR="+moved["8082"], "APPROVALS_ADDR="+moved["8080"], "MCP_ADDR="+moved["8090"],
		"CODEC_ADDR="+moved["8089"], "METRICS_ADDR="+moved["9090"])
	if !o.AsCheckout {
		// The MCP server answers a card at once instead of waiting for it.
		env = append(env, "MCP_MAX_WAIT=0")
	}
	waitFor := []string{moved["8082"], moved["8080"], moved["8090"], moved["8083"], moved["8084"]}
	env = append(env, o.Env...)
	cmd := exec.Command("bash", "scripts/dev.sh")
	if o.UnderMake {
		cmd = exec.Command("make", append([]string{"--no-print-directory", "dev"}, o.Make...)...)
	}
	cmd.Dir, cmd.Env = root, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A pipe of our own, not StdoutPipe: the process started (make) may
	// end while what it ran still prints, and is reaped at once, so no
	// zombie of it stays in the group.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	printed := &lockedText{}
	d.Printed, d.Group = printed.String, cmd.Process.Pid
	if o.UnderMake {
		d.Parent = cmd.Process.Pid
	}
	t.Cleanup(func() {
		// Ctrl-C: dev.sh stops what it started, its cluster too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		deadline := time.After(30 * time.Second)
		select {
		case <-exited:
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		// What it started may outlive the process itself (UnderMake).
		for end := time.Now().Add(30 * time.Second); syscall.Kill(-cmd.Process.Pid, 0) == nil && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = out.Close()
		if _, err := os.Stat(filepath.Join(root, ".dev", "env")); !os.IsNotExist(err) {
			t.Errorf("make dev left .dev/env behind when it stopped (%v)", err)
		}
		if t.Failed() {
			for _, log := range []string{"temporal", "worker", "mcp", "carddesk", "plancover", "idp", "approvals"} {
				b, _ := os.ReadFile(filepath.Join(root, ".dev", log+".log"))
				t.Logf("%s.log:\n%s", log, b)
			}
		}
	})
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			printed.add(s.Text() + "\n")
			if m := regexp.MustCompile(`^\s+PostgreSQL\s+(\S+)`).FindStringSubmatch(s.Text()); m != nil {
				ready <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(ready)
	}()
	select {
	case db, ok := <-ready:
		if !ok {
			t.Fatalf("make dev stopped before it was running:\n%s", printed.String())
		}
		d.Database = db
	case <-time.After(3 * time.Minute):
		t.Fatalf("make dev is not running after 3 minutes:\n%s", printed.String())
	}
	// The banner comes as the processes start; each answers once it listens.
	for _, addr := range waitFor {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("make dev's %s does not answer: %v\n%s", addr, err, printed.String())
			}
		}
	}
	for _, needs := range []string{"card desk      http://" + waitFor[3], "PlanCover      http://" + waitFor[4]} {
		if !strings.Contains(printed.String(), needs) {
			t.Fatalf("make dev does not say %q:\n%s", needs, printed.String())
		}
	}
	return d
}

// unclaimedPort is a free port not in taken, below the kernel's ephemeral
// range, where no connection's local port and no other listener on port 0
// is put: make dev listens on it a minute or more after it is picked (make
// builds first), and a port of the ephemeral range is often taken by then
// by one of the connections the tests beside it make.
func unclaimedPort(t testing.TB, taken map[string]bool) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const first = 10000
	if low <= first+1000 {
		t.Fatalf("the ephemeral port range starts at %d: no port below it is left for make dev", low)
	}
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(first+rand.IntN(low-first)))
		if taken[addr] {
			continue
		}
		if l, err := net.Listen("tcp", addr); err == nil {
			_ = l.Close()
			taken[addr] = true
			return addr
		}
	}
	t.Fatalf("no free port between %d and %d", first, low)
	return ""
}

// checkoutFiles are the files of the checkout at repo: git's, or, in a
// copy without .git (make prove's), every file but what make and npm put
// there (bin/, .dev/, node_modules/).
func checkoutFiles(t testing.TB, repo string) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", repo, "ls-files").Output(); err == nil {
		return strings.Fields(string(out))
	}
	var files []string
	err := filepath.WalkDir(repo, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		switch {
		case e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules" || rel == "bin" || rel == ".dev" || rel == ".gobin" || rel == "tmp"):
			return filepath.SkipDir
		case e.Type().IsRegular():
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the checkout's files: %v", err)
	}
	return files
}

// Stopped reports within a minute whether make dev, stopped, left no
// process of its group running and no private PostgreSQL cluster or
// settings file behind; else what it left.
func (d *DevStack) Stopped() string {
	deadline := time.Now().Add(time.Minute)
	for {
		var left []string
		if err := syscall.Kill(-d.Group, 0); err == nil {
			left = append(left, fmt.Sprintf("a process of its group %d", d.Group))
		}
		for _, f := range []string{".dev/env", ".dev/pg/postmaster.pid"} {
			if _, err := os.Stat(filepath.Join(d.Root, f)); err == nil {
				left = append(left, f)
			}
		}
		if c, err := net.Dial("tcp", d.Temporal); err == nil {
			c.Close()
			left = append(left, "the Temporal dev server at "+d.Temporal)
		}
		if len(left) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(left, ", ")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockedText is what make dev printed, read while it still prints.
type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedText) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// User is a demo user from the users file make dev created.
func (d *DevStack) User(t testing.TB, id string) idp.User {
	t.Helper()
	users, _, err := idp.LoadOrCreateUsers(filepath.Join(d.Root, ".dev", "idp-users.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.ID == id {
			return u
		}
	}
	t.Fatalf("make dev has no user %s", id)
	return idp.User{}
}

// SecondShell is a command of make dev's bin/ as a person types it in a
// second shell: only PATH and HOME set, from another folder, so what it
// needs of the running stack it finds on its own (.dev/env).
func (d *DevStack) SecondShell(t testing.TB, program string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(d.Root, "bin", program), args...)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return cmd
}
