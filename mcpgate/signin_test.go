package mcpgate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// mfaTasks is the Mangrove pack with create_task needing an mfa requester
// (the shipped table has no requester tier).
func mfaTasks(t *testing.T) *policy.Policy {
	return testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolCreateTask {
				d.Rows[i].RequesterTier = policy.ACRMFA
			}
		}
	})
}

// signInAt signs user in with their password and second factor in browser
// at link, the card UI's sign-in page of a call, and requires the page the
// sign-in ends at to be want: carried (#call-sign-in) or refused
// (#signin-error). It waits for either, so the other fails at once.
func (g *gate) signInAt(t *testing.T, browser context.Context, link, user, want string) {
	t.Helper()
	if err := chromedp.Do(browser,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`#username`)),
		chromedp.SendKeys(chromedp.CSS(`#username`), user),
		chromedp.SendKeys(chromedp.CSS(`#password`), g.idp.Users[user].Password),
		chromedp.Submit(chromedp.CSS(`#password`)),
		chromedp.WaitVisible(chromedp.CSS(`#code`)),
		chromedp.SendKeys(chromedp.CSS(`#code`), g.idp.Code(t, user)),
		chromedp.Submit(chromedp.CSS(`#code`)),
		chromedp.WaitVisible(chromedp.CSS(`#call-sign-in, #signin-error`)),
	); err != nil {
		t.Fatalf("%s in Chromium at %s: %v", user, link, err)
	}
	ended, err := chromedp.Run(browser, chromedp.Attributes(chromedp.CSS(`#call-sign-in, #signin-error`)))
	if err != nil || "#"+ended["id"] != want {
		text, _ := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`main`)))
		t.Fatalf("%s at %s: the sign-in ended at %q (%v), not %s", user, link, text, err, want)
	}
}

// TestASignInByURLCarriesTheCallOn: with create_task needing an mfa
// requester, ama's 2026-07-28 clients, declaring URL elicitation and signed
// in with a password alone, call it. The answer is an input-required
// result sending her to the card UI's sign-in page of that call, with a
// sealed requestState; her retry before she signs in asks again. efua
// signing in at her link carries nothing on (the page says why and
// sign_in_log records it). The official TypeScript client's own loop:
// ama signs in there in Chromium with her second factor, and the client's
// retry answers the executed call, the same workflow, run once. A spent
// requestState echoed again is refused as replayed. A client that does not
// declare URL elicitation gets today's awaiting_sign_in.
func TestASignInByURLCarriesTheCallOn(t *testing.T) {
	g := newGateWith(t, 0, mcpgate.DefaultClaims(testenv.Policy).User, testenv.StackOptions{Policy: mfaTasks(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	amaToken := g.token(t, "ama", idp.ACRPassword)
	ama := g.connectAt(t, amaToken, mcpgate.FirstSessionlessRevision, true)
	call := func(cs *mcp.ClientSession, conv, state, answer string) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: mangrove.ToolCreateTask, Arguments: map[string]any{"kind": "shelf_check", "dueBy": "today"}, RequestState: state,
			Meta: mcp.Meta{mcpgate.ConversationMeta: conv}}
		if answer != "" {
			p.InputResponses = mcp.InputResponseMap{"sign_in": &mcp.ElicitResult{Action: answer}}
		}
		return cs.CallTool(ctx, p)
	}
	asked := func(res *mcp.CallToolResult, err error) (link, wf string) {
		t.Helper()
		ask, ok := (*mcp.ElicitParams)(nil), false
		if err == nil && res.NeedsInput() {
			ask, ok = res.InputRequests["sign_in"].(*mcp.ElicitParams)
		}
		if !ok || ask.Mode != "url" || !strings.HasPrefix(ask.URL, g.cards+"/cards/toolcall-mcp.") || !strings.HasSuffix(ask.URL, workflows.SignInSuffix) ||
			!strings.Contains(ask.Message, "stronger sign-in") || res.RequestState == "" {
			t.Fatalf("not asked to sign in by URL: %v %+v", err, res)
		}
		return ask.URL, strings.TrimSuffix(strings.TrimPrefix(ask.URL, g.cards+"/cards/"), workflows.SignInSuffix)
	}

	res, err := call(ama, "gosdk", "", "")
	link, wf := asked(res, err)
	again, err := call(ama, "gosdk", res.RequestState, "accept")
	if againLink, againWF := asked(again, err); againLink != link || againWF != wf || again.RequestState == res.RequestState {
		t.Fatalf("asked again for another call (%s), or with the same state", againLink)
	}
	if _, err := call(ama, "gosdk", res.RequestState, "accept"); !refusedAs(err, mcpgate.ErrStateReplayed) {
		t.Fatalf("the first requestState again: %v", err)
	}

	g.signInAt(t, testenv.Browser(t), link, "efua", `#signin-error`)
	var st workflows.Status
	if v, err := g.s.Client.QueryWorkflow(ctx, wf, "", workflows.StatusQuery); err != nil || v.Get(&st) != nil || st.Status != workflows.StatusAwaitingSignIn {
		t.Fatalf("after efua signed in at ama's link: %v %+v", err, st)
	}
	var refused int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM sign_in_log WHERE event = 'sign_in_failed' AND workflow_id = $1 AND user_id = 'efua'
		AND message LIKE '%someone other than the person who asked%'`, wf).Scan(&refused)
	if refused != 1 {
		t.Fatalf("%d sign_in_failed rows for efua at ama's call", refused)
	}

	// The TypeScript client's own loop, for another call of ama's.
	lines, answer := runTS2(t, ctx, "auto", "MCP_URL="+g.url+"/mcp", "MCP_TOKEN="+amaToken, "MCP_TOOL="+mangrove.ToolCreateTask, "MCP_ASK=sign_in",
		`MCP_ARGS={"kind":"shelf_check","dueBy":"today"}`)
	elicit := next(t, lines, "elicit")
	if elicit.Mode != "url" || !strings.HasSuffix(elicit.URL, workflows.SignInSuffix) || elicit.URL == link {
		t.Fatalf("the TypeScript client's elicitation: %+v", elicit)
	}
	g.signInAt(t, testenv.Browser(t), elicit.URL, "ama", `#call-sign-in`)
	fmt.Fprintln(answer, "accept")
	got := next(t, lines, "result")
	tsWF := strings.TrimSuffix(strings.TrimPrefix(elicit.URL, g.cards+"/cards/"), workflows.SignInSuffix)
	if got.IsError || got.Status != "executed" || got.CallID != tsWF {
		t.Fatalf("the TypeScript client's result: %+v", got)
	}
	_ = answer.Close()
	var tasks, executed, carried int
	_ = g.s.Owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM mangrove.tasks), (SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'executed'),
		(SELECT count(*) FROM sign_in_log WHERE event = 'signed_in_for_call' AND workflow_id = $1 AND user_id = 'ama' AND acr = 'mfa')`, tsWF).Scan(&tasks, &executed, &carried)
	if tasks != 1 || executed != 1 || carried != 1 {
		t.Fatalf("%d tasks upstream, %d executed rows, %d signed_in_for_call rows; want 1, 1 and 1", tasks, executed, carried)
	}

	// Without URL elicitation declared: awaiting_sign_in, as before.
	plain := g.connectAt(t, amaToken, mcpgate.FirstSessionlessRevision, false)
	res, err = call(plain, "plain", "", "")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "awaiting_sign_in" {
		t.Fatalf("a client without URL elicitation: %v %+v", err, res)
	}
}
