// Package docs_test keeps the README and the pages of docs/ from drifting:
// the README stays a front page, every link resolves, every command block
// says whether a test runs it, and the blocks a person pastes run beside a
// real make dev and print what the page shows.
package docs_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// maxReadmeLines keeps the README a page a newcomer reads in five minutes.
const maxReadmeLines = 200

// blockTimeout bounds one pasted block (a call that waits for a card
// included).
const blockTimeout = 3 * time.Minute

// notRun marks a command block no test runs, with the reason, on the line
// before its fence.
var notRun = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// block is one fenced block of a page.
type block struct {
	page, lang, body string
	line             int
	// why is the not-run reason, "" for a block that runs.
	why string
	// shows is the text block right after it: what it prints.
	shows *block
}

// pages are the README and every page of docs/, by path from the root.
func pages(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, found...)
}

// blocks parses a page's fenced blocks (fences may be indented, as in a
// list).
func blocks(t *testing.T, page string) []*block {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out []*block
	var cur *block
	var indent string
	var body []string
	prevNonBlank := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				indent = l[:len(l)-len(strings.TrimLeft(l, " \t"))]
				cur = &block{page: page, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1}
				if m := notRun.FindStringSubmatch(prevNonBlank); m != nil {
					cur.why = m[1]
				}
				body = nil
			} else if trimmed != "" {
				prevNonBlank = trimmed
			}
			continue
		}
		if trimmed == "```" {
			cur.body = strings.Join(body, "\n")
			if n := len(out); cur.lang == "text" && n > 0 && out[n-1].lang == "sh" && out[n-1].shows == nil && adjacent(lines, out[n-1], cur) {
				out[n-1].shows = cur
			}
			out = append(out, cur)
			cur, prevNonBlank = nil, "```"
			continue
		}
		body = append(body, strings.TrimPrefix(l, indent))
	}
	if cur != nil {
		t.Errorf("%s:%d: a block is never closed", page, cur.line)
	}
	return out
}

// adjacent reports whether text starts right after sh ends: nothing but
// blank lines between them.
func adjacent(lines []string, sh, text *block) bool {
	end := sh.line + strings.Count(sh.body, "\n") + 1 // the closing fence's index
	if sh.body == "" {
		end = sh.line
	}
	for i := end + 1; i < text.line-1; i++ {
		if strings.TrimSpace(lines[i]) != "" {
			return false
		}
	}
	return true
}

// TestTheReadmeIsAFrontPage: the README is at most maxReadmeLines lines and
// links the docs index and the contract.
func TestTheReadmeIsAFrontPage(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move detail to a page of docs/", n, maxReadmeLines)
	}
	for _, link := range []string{"(docs/README.md)", "(docs/contract.md)"} {
		if !strings.Contains(string(raw), link) {
			t.Errorf("README.md does not link %s", link)
		}
	}
	index, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatalf("docs/ has no index (docs/README.md): %v", err)
	}
	for _, page := range pages(t)[1:] {
		if page != "README.md" && page != "register.md" && !strings.Contains(string(index), "("+page+")") && !strings.Contains(string(index), "("+page+"#") {
			t.Errorf("the docs index does not list %s", page)
		}
	}
}

// TestEveryCommandBlockSaysWhetherItRuns: a sh block runs in the doc test,
// or says on the line before it why not; a text block shows output or is
// text the page quotes.
func TestEveryCommandBlockSaysWhetherItRuns(t *testing.T) {
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			switch {
			case b.lang == "" || b.lang == "bash" || b.lang == "shell" || b.lang == "console":
				t.Errorf("%s:%d: a block's language is %q: say sh (pasted, and run by this test), or what it is (text, json, yaml, go, sql)", page, b.line, b.lang)
			case b.lang == "sh" && b.why == "" && strings.Contains(b.body, "<") && regexp.MustCompile(`<[a-z][a-z _-]*>`).MatchString(b.body):
				t.Errorf("%s:%d: a pasted block has a placeholder; give a value that works, or mark it <!-- not run: … -->", page, b.line)
			}
		}
	}
}

