package mcpgate_test

import (
	"context"
	"encoding/json"
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
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

// mfaTasks is the Mangrove pack with create_task and stock transfers
// needing an mfa requester (the shipped table has no requester tier).
func mfaTasks(t *testing.T) *policy.Policy {
	return testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolCreateTask || d.Rows[i].Tool == mangrove.ToolRequestStockTransfer {
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
// sealed requestState. What carries the call on is a sign-in the card UI
// recorded for it by the person whose token retries with that state:
// another person's recorded sign-in does not (her retry asks again), and
// efua signing in at her link records nothing (the page says why, and
// sign_in_log has it). A call another Temporal client started with a memo
// naming ama is not carried on by her signing in at its link: the card UI
// records, the MCP server carries on. The official TypeScript client's own
// loop: ama signs in at the link in Chromium with her second factor, and
// the client's retry, to an MCP server restarted since it asked, answers
// the executed call, the same workflow, run once; a transfer she may decide herself is, once she has signed in for
// it, asked to confirm. A spent requestState echoed again is refused as
// replayed; a client
// that declares tasks too is asked the same; a client that does not declare
// URL elicitation gets today's awaiting_sign_in.
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
		if !ok || ask.Mode != "url" || !strings.HasPrefix(ask.URL, g.cards+"/cards/toolcall-") || !strings.HasSuffix(ask.URL, workflows.SignInSuffix) ||
			!strings.Contains(ask.Message, "stronger sign-in") || res.RequestState == "" {
			t.Fatalf("not asked to sign in by URL: %v %+v", err, res)
		}
		return ask.URL, strings.TrimSuffix(strings.TrimPrefix(ask.URL, g.cards+"/cards/"), workflows.SignInSuffix)
	}
	query := func(wf string) workflows.Status {
		t.Helper()
		var st workflows.Status
		if v, err := g.s.Client.QueryWorkflow(ctx, wf, "", workflows.StatusQuery); err != nil || v.Get(&st) != nil {
			t.Fatalf("the status of %s: %v", wf, err)
		}
		return st
	}
	status := func(wf string) workflows.CallStatus { t.Helper(); return query(wf).Status }

	res, err := call(ama, "gosdk", "", "")
	link, wf := asked(res, err)
	// What the page asks the provider for: the row's tier and its age.
	if need := query(wf).SignIn; need == nil || *need != (workflows.SignInNeed{Code: policy.CodeStepUpRequired, Tier: policy.ACRMFA,
		MaxAgeSeconds: int64(policy.RequesterTierMaxAge.Seconds())}) {
		t.Fatalf("the need the status shows: %+v", need)
	}
	if _, err := g.s.Owner.Exec(ctx, `SELECT record_call_sign_in($1, $2, 'not-ama', 'mfa', now())`, wf, g.idp.URL); err != nil {
		t.Fatal(err)
	}
	again, err := call(ama, "gosdk", res.RequestState, "accept")
	if againLink, againWF := asked(again, err); againLink != link || againWF != wf || again.RequestState == res.RequestState {
		t.Fatalf("asked again for another call (%s), or with the same state", againLink)
	}
	if st := status(wf); st != workflows.StatusAwaitingSignIn {
		t.Fatalf("another person's recorded sign-in carried ama's call on: %s", st)
	}
	if _, err := call(ama, "gosdk", res.RequestState, "accept"); !refusedAs(err, mcpgate.ErrStateReplayed) {
		t.Fatalf("the first requestState again: %v", err)
	}

	g.signInAt(t, testenv.Browser(t), link, "efua", `#signin-error`)
	var refused, recorded int
	_ = g.s.Owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM sign_in_log WHERE event = 'sign_in_failed' AND workflow_id = $1 AND user_id = 'efua'
		AND message LIKE '%someone other than the person who asked%'), (SELECT count(*) FROM call_sign_ins WHERE workflow_id = $1 AND subject <> 'not-ama')`, wf).Scan(&refused, &recorded)
	if refused != 1 || recorded != 0 {
		t.Fatalf("efua at ama's link: %d sign_in_failed rows, %d sign-ins recorded", refused, recorded)
	}

	// A call any Temporal client could start, naming ama in its memo.
	var person signoff.Person
	sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "forged", ConversationID: "forged"}
	if err := g.s.Owner.QueryRow(ctx, `SELECT issuer, subject, ref FROM vault.credentials WHERE user_id = 'ama' AND issuer = $1 LIMIT 1`, g.idp.URL).Scan(
		&person.Issuer, &person.Subject, &sess.CredentialRef); err != nil {
		t.Fatal(err)
	}
	forged, _, err := workflows.Call(ctx, g.s.Client, g.s.Policy, g.s.TaskQueue, workflows.ToolCallInput{Tool: mangrove.ToolCreateTask, ToolCallID: "forged",
		Args: []byte(`{"kind":"shelf_check","dueBy":"today"}`), Session: sess}, workflows.StartedBy(person))
	if err != nil || forged.Status != workflows.StatusAwaitingSignIn {
		t.Fatalf("a call started with ama's memo: %v %+v", err, forged)
	}
	g.signInAt(t, testenv.Browser(t), g.cards+"/cards/"+forged.IdempotencyKey+workflows.SignInSuffix, "ama", `#call-sign-in`)
	time.Sleep(2 * time.Second)
	if st := status(forged.IdempotencyKey); st != workflows.StatusAwaitingSignIn {
		t.Fatalf("ama's sign-in at the link of a call she never made through MCP carried it on: %s", st)
	}

	// The TypeScript client's own loop, for another call of ama's.
	lines, answer := runTS2(t, ctx, "auto", "MCP_URL="+g.url+"/mcp", "MCP_TOKEN="+amaToken, "MCP_TOOL="+mangrove.ToolCreateTask, "MCP_ASK=sign_in",
		`MCP_ARGS={"kind":"shelf_check","dueBy":"today"}`)
	elicit := next(t, lines, "elicit")
	if elicit.Mode != "url" || !strings.HasSuffix(elicit.URL, workflows.SignInSuffix) || elicit.URL == link {
		t.Fatalf("the TypeScript client's elicitation: %+v", elicit)
	}
	g.signInAt(t, testenv.Browser(t), elicit.URL, "ama", `#call-sign-in`)
	g.restart() // between the ask and the retry: the seal, the spent states and the recorded sign-in outlive it
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

	// Signed in, a call that goes on to a card she may decide herself asks
	// her to confirm it, in the same retry.
	transfer := &mcp.CallToolParams{Name: mangrove.ToolRequestStockTransfer, Arguments: map[string]any{"articleId": 40211, "quantity": 40, "reason": "stockout_risk"},
		Meta: mcp.Meta{mcpgate.ConversationMeta: "transfer"}}
	res, err = ama.CallTool(ctx, transfer)
	link, _ = asked(res, err)
	g.signInAt(t, testenv.Browser(t), link, "ama", `#call-sign-in`)
	transfer.RequestState, transfer.InputResponses = res.RequestState, mcp.InputResponseMap{"sign_in": &mcp.ElicitResult{Action: "accept"}}
	res, err = ama.CallTool(ctx, transfer)
	if confirm, ok := res.InputRequests["confirm"].(*mcp.ElicitParams); err != nil || !ok || !strings.HasSuffix(confirm.URL, workflows.ConfirmSuffix) || res.RequestState == "" {
		t.Fatalf("the transfer once ama signed in: %v %+v", err, res)
	}

	// A client that declares tasks as well is asked the same, not given a task.
	task := g.rpc(t, rpcCall{token: amaToken, method: "tools/call", name: mangrove.ToolCreateTask, tasks: true, elicitURL: true,
		params: map[string]any{"name": mangrove.ToolCreateTask, "arguments": map[string]any{"kind": "shelf_check", "dueBy": "today"}}, meta: map[string]any{mcpgate.ConversationMeta: "task"}})
	if b, _ := json.Marshal(task.Result); task.Result["resultType"] != "input_required" || task.Result["requestState"] == nil ||
		!strings.Contains(string(b), `"sign_in"`) || !strings.Contains(string(b), workflows.SignInSuffix+`"`) {
		t.Fatalf("a client declaring tasks and URL elicitation: %d %s", task.status, b)
	}

	// Without URL elicitation declared: awaiting_sign_in, as before.
	plain := g.connectAt(t, amaToken, mcpgate.FirstSessionlessRevision, false)
	res, err = call(plain, "plain", "", "")
	if err != nil || res.NeedsInput() || structured(t, res)["status"] != "awaiting_sign_in" {
		t.Fatalf("a client without URL elicitation: %v %+v", err, res)
	}
}
