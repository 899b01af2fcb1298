package mcpgate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/workflows"
)

// ts2Line is one line the TypeScript 2.x client prints (testdata/client2).
type ts2Line struct {
	Event, Mode, URL, Message, Status, CallID, Error string
	InputRequired, IsError                           bool
	StateLength                                      int
	Choices                                          []string
}

// runTS2 starts the TypeScript 2.x client in mode with env and returns its
// lines as they come and its stdin.
func runTS2(t *testing.T, ctx context.Context, mode string, env ...string) (<-chan ts2Line, io.WriteCloser) {
	t.Helper()
	dir, _ := filepath.Abs("testdata/client2")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "client")); err != nil || statErr != nil {
		if testenv.Required() {
			t.Fatalf("TOOLGATE_REQUIRE_SERVICES=1 but Node.js or the TypeScript client 2.x is missing (make node installs it): %v %v", err, statErr)
		}
		t.Skip("skipped: no Node.js or TypeScript client 2.x (make node)")
	}
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MODE="+mode), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan ts2Line, 8)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l ts2Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
	}()
	t.Cleanup(func() {
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("the TypeScript client: %v\n%s", err, stderr.String())
		}
	})
	return lines, stdin
}

// next is the client's next line, which must be event.
func next(t *testing.T, lines <-chan ts2Line, event string) ts2Line {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok || l.Event != event {
			t.Fatalf("the TypeScript client said %+v (open %v), want %s", l, ok, event)
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatalf("the TypeScript client said nothing, waiting for %s", event)
	}
	return ts2Line{}
}

// TestTheTypeScriptClientConfirmsInAForm: on a row that takes a
// confirmation in the client, the official TypeScript client 2.4.0,
// declaring form elicitation alone, is asked to approve or reject ama's
// $384 transfer in a form of the card; its own loop hands the form to its
// handler, which approves, and the client's retry returns the executed
// call, run once and audited as confirmed in her client.
func TestTheTypeScriptClientConfirmsInAForm(t *testing.T) {
	g := newGateWith(t, 0, mcpgate.DefaultClaims(testenv.Policy).User, testenv.StackOptions{Policy: inClientStock(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lines, answer := runTS2(t, ctx, "auto", "MCP_URL="+g.url+"/mcp", "MCP_TOKEN="+g.token(t, "ama", idp.ACRMFA), "MCP_ELICIT=form",
		`MCP_ARGS={"articleId":40211,"quantity":40,"reason":"stockout_risk"}`)
	defer answer.Close()
	ask := next(t, lines, "elicit")
	if ask.Mode != "form" || ask.URL != "" || !strings.Contains(ask.Message, "Move 40 cases") || strings.Join(ask.Choices, " ") != "approve reject" {
		t.Fatalf("the elicitation: %+v", ask)
	}
	fmt.Fprintln(answer, "approve")
	got := next(t, lines, "result")
	var transfers, inClient int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, got.CallID).Scan(&transfers)
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_via = 'confirmed_in_client'`, got.CallID).Scan(&inClient)
	if got.IsError || got.Status != "executed" || transfers != 1 || inClient != 1 {
		t.Fatalf("the client's result: %+v; %d transfers, %d approvals confirmed in the client", got, transfers, inClient)
	}
}

// TestTheTypeScriptClientConfirmsByURL: the official TypeScript client
// 2.4.0, at 2026-07-28 and declaring URL elicitation, asks for ama's $384
// transfer; its own loop hands the URL to its elicitation handler; the
// test's Chromium signs ama in there and she approves; the handler answers
// accept, the client's retry returns the executed call, which ran once.
// With its loop off, ama's requestState echoed by efua is refused as not
// hers, by ama dismissed answers the card as it stands, and by ama again
// is refused as replayed.
func TestTheTypeScriptClientConfirmsByURL(t *testing.T) {
	g := newGate(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	ama := g.token(t, "ama", idp.ACRPassword)
	lines, answer := runTS2(t, ctx, "auto", "MCP_URL="+g.url+"/mcp", "MCP_TOKEN="+ama, `MCP_ARGS={"articleId":40211,"quantity":40,"reason":"stockout_risk"}`)
	ask := next(t, lines, "elicit")
	if ask.Mode != "url" || !strings.HasPrefix(ask.URL, g.cards+"/cards/") || !strings.HasSuffix(ask.URL, workflows.ConfirmSuffix) || !strings.Contains(ask.Message, "Move 40 cases") {
		t.Fatalf("the elicitation: %+v", ask)
	}
	browser := testenv.Browser(t)
	if err := chromedp.Do(browser,
		chromedp.Navigate(ask.URL),
		chromedp.WaitVisible(chromedp.CSS(`#username`)),
		chromedp.SendKeys(chromedp.CSS(`#username`), "ama"),
		chromedp.SendKeys(chromedp.CSS(`#password`), g.idp.Users["ama"].Password),
		chromedp.Submit(chromedp.CSS(`#password`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Click(chromedp.CSS(`#approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#outcome`)),
	); err != nil {
		t.Fatalf("ama in Chromium at %s: %v", ask.URL, err)
	}
	fmt.Fprintln(answer, "accept")
	got := next(t, lines, "result")
	wf := strings.TrimSuffix(strings.TrimPrefix(ask.URL, g.cards+"/cards/"), workflows.ConfirmSuffix)
	if got.IsError || got.Status != "executed" || got.CallID != wf {
		t.Fatalf("the client's result: %+v", got)
	}
	var transfers int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, wf).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers", transfers)
	}
	_ = answer.Close()

	lines, stdin := runTS2(t, ctx, "manual", "MCP_URL="+g.url+"/mcp", "MCP_TOKEN="+ama, "MCP_OTHER_TOKEN="+g.token(t, "efua", idp.ACRPassword),
		`MCP_ARGS={"articleId":40211,"quantity":33,"reason":"stockout_risk"}`)
	defer stdin.Close()
	if asked := next(t, lines, "asked"); !asked.InputRequired || asked.StateLength == 0 {
		t.Fatalf("asked: %+v", asked)
	}
	if other := next(t, lines, "other"); !strings.Contains(other.Error, "requestState_not_yours") {
		t.Fatalf("efua echoes ama's requestState: %+v", other)
	}
	if dismissed := next(t, lines, "dismissed"); dismissed.Status != "pending_approval" {
		t.Fatalf("ama dismisses it: %+v", dismissed)
	}
	if replayed := next(t, lines, "replayed"); !strings.Contains(replayed.Error, "requestState_replayed") {
		t.Fatalf("ama echoes it again: %+v", replayed)
	}
}
