package approvals_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// browser is one headless Chromium of its own (testenv.Browser).
func browser(t *testing.T) context.Context { return testenv.Browser(t) }

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

// signInAs goes through the real code flow: the card UI sends the browser
// to the provider's password page, which sends it back signed in.
func signInAs(t *testing.T, ctx context.Context, u *ui, user string) string {
	return signInAt(t, ctx, u.URL, user, u.IdP.Users[user].Password)
}

// signInAt is signInAs at the card UI at cards, with user's password; it
// returns the inbox.
func signInAt(t *testing.T, ctx context.Context, cards, user, password string) string {
	t.Helper()
	do(t, ctx,
		chromedp.Navigate(cards+"/"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS(".who")), // only a signed-in page has it
	)
	return get(t, ctx, chromedp.Text(chromedp.CSS("main")))
}

// approveOpenCard approves the card open in the browser with reason, and
// returns what the page then says of it.
func approveOpenCard(t *testing.T, ctx context.Context, reason string) string {
	t.Helper()
	do(t, ctx,
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#reason"), reason),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	return get(t, ctx, chromedp.Text(chromedp.CSS("#outcome")))
}

// auditTrail is the audit rows that where selects, oldest first, each as
// "tool event reason kind/id value", leaving out refused decisions.
func auditTrail(t *testing.T, ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, where string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT tool || ' ' || event || ' ' || reason || ' ' || coalesce(resource_kind || '/' || resource_id, '-') || ' ' || coalesce(value_cents::text, '-')
		FROM audit_log WHERE `+where+` AND event <> 'approval_refused' ORDER BY id`, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCardUIInABrowser: ama, signed in with her password alone, sees and
// approves the $384.00 card and sees it executed with a transfer number;
// efua never sees it, not even by URL; kofi sees the 100-case card and not
// the 40-case one, is sent to the provider's code step when he opens it,
// enters his code, and approves it: it executes once, with his mfa sign-in
// in the audit log.
func TestCardUIInABrowser(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "ui", "c40", 40)
	u.request(t, "ui", "c100", 100)
	c40, c100 := workflows.WorkflowID("ui", "c40"), workflows.WorkflowID("ui", "c100")

	// efua manages another store: while both cards wait, neither is hers
	// to see, in her inbox or by URL.
	efua := browser(t)
	efuaInbox := signInAs(t, efua, u, "efua")
	do(t, efua, chromedp.Navigate(u.URL+"/cards/"+c100), chromedp.WaitVisible(chromedp.CSS("h1")))
	byURL := get(t, efua, chromedp.Text(chromedp.CSS("main")))
	do(t, efua, chromedp.Navigate(u.URL+"/cards/"+c40), chromedp.WaitVisible(chromedp.CSS("h1")))
	byURL40 := get(t, efua, chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(efuaInbox, "Nothing is waiting") || strings.Contains(efuaInbox, "$") || !strings.Contains(byURL, "Not found") || !strings.Contains(byURL40, "Not found") {
		t.Fatalf("efua sees: %q / by URL: %q, %q", efuaInbox, byURL, byURL40)
	}

	ama := browser(t)
	if inbox := signInAs(t, ama, u, "ama"); !strings.Contains(inbox, "$384.00") || strings.Contains(inbox, "$960.00") || !strings.Contains(inbox, "Move 40 cases of UHT milk 1 L") {
		t.Fatalf("ama's inbox:\n%s", inbox)
	}
	do(t, ama, chromedp.Click(chromedp.CSS(`a[href="/cards/`+c40+`"]`)))
	if outcome := approveOpenCard(t, ama, "we run out tonight"); !strings.Contains(outcome, "Executed: transfer TR-") {
		t.Fatalf("after approving: %q", outcome)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, c40); n != 1 {
		t.Fatalf("%d transfers", n)
	}

	kofi := browser(t)
	if inbox := signInAs(t, kofi, u, "kofi"); !strings.Contains(inbox, "$960.00") || strings.Contains(inbox, "$384.00") {
		t.Fatalf("kofi's inbox:\n%s", inbox)
	}
	do(t, kofi,
		chromedp.Click(chromedp.CSS(`a[href="/cards/`+c100+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#reject")), // rejecting needs no step-up
		chromedp.Click(chromedp.CSS("#step-up")),
		chromedp.WaitVisible(chromedp.CSS("#code")), // the provider's second factor
		chromedp.SendKeys(chromedp.CSS("#code"), u.IdP.Code(t, "kofi")),
		chromedp.Submit(chromedp.CSS("#code")),
		chromedp.WaitVisible(chromedp.CSS("#approve")), // back on the card
	)
	if path := os.Getenv("TOOLGATE_SCREENSHOT"); path != "" {
		if err := os.WriteFile(path, get(t, kofi, chromedp.FullScreenshot(100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ev := get(t, kofi, chromedp.Text(chromedp.CSS("#evidence"))); !strings.Contains(ev, "authenticator code, within 5 minutes") {
		t.Fatalf("the card's evidence line: %q", ev)
	}
	do(t, kofi, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if outcome := get(t, kofi, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Executed: transfer TR-") {
		t.Fatalf("after kofi approved: %q", outcome)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, c100); n != 1 {
		t.Fatalf("%d transfers of the $960.00 card", n)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_acr = 'mfa' AND approver_subject = 'kofi'`, c100); n != 1 {
		t.Fatal("kofi's approval does not carry his mfa sign-in")
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_acr = 'pwd' AND approver_subject = 'ama'`, c40); n != 1 {
		t.Fatal("ama's approval does not carry her password sign-in")
	}
}

// TestExpiredCardInABrowser: once the TTL has passed the card says so and
// its buttons do nothing, even when the form is forced.
func TestExpiredCardInABrowser(t *testing.T) {
	u := newUI(t, 4*time.Second)
	ama := browser(t)
	// Signed in first: the 4 s TTL runs from the card, and a sign-in on a busy machine can take longer.
	signInAs(t, ama, u, "ama")
	u.request(t, "exp", "c1", 40)
	id := workflows.WorkflowID("exp", "c1")
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

// TestTwoPersonRuleInABrowser: ama's 200-case card ($1,920.00) needs two
// area managers. kofi approves (with his code) and the card says it now
// needs another; adwoa sees his approval counted, approves, and it
// executes once, approved by both.
func TestTwoPersonRuleInABrowser(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "two", "c200", 200)
	id := workflows.WorkflowID("two", "c200")
	approveWithCode := func(ctx context.Context, user string) {
		do(t, ctx,
			chromedp.Click(chromedp.CSS(`a[href="/cards/`+id+`"]`)),
			chromedp.WaitVisible(chromedp.CSS("#reject")), // rejecting needs no step-up
			chromedp.Click(chromedp.CSS("#step-up")),
			chromedp.WaitVisible(chromedp.CSS("#code")),
			chromedp.SendKeys(chromedp.CSS("#code"), u.IdP.Code(t, user)),
			chromedp.Submit(chromedp.CSS("#code")),
			chromedp.WaitVisible(chromedp.CSS("#approve")),
		)
	}

	kofi := browser(t)
	if inbox := signInAs(t, kofi, u, "kofi"); !strings.Contains(inbox, "$1,920.00") {
		t.Fatalf("kofi's inbox:\n%s", inbox)
	}
	approveWithCode(kofi, "kofi")
	if got := get(t, kofi, chromedp.Text(chromedp.CSS("#approvals"))); !strings.Contains(got, "0 of 2 so far") {
		t.Fatalf("before any approval: %q", got)
	}
	do(t, kofi, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#waiting-second")))
	if got := get(t, kofi, chromedp.Text(chromedp.CSS("#approvals"))); !strings.Contains(got, "1 of 2 so far") || !strings.Contains(got, "kofi") {
		t.Fatalf("after kofi approved: %q", got)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 0 {
		t.Fatal("one approval ran a card that needs two")
	}

	adwoa := browser(t)
	signInAs(t, adwoa, u, "adwoa")
	approveWithCode(adwoa, "adwoa")
	if got := get(t, adwoa, chromedp.Text(chromedp.CSS("#approvals"))); !strings.Contains(got, "1 of 2 so far") || !strings.Contains(got, "kofi") {
		t.Fatalf("adwoa sees: %q", got)
	}
	do(t, adwoa, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if outcome := get(t, adwoa, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Executed: transfer TR-") || !strings.Contains(outcome, "approved by kofi and adwoa") {
		t.Fatalf("after adwoa approved: %q", outcome)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 1 {
		t.Fatalf("%d transfers", n)
	}
}

// TestEditThenApproveInABrowser: ama changes her 40-case card to 60 cases
// in the card UI; it goes up again as version 2 at $576.00, leaves her
// inbox for the area manager's (she is told so), and kofi sees both
// versions, approves, and 60 cases move once.
func TestEditThenApproveInABrowser(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "edit", "c40", 40)
	id := workflows.WorkflowID("edit", "c40")

	ama := browser(t)
	signInAs(t, ama, u, "ama")
	do(t, ama,
		chromedp.Navigate(u.URL+"/cards/"+id),
		chromedp.WaitVisible(chromedp.CSS("#edit_quantity")),
		chromedp.SetValue(chromedp.CSS("#edit_quantity"), "60"),
		chromedp.Click(chromedp.CSS("#edit")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if flash := get(t, ama, chromedp.Text(chromedp.CSS("#flash"))); !strings.Contains(flash, "version 2 ($576.00) now waits for the area manager") {
		t.Fatalf("after the edit: %q", flash)
	}
	if inbox := get(t, ama, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(inbox, "Nothing is waiting for you") {
		t.Fatalf("ama's inbox still holds the card:\n%s", inbox)
	}

	kofi := browser(t)
	if inbox := signInAs(t, kofi, u, "kofi"); !strings.Contains(inbox, "$576.00") || !strings.Contains(inbox, "Move 60 cases") {
		t.Fatalf("kofi's inbox:\n%s", inbox)
	}
	do(t, kofi,
		chromedp.Click(chromedp.CSS(`a[href="/cards/`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#reject")), // rejecting needs no step-up
		chromedp.Click(chromedp.CSS("#step-up")),
		chromedp.WaitVisible(chromedp.CSS("#code")),
		chromedp.SendKeys(chromedp.CSS("#code"), u.IdP.Code(t, "kofi")),
		chromedp.Submit(chromedp.CSS("#code")),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	if versions := get(t, kofi, chromedp.Text(chromedp.CSS("#versions"))); !strings.Contains(versions, "v1 · $384.00") || !strings.Contains(versions, "asked for by ama") ||
		!strings.Contains(versions, "v2 · $576.00") || !strings.Contains(versions, "ama edited quantity to 60") {
		t.Fatalf("the card's versions: %q", versions)
	}
	do(t, kofi, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if outcome := get(t, kofi, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Executed: transfer TR-") {
		t.Fatalf("after kofi approved: %q", outcome)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1 AND quantity = 60`, id); n != 1 {
		t.Fatalf("%d transfers of 60 cases", n)
	}
}

// TestSignInNeverLeavesTheCardUI: a sign-in started with a hostile next
// (a tab, a newline or a backslash that the browser drops or turns into a
// '/', another scheme, a path to a route that is not the card UI's) ends
// in Chromium on the card UI, signed in; a card's own path returns to the
// card.
func TestSignInNeverLeavesTheCardUI(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "next", "c40", 40)
	card := "/cards/" + workflows.WorkflowID("next", "c40")
	ama := browser(t)
	signInAs(t, ama, u, "ama")
	for _, next := range []string{
		"/%09/evil.example/x", "/%0A/evil.example/x", "/%0D%0A/evil.example/x", "/%5C/evil.example/x",
		"/%20/evil.example/x", "/%0B/evil.example/x", "%09//evil.example/x", "//evil.example/x",
		"https://evil.example/x", "/cards/%09/evil.example", "/cards/..%2F%09/evil.example", "/%E3%80%80/evil.example/x",
		"/signout", "/static/../%09/evil.example",
	} {
		loc := settled(t, ama, u.URL+"/signin?next="+next)
		if !strings.HasPrefix(loc, u.URL+"/") {
			t.Fatalf("next=%s: the browser left the card UI for %s", next, loc)
		}
		do(t, ama, chromedp.WaitVisible(chromedp.CSS(".who")))
	}
	if loc := settled(t, ama, u.URL+"/signin?next="+card); loc != u.URL+card {
		t.Fatalf("a card's own path returned to %s, not %s", loc, u.URL+card)
	}
}

// settled opens start, a sign-in that goes through the provider and back,
// waits for the browser to leave the sign-in's pages and returns where it
// ended. Chromium may swap the page's process on the way and say the target
// navigated (-32000): that is the journey, not a failure, so the location is
// read again until it holds still.
func settled(t *testing.T, ctx context.Context, start string) string {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	_, _ = chromedp.Run(ctx, chromedp.Navigate(start))
	for range 100 {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err == nil && loc != "about:blank" && !strings.Contains(loc, "/auth/callback") && !strings.Contains(loc, "/signin") && !strings.Contains(loc, "/authorize") && !strings.Contains(loc, "/login") {
			return loc
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the sign-in did not finish")
	return ""
}

// TestAWithdrawnCardLeavesTheInboxInABrowser: ama, who asked for the
// $384.00 transfer, finds it among her requests, opens it and withdraws it
// in Chromium; it closes withdrawn, leaves every inbox (hers, as its
// approver, too), nothing runs; efua, neither its requester nor its
// approver, cannot open it.
func TestAWithdrawnCardLeavesTheInboxInABrowser(t *testing.T) {
	u := newUI(t, 0)
	// ama's credential names her sign-in at the card UI's provider, as one
	// made through the MCP server does.
	if _, err := u.Owner.Exec(context.Background(), `UPDATE vault.credentials SET issuer = $1 WHERE ref = 'cred-ama'`, u.IdP.URL); err != nil {
		t.Fatal(err)
	}
	u.request(t, "wd", "c40", 40)
	id := workflows.WorkflowID("wd", "c40")

	ama := browser(t)
	signInAs(t, ama, u, "ama")
	if mine := get(t, ama, chromedp.Text(chromedp.CSS("#mine"))); !strings.Contains(mine, "Your requests waiting") || !strings.Contains(mine, "Move 40 cases") {
		t.Fatalf("ama's requests: %q", mine)
	}
	do(t, ama,
		chromedp.Click(chromedp.CSS(`#mine a[href="/cards/`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#withdraw")),
		chromedp.SendKeys(chromedp.CSS("#withdraw-reason"), "the delivery came early"),
		chromedp.Click(chromedp.CSS("#withdraw")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if outcome := get(t, ama, chromedp.Text(chromedp.CSS("#outcome"))); !strings.Contains(outcome, "Withdrawn by ama") || !strings.Contains(outcome, "the delivery came early") {
		t.Fatalf("after ama withdrew: %q", outcome)
	}
	do(t, ama, chromedp.Navigate(u.URL+"/"), chromedp.WaitVisible(chromedp.CSS(".who")))
	if inbox := get(t, ama, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(inbox, "Nothing is waiting for you") || strings.Contains(inbox, "Your requests waiting") {
		t.Fatalf("ama's inbox after the withdrawal:\n%s", inbox)
	}
	efua := browser(t)
	signInAs(t, efua, u, "efua")
	do(t, efua, chromedp.Navigate(u.URL+"/cards/"+id), chromedp.WaitVisible(chromedp.CSS("h1")))
	if page := get(t, efua, chromedp.Text(chromedp.CSS("main"))); strings.Contains(page, "Move 40 cases") {
		t.Fatalf("efua opens ama's card:\n%s", page)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 0 {
		t.Fatalf("%d transfers after the withdrawal", n)
	}
	if got := auditTrail(t, context.Background(), u.Owner, `workflow_id = $1`, id); len(got) != 2 || !strings.HasSuffix(got[1], "withdrawn withdrawn store/112 38400") {
		t.Fatalf("audit: %q", got)
	}
}
