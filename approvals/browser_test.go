package approvals_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// chromium finds Debian's Chromium ($CHROMIUM, then PATH).
func chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.Required() {
		t.Fatal("TOOLGATE_REQUIRE_SERVICES=1 but no Chromium is installed (make browser installs Debian's)")
	}
	t.Skip("skipped: no Chromium (set TOOLGATE_REQUIRE_SERVICES=1 to fail instead)")
	return ""
}

// browser is one headless Chromium with its own profile, so its cookies
// are its own, at a phone-sized viewport.
func browser(t *testing.T) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(390, 844),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser and must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	limited, cancelLimit := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelLimit)
	return limited
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

func signInAs(t *testing.T, ctx context.Context, base, user string) string {
	do(t, ctx,
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS("#user")),
		chromedp.SetValue(chromedp.CSS("#user"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), "demo"),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS(".who")), // only a signed-in page has it
	)
	return get(t, ctx, chromedp.Text(chromedp.CSS("main")))
}

// TestCardUIInABrowser: ama sees and approves the $384.00 card and sees it
// executed with a transfer number; efua never sees it, not even by URL;
// kofi sees the 100-case card and not the 40-case one.
func TestCardUIInABrowser(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "ui", "c40", 40)
	u.request(t, "ui", "c100", 100)
	c40, c100 := workflows.WorkflowID("ui", "c40"), workflows.WorkflowID("ui", "c100")

	ama := browser(t)
	if inbox := signInAs(t, ama, u.URL, "ama"); !strings.Contains(inbox, "$384.00") || strings.Contains(inbox, "$960.00") || !strings.Contains(inbox, "Move 40 cases of UHT milk 1 L") {
		t.Fatalf("ama's inbox:\n%s", inbox)
	}
	do(t, ama,
		chromedp.Click(chromedp.CSS(`a[href="/cards/`+c40+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#reason"), "we run out tonight"),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if outcome := get(t, ama, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Executed: transfer TR-") {
		t.Fatalf("after approving: %q", outcome)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, c40); n != 1 {
		t.Fatalf("%d transfers", n)
	}

	efua := browser(t)
	efuaInbox := signInAs(t, efua, u.URL, "efua")
	do(t, efua, chromedp.Navigate(u.URL+"/cards/"+c100), chromedp.WaitVisible(chromedp.CSS("h1")))
	byURL := get(t, efua, chromedp.Text(chromedp.CSS("main")))
	do(t, efua, chromedp.Navigate(u.URL+"/cards/"+c40), chromedp.WaitVisible(chromedp.CSS("h1")))
	byURL40 := get(t, efua, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(efuaInbox, "Nothing is waiting") || strings.Contains(efuaInbox, "$") || !strings.Contains(byURL, "Not found") || !strings.Contains(byURL40, "Not found") {
		t.Fatalf("efua sees: %q / by URL: %q, %q", efuaInbox, byURL, byURL40)
	}

	kofi := browser(t)
	if inbox := signInAs(t, kofi, u.URL, "kofi"); !strings.Contains(inbox, "$960.00") || strings.Contains(inbox, "$384.00") {
		t.Fatalf("kofi's inbox:\n%s", inbox)
	}
	if path := os.Getenv("TOOLGATE_SCREENSHOT"); path != "" {
		do(t, kofi, chromedp.Navigate(u.URL+"/cards/"+c100), chromedp.WaitVisible(chromedp.CSS("#approve")))
		if err := os.WriteFile(path, get(t, kofi, chromedp.FullScreenshot(100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpiredCardInABrowser: once the TTL has passed the card says so and
// its buttons do nothing, even when the form is forced.
func TestExpiredCardInABrowser(t *testing.T) {
	u := newUI(t, 4*time.Second)
	u.request(t, "exp", "c1", 40)
	id := workflows.WorkflowID("exp", "c1")
	ama := browser(t)
	signInAs(t, ama, u.URL, "ama")
	do(t, ama, chromedp.Navigate(u.URL+"/cards/"+id), chromedp.WaitVisible(chromedp.CSS("#approve")), chromedp.Sleep(5*time.Second))
	countdown := get(t, ama, chromedp.Text(chromedp.CSS(".countdown")))
	disabled := get(t, ama, chromedp.Evaluate[bool](`document.querySelector("#approve").disabled`))
	if countdown != "expired" || !disabled {
		t.Fatalf("after the TTL: countdown %q, approve disabled %v", countdown, disabled)
	}
	do(t, ama, chromedp.Click(chromedp.CSS("#approve")), chromedp.Sleep(500*time.Millisecond))
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND approver_id IS NOT NULL`, id); n != 0 {
		t.Fatalf("clicking an expired card sent %d decisions", n)
	}
	get(t, ama, chromedp.Evaluate[bool](`(function(){var f=document.querySelector("form.decide"); var i=document.createElement("input");
		i.type="hidden"; i.name="decision"; i.value="approve"; f.appendChild(i); HTMLFormElement.prototype.submit.call(f); return true})()`))
	do(t, ama, chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if page := get(t, ama, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(page, "Expired") {
		t.Fatalf("forced submit after expiry shows:\n%s", page)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after expiry", n)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approved', 'approval_refused')`, id); n != 0 {
		t.Fatalf("a decision on an expired card reached the call (%d rows)", n)
	}
}
