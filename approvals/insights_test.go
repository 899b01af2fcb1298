package approvals_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// seedInsights plays a small day: ama decides three of her cards within a
// second each (two approved, one rejected), kofi decides a $960.00 card
// after six seconds, a card nobody decides expires, and the model makes
// three calls the chain refuses.
func seedInsights(t *testing.T, u *ui) {
	t.Helper()
	ctx := context.Background()
	decide := func(o workflows.Outcome, conv, call string, who policy.Identity, decision string) {
		a := signoff.Approval{Decision: decision, ArgsHash: o.ArgsHash, Approver: who, Evidence: testenv.Evidence(who.UserID, time.Now())}
		if decision == signoff.Reject {
			a.Reason = "not before Monday"
		}
		if err := workflows.SendDecision(ctx, u.Client, workflows.WorkflowID(conv, call), a, testenv.ApprovalSigner); err != nil {
			t.Fatal(err)
		}
	}
	ama := policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}
	kofi := policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121)}
	decide(u.request(t, "ins", "a40", 40), "ins", "a40", ama, signoff.Approve)
	decide(u.request(t, "ins", "a30", 30), "ins", "a30", ama, signoff.Approve)
	decide(u.request(t, "ins", "a20", 20), "ins", "a20", ama, signoff.Reject)
	big := u.request(t, "ins", "k100", 100)
	u.request(t, "ins", "left10", 10)
	sess := amaSession
	sess.ConversationID = "ins"
	for call, in := range map[string]workflows.ToolCallInput{
		"scope": {Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`)},
		"ctor":  {Tool: "constructor", Args: json.RawMessage(`{}`)},
		"kind":  {Tool: "create_task", Args: json.RawMessage(`{"kind":"clean","dueBy":"today"}`)},
	} {
		in.ToolCallID, in.Session = call, sess
		if r := u.Run(t, in); r.Status != "denied" {
			t.Fatalf("%s: %+v", call, r)
		}
	}
	time.Sleep(6 * time.Second)
	decide(big, "ins", "k100", kofi, signoff.Approve)
	for deadline := time.Now().Add(30 * time.Second); u.count(t, `SELECT count(*) FROM audit_log WHERE event IN ('executed', 'expired')`) < 4; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the seeded cards did not all end")
		}
	}
}

// TestInsightsInABrowser: abena, the auditor, signs in through the
// provider and lands on the insights page: the charts are drawn from the
// seeded run (decisions, refusals by code and tool, time to decision),
// ama is flagged as a rubber stamp and kofi is not, each chart's query is
// one click away, a filter narrows the page and a bad one says what to
// fix, and a slow call's story opens. A store manager is refused the page,
// and the auditor's login could not have written anything (migrations'
// TestTheAuditorReadsTheAuditLogAndNothingElse).
func TestInsightsInABrowser(t *testing.T) {
	u := newUI(t, 10*time.Second)
	seedInsights(t, u)

	abena := browser(t)
	page := signInAs(t, abena, u, "abena")
	if !strings.Contains(page, "Insights") {
		t.Fatalf("abena lands on:\n%s", page)
	}
	html := func(sel string) string { return get(t, abena, chromedp.OuterHTML(chromedp.CSS(sel))) }
	refusals := html("#chart-refusals")
	for _, want := range []string{"resource_scope · get_stock", "unknown_tool · constructor", "invalid_arguments · create_task", "<svg"} {
		if !strings.Contains(refusals, want) {
			t.Errorf("the refusals chart lacks %q:\n%s", want, refusals)
		}
	}
	if d := html("#chart-decisions"); strings.Count(d, "<rect") < 8 || !strings.Contains(d, "needs_approval") || !strings.Contains(d, "expired") {
		t.Errorf("the decisions chart:\n%s", d)
	}
	if ttd := html("#chart-approvers"); !strings.Contains(ttd, "⚑ ama") || !strings.Contains(ttd, ">kofi<") || !strings.Contains(ttd, "under 5 s") {
		t.Errorf("the time-to-decision chart:\n%s", ttd)
	}
	table := get(t, abena, chromedp.Text(chromedp.CSS("#approvers table")))
	if !strings.Contains(table, "⚑ ama") || !strings.Contains(table, "3 of 3 decisions in under 5s") || !strings.Contains(table, "kofi") || strings.Contains(table, "⚑ kofi") {
		t.Errorf("the approvers table:\n%s", table)
	}
	if e := html("#chart-expiries"); !strings.Contains(e, "request_stock_transfer") {
		t.Errorf("the expiries chart:\n%s", e)
	}
	do(t, abena, chromedp.Click(chromedp.CSS("#chart-refusals summary")), chromedp.WaitVisible(chromedp.CSS("#chart-refusals pre")))
	if q := get(t, abena, chromedp.Text(chromedp.CSS("#chart-refusals pre"))); !strings.Contains(q, "FROM audit_log") || !strings.Contains(q, "a.event = 'denied'") {
		t.Errorf("the refusals query: %q", q)
	}
	if path := os.Getenv("TOOLGATE_SCREENSHOT_INSIGHTS"); path != "" {
		do(t, abena, chromedp.EmulateViewport(1100, 900))
		if err := os.WriteFile(path, get(t, abena, chromedp.FullScreenshot(100)), 0o644); err != nil {
			t.Fatal(err)
		}
		do(t, abena, chromedp.EmulateViewport(390, 844))
	}
	if t.Failed() {
		t.FailNow()
	}
	// A filter by user narrows every chart; a bad one says what to fix.
	do(t, abena, chromedp.Navigate(u.URL+"/insights?user=kofi"), chromedp.WaitVisible(chromedp.CSS("#approvers")))
	if ttd := html("#chart-approvers"); strings.Contains(ttd, ">ama<") || strings.Contains(ttd, "⚑ ama") || !strings.Contains(ttd, "kofi") {
		t.Errorf("filtered by kofi:\n%s", ttd)
	}
	do(t, abena, chromedp.Navigate(u.URL+"/insights?store=abc"), chromedp.WaitVisible(chromedp.CSS(".error")))
	if e := get(t, abena, chromedp.Text(chromedp.CSS(".error"))); !strings.Contains(e, `store: "abc" is not a store number`) {
		t.Errorf("a bad filter: %q", e)
	}
	// The slowest call's story, one click from the page.
	do(t, abena, chromedp.Navigate(u.URL+"/insights"), chromedp.WaitVisible(chromedp.CSS("#slowest a")),
		chromedp.Click(chromedp.CSS("#slowest a")), chromedp.WaitVisible(chromedp.CSS("#story")))
	if story := get(t, abena, chromedp.Text(chromedp.CSS("#story"))); !strings.Contains(story, "Idempotency-Key sent upstream: toolcall-ins-") || !strings.Contains(story, "Asked by ama") {
		t.Errorf("the story page:\n%s", story)
	}
	if link := html("#history"); !strings.Contains(link, `href="http://temporal-web.test/namespaces/`+testenv.Namespace()+`/workflows/toolcall-ins-`) {
		t.Errorf("the link to the call's history: %s", link)
	}
	// The action register, from the header.
	do(t, abena, chromedp.Click(chromedp.CSS(`header a[href="/register"]`)), chromedp.WaitVisible(chromedp.CSS("#tool-request_stock_transfer")))
	if reg := get(t, abena, chromedp.Text(chromedp.CSS("#tool-request_stock_transfer"))); !strings.Contains(reg, "store_manager up to $500.00") || !strings.Contains(reg, "checks, where they are enforced") {
		t.Errorf("the register page:\n%s", reg)
	}
	// A store manager is refused the page, by link and straight to the server.
	ama := browser(t)
	signInAs(t, ama, u, "ama")
	do(t, ama, chromedp.Navigate(u.URL+"/insights"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := get(t, ama, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(got, "This page is for auditors") || strings.Contains(got, "resource_scope") {
		t.Errorf("ama on /insights sees:\n%s", got)
	}
	b := u.signIn(t, "efua")
	for _, path := range []string{"/insights", "/insights/calls/" + workflows.WorkflowID("ins", "a40")} {
		resp, err := b.c.Get(u.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("efua GET %s: %d, want 403", path, resp.StatusCode)
		}
	}
}