// link is a Markdown link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestEveryLinkResolves: every relative link names a file of the
// repository, and a Markdown file's heading where it names one.
func TestEveryLinkResolves(t *testing.T) {
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s, which is not there", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !hasAnchor(t, path, anchor) {
				t.Errorf("%s links %s, but %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
}

// hasAnchor reports whether a page has a heading whose GitHub anchor is a.
func hasAnchor(t *testing.T, page, a string) bool {
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	inBlock := false
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
		}
		if inBlock || !strings.HasPrefix(l, "#") {
			continue
		}
		if slug(strings.TrimLeft(l, "# ")) == a {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shows reports where printed stops matching what a page shows: each
// non-blank line shown matches a line printed, in order, with "…" standing
// for any text; "" when all do.
func shows(shown, printed string) string {
	out := strings.Split(printed, "\n")
	at := 0
	for _, want := range strings.Split(shown, "\n") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		parts := strings.Split(want, "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for at < len(out) && !re.MatchString(strings.TrimSpace(out[at])) {
			at++
		}
		if at == len(out) {
			return want
		}
		at++
	}
	return ""
}

// TestDriftIsNoticed: what a page shows is checked line by line, in order,
// "…" matching anything; a line that changed, went missing or moved is
// noticed.
func TestDriftIsNoticed(t *testing.T) {
	printed := "{\"status\":\"executed\",\"code\":\"ok\"}\ncases: 6\ndone"
	for shown, want := range map[string]string{
		"{\"status\":\"executed\",…}\ncases: 6": "",
		"…\ndone":                                  "",
		"cases: 6\n\n  done  ":                     "",
		"{\"status\":\"denied\",…}":                "{\"status\":\"denied\",…}",
		"cases: 7":                                 "cases: 7",
		"done\ncases: 6":                           "cases: 6",
		"{\"status\":\"executed\"}":                "{\"status\":\"executed\"}",
		"{\"status\":\"executed\",\"code\":\"ok\"": "{\"status\":\"executed\",\"code\":\"ok\"",
	} {
		if got := shows(shown, printed); got != want {
			t.Errorf("shows(%q) = %q, want %q", shown, got, want)
		}
	}
}

// TestThePastedBlocksRunBesideMakeDev runs make dev as a whole checkout on
// ports of its own, then each page's sh blocks in order in one shell of
// that checkout (only PATH, HOME and the moved TEMPORAL_ADDRESS set, as a
// second shell is), with make dev's ports moved: each must exit 0 and print
// what the page shows after it.
func TestThePastedBlocksRunBesideMakeDev(t *testing.T) {
	if !testenv.Required() && os.Getenv("TOOLGATE_DOCS_RUN") == "" {
		t.Skip("runs make dev on its own ports: set TOOLGATE_REQUIRE_SERVICES=1 (make test does) or TOOLGATE_DOCS_RUN=1")
	}
	var ran int
	var byPage [][]*block
	for _, page := range pages(t) {
		var run []*block
		for _, b := range blocks(t, page) {
			if b.lang == "sh" && b.why == "" {
				run = append(run, b)
			}
		}
		if len(run) > 0 {
			byPage = append(byPage, run)
		}
	}
	// make dev's own ports are held for the whole run: the blocks must
	// reach the stack on the ports it was moved to, as they do beside a
	// make dev of the machine's own (README: make test passes while make
	// dev runs). A port already taken is held by that make dev.
	for _, p := range testenv.MakeDevPorts {
		if l, err := net.Listen("tcp", "127.0.0.1:"+p); err == nil {
			t.Cleanup(func() { _ = l.Close() })
		}
	}
	d := testenv.MakeDev(t, testenv.MakeDevOptions{AsCheckout: true})
	// Each block as written, with make dev's ports moved; and the moved
	// Temporal address in the shell, as a person who moved it has it.
	var pairs []string
	for from, to := range d.Moved {
		pairs = append(pairs, from, to)
	}
	moved := strings.NewReplacer(pairs...)
	for _, run := range byPage {
		page := run[0].page
		t.Run(strings.TrimPrefix(page, "../"), func(t *testing.T) {
			sh := newShell(t, d.Root, "TEMPORAL_ADDRESS="+d.Temporal)
			for _, b := range run {
				printed, rc, err := sh.paste(moved.Replace(b.body))
				ran++
				where := fmt.Sprintf("%s:%d", b.page, b.line)
				switch {
				case err != nil:
					t.Fatalf("%s: %v\nprinted:\n%s", where, err, printed)
				case rc != 0:
					t.Fatalf("%s: exit status %d\n%s\nprinted:\n%s", where, rc, b.body, printed)
				case b.shows != nil:
					if miss := shows(moved.Replace(b.shows.body), printed); miss != "" {
						t.Fatalf("%s: the page shows %q (line %d), but the block printed:\n%s", where, miss, b.shows.line, printed)
					}
				}
			}
		})
	}
	t.Logf("%d pasted blocks ran on %d pages", ran, len(byPage))
}

// shell is one bash a person pastes blocks into, in order.
type shell struct {
	t   *testing.T
	dir string
	in  *os.File
	n   int
}

// newShell starts bash in dir with only PATH, HOME and env set.
func newShell(t *testing.T, dir string, env ...string) *shell {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Stdin = dir, r
	cmd.Env = append([]string{"PATH=" + machinePath(t), "HOME=" + os.Getenv("HOME")}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	t.Cleanup(func() {
		_ = w.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return &shell{t: t, dir: t.TempDir(), in: w}
}

// machinePath is PATH as a new shell has it: without the repository's
// bin/, which make puts first for its own commands, so a page that names
// a tool of bin/ without saying so fails here as it would for a person.
func machinePath(t *testing.T) string {
	t.Helper()
	own, err := filepath.Abs("../bin")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if abs, err := filepath.Abs(dir); err != nil || abs != own {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// paste runs one block in the shell (its variables stay for the next) and
// returns what it printed, stdout and stderr together, and its status.
func (s *shell) paste(body string) (string, int, error) {
	s.n++
	script, out, rc := filepath.Join(s.dir, fmt.Sprint(s.n, ".sh")), filepath.Join(s.dir, fmt.Sprint(s.n, ".out")), filepath.Join(s.dir, fmt.Sprint(s.n, ".rc"))
	if err := os.WriteFile(script, []byte(body+"\n"), 0o600); err != nil {
		return "", 0, err
	}
	if _, err := fmt.Fprintf(s.in, "source %q >%q 2>&1 </dev/null; echo $? >%q.tmp && mv %q.tmp %q\n", script, out, rc, rc, rc); err != nil {
		return "", 0, err
	}
	for deadline := time.Now().Add(blockTimeout); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(rc); err == nil {
			printed, _ := os.ReadFile(out)
			code, err := strconv.Atoi(strings.TrimSpace(string(b)))
			return string(printed), code, err
		}
		if time.Now().After(deadline) {
			printed, _ := os.ReadFile(out)
			return string(printed), 0, fmt.Errorf("still running after %v", blockTimeout)
		}
	}
}
