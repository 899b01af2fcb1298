package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
)

// hostileCalls are calls a confused or hostile model might make, each with
// the code it must get. None may have any effect upstream.
var hostileCalls = []struct {
	name, tool, args string
	session          func(policy.Session) policy.Session
	code             policy.Code
}{
	{"constructor", "constructor", `{}`, nil, policy.CodeUnknownTool},
	{"__proto__", "__proto__", `{}`, nil, policy.CodeUnknownTool},
	{"toString", "toString", `{}`, nil, policy.CodeUnknownTool},
	{"empty name", "", `{}`, nil, policy.CodeUnknownTool},
	{"NUL in the name", "create_task\x00", `{"kind":"shelf_check","dueBy":"today"}`, nil, policy.CodeUnknownTool},
	{"Cyrillic look-alike", "сreate_task", `{"kind":"shelf_check","dueBy":"today"}`, nil, policy.CodeUnknownTool},
	{"zero-width joiner", "create\u200d_task", `{"kind":"shelf_check","dueBy":"today"}`, nil, policy.CodeUnknownTool},
	{"upper case", "CREATE_TASK", `{"kind":"shelf_check","dueBy":"today"}`, nil, policy.CodeUnknownTool},
	{"trailing space", "create_task ", `{"kind":"shelf_check","dueBy":"today"}`, nil, policy.CodeUnknownTool},
	{"10 KB name", strings.Repeat("create_task", 1000), `{}`, nil, policy.CodeUnknownTool},
	{"denied tool", "change_price", `{"articleId":40211,"newPriceCents":1}`, nil, policy.CodeToolDenied},
	{"denied tool, area manager", "change_price", `{"articleId":40211,"newPriceCents":1}`, func(s policy.Session) policy.Session { s.Role = mangrove.RoleAreaManager; return s }, policy.CodeToolDenied},
	{"made-up role", "create_task", `{"kind":"shelf_check","dueBy":"today"}`, func(s policy.Session) policy.Session { s.Role = "admin"; return s }, policy.CodeRole},
	{"userId smuggled", "create_task", `{"kind":"shelf_check","dueBy":"today","userId":"kofi"}`, nil, policy.CodeInvalidArguments},
	{"role smuggled", "create_task", `{"kind":"shelf_check","dueBy":"today","role":"area_manager"}`, nil, policy.CodeInvalidArguments},
	{"storeIds smuggled", "create_task", `{"kind":"shelf_check","dueBy":"today","storeIds":[118]}`, nil, policy.CodeInvalidArguments},
	{"credential smuggled", "create_task", `{"kind":"shelf_check","dueBy":"today","credentialRef":"cred-kofi"}`, nil, policy.CodeInvalidArguments},
	{"amount smuggled", "request_stock_transfer", `{"articleId":40211,"quantity":40,"reason":"stockout_risk","valueCents":1}`, nil, policy.CodeInvalidArguments},
	{"source store smuggled", "request_stock_transfer", `{"articleId":40211,"quantity":40,"reason":"stockout_risk","fromStoreId":131}`, nil, policy.CodeInvalidArguments},
	{"case-variant key", "create_task", `{"Title":"Mop the floor"}`, nil, policy.CodeInvalidArguments},
	{"duplicate key", "create_task", `{"kind":"shelf_check","dueBy":"today","kind":"pricing_desk"}`, nil, policy.CodeInvalidArguments},
	{"oversized", "create_task", `{"kind":"shelf_check","dueBy":"today","note":"` + strings.Repeat("x", 20000) + `"}`, nil, policy.CodeInvalidArguments},
	{"deeply nested", "create_task", strings.Repeat(`{"note":`, 2000) + `"x"` + strings.Repeat(`}`, 2000), nil, policy.CodeInvalidArguments},
	{"string for a number", "request_stock_transfer", `{"articleId":"40211","quantity":40,"reason":"stockout_risk"}`, nil, policy.CodeInvalidArguments},
	{"NaN as text", "request_stock_transfer", `{"articleId":40211,"quantity":"NaN","reason":"stockout_risk"}`, nil, policy.CodeInvalidArguments},
	{"negative quantity", "request_stock_transfer", `{"articleId":40211,"quantity":-40,"reason":"stockout_risk"}`, nil, policy.CodeInvalidArguments},
	{"fractional quantity", "request_stock_transfer", `{"articleId":40211,"quantity":0.5,"reason":"stockout_risk"}`, nil, policy.CodeInvalidArguments},
	{"huge quantity", "request_stock_transfer", `{"articleId":40211,"quantity":1e18,"reason":"stockout_risk"}`, nil, policy.CodeInvalidArguments},
	{"reason outside the enum", "request_stock_transfer", `{"articleId":40211,"quantity":4,"reason":"because I said so"}`, nil, policy.CodeInvalidArguments},
	{"array for args", "create_task", `["kind","shelf_check"]`, nil, policy.CodeInvalidArguments},
	{"another store's task", "create_task", `{"kind":"shelf_check","dueBy":"today","storeId":118}`, nil, policy.CodeResourceScope},
	{"another area's transfer", "request_stock_transfer", `{"articleId":40211,"quantity":4,"reason":"stockout_risk","storeId":131}`, nil, policy.CodeResourceScope},
	{"another store's stock", "get_stock", `{"articleId":40211,"storeId":118}`, nil, policy.CodeResourceScope},
	{"signed out", "create_task", `{"kind":"shelf_check","dueBy":"today"}`, func(s policy.Session) policy.Session { s.CredentialRef = ""; return s }, policy.CodeCredentialUnavailable},
	{"someone else's credential", "create_task", `{"kind":"shelf_check","dueBy":"today"}`, func(s policy.Session) policy.Session { s.CredentialRef = "cred-kofi"; return s }, policy.CodeCredentialUnavailable},
	{"300-character user ID", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.UserID = strings.Repeat("a", 300); return s }, policy.CodeRole},
	{"NUL in the user ID", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.UserID = "ama\x00kofi"; return s }, policy.CodeRole},
	{"space in the session ID", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.SessionID = "s 1"; return s }, policy.CodeRole},
	{"1,000 session stores", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session {
		s.Resources = policy.Resources{"store": make([]string, 1000)}
		return s
	}, policy.CodeRole},
	{"a zero-padded session store", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session {
		s.Resources = policy.Resources{"store": {"0112"}}
		return s
	}, policy.CodeResourceScope},
	{"newline in the credential", "get_stock", `{"articleId":40211}`, func(s policy.Session) policy.Session { s.CredentialRef = "cred-ama\n"; return s }, policy.CodeRole},
	{"over the hard limit", "request_stock_transfer", `{"articleId":40211,"quantity":250,"reason":"festival_peak"}`, func(s policy.Session) policy.Session {
		s.UserID, s.Role, s.CredentialRef = "kofi", mangrove.RoleAreaManager, "cred-kofi"
		return s
	}, policy.CodeOverLimit},
}

// TestHostileCalls runs the table through the real stack and finds each
// expected code, a refusal that says what to do, and no effect upstream.
func TestHostileCalls(t *testing.T) {
	s := testenv.NewStack(t)
	for i, h := range hostileCalls {
		sess := ama("hostile")
		if h.session != nil {
			sess = h.session(sess)
		}
		res := s.First(t, workflows.ToolCallInput{Tool: h.tool, ToolCallID: fmt.Sprint("h", i), Args: json.RawMessage(h.args), Session: sess}).ToolCallResult
		if res.Code != h.code || res.Status == "executed" || res.Message == "" || len(res.Message) > 2000 {
			t.Errorf("%s: got %s/%s (%d-byte message), want %s", h.name, res.Status, res.Code, len(res.Message), h.code)
		}
	}
	// A foreign credential passes the chain (it only sees that one is present)
	// and is refused by the vault in the activity: admitted, never run.
	var tasks, transfers, executed, cards int
	_ = s.Owner.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM mangrove.tasks), (SELECT count(*) FROM mangrove.transfers),
		(SELECT count(*) FROM audit_log WHERE event IN ('executed', 'approved')), (SELECT count(*) FROM pending_action)`).Scan(&tasks, &transfers, &executed, &cards)
	if tasks+transfers+executed+cards != 0 {
		t.Fatalf("hostile calls had effects: %d tasks, %d transfers, %d executed rows, %d cards", tasks, transfers, executed, cards)
	}
	var denied int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE conversation_id = 'hostile'`).Scan(&denied)
	if denied < len(hostileCalls)-1 {
		t.Fatalf("only %d of %d hostile calls were audited", denied, len(hostileCalls))
	}
	t.Logf("%d hostile calls, each refused with its code, 0 effects", len(hostileCalls))
}

// TestAMalformedSessionOnTheWireIsRefused: a session a non-Go agent
// backend writes by hand (both resources and the earlier storeIds, or a
// store number below 1) reaches the workflow as raw JSON; it is refused at
// step 2 as malformed, never left undecodable with the workflow task
// retrying without end.
func TestAMalformedSessionOnTheWireIsRefused(t *testing.T) {
	s := testenv.NewStack(t)
	for i, sess := range []string{
		`{"userId":"ama","role":"store_manager","storeIds":[112],"resources":{"store":["112"]},"sessionId":"s","conversationId":"wire","credentialRef":"cred-ama"}`,
		`{"userId":"ama","role":"store_manager","storeIds":[0],"sessionId":"s","conversationId":"wire","credentialRef":"cred-ama"}`,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		raw := json.RawMessage(fmt.Sprintf(`{"tool":"get_stock","toolCallId":"w%d","args":{"articleId":40211},"session":%s}`, i, sess))
		run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WorkflowID("wire", fmt.Sprint("w", i)), TaskQueue: s.TaskQueue}, workflows.WorkflowType, raw)
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.ToolCallResult
		err = run.Get(ctx, &res)
		cancel()
		if err != nil || res.Code != policy.CodeRole || !strings.Contains(res.Message, "malformed") {
			t.Errorf("session %s: %v %+v", sess, err, res)
		}
	}
}

// TestApprovalRacingTheExpiry sends approvals around the moment a 2 s card
// expires: whichever wins, executed means exactly one transfer and expired
// means none.
func TestApprovalRacingTheExpiry(t *testing.T) {
	s := testenv.NewStackTTL(t, 2*time.Second)
	ctx := context.Background()
	outcomes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := int64(110 + i) // one store each: transfers are capped at 5 per store per day
			first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("race", fmt.Sprint("c", i),
				fmt.Sprintf(`{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":%d}`, store), kofi("")))
			if err != nil || first.Status != workflows.StatusPendingApproval {
				t.Errorf("%v %+v", err, first)
				return
			}
			time.Sleep(2*time.Second - 300*time.Millisecond + time.Duration(i)*80*time.Millisecond)
			_ = s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal,
				testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: storeManager(store)}, first.CardRef()))
			var res workflows.ToolCallResult
			if err := run.Get(ctx, &res); err != nil {
				t.Error(err)
				return
			}
			var transfers int
			_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, run.GetID()).Scan(&transfers)
			if (res.Status == "executed") != (transfers == 1) || transfers > 1 || (res.Status != "executed" && res.Status != "expired") {
				t.Errorf("%s: %s with %d transfers", run.GetID(), res.Status, transfers)
			}
			mu.Lock()
			outcomes[string(res.Status)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("approvals racing expiry: %v", outcomes)
}

// TestApprovalLandingWithTheExpiry: an approval sent just before the card
// expires, while no worker runs, reaches the workflow in the same task as
// the fired expiry timer. It must not count: the decision arrived, but the
// card is processed after its expiry, so nothing runs. Both shapes of the
// wait: a card that never escalates (its expiry timer runs from the start),
// and one whose escalation has fired (its expiry timer runs from then on,
// for what is left).
func TestApprovalLandingWithTheExpiry(t *testing.T) {
	for _, tc := range []struct {
		name          string
		escalateAfter float64 // 1: never
		ttl           time.Duration
	}{
		{"no escalation", 1, 3 * time.Second},
		{"after the escalation", 0.5, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.NewStackWith(t, testenv.StackOptions{ApprovalTTL: tc.ttl, EscalateAfter: tc.escalateAfter})
			ctx := context.Background()
			first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("late", "c1", fortyCases, ama("")))
			if err != nil || first.Status != workflows.StatusPendingApproval {
				t.Fatalf("%v %+v", err, first)
			}
			up := time.Now()
			if tc.escalateAfter < 1 {
				// The worker handles the escalation (and starts the expiry timer for what is left).
				var escalated int
				for escalated == 0 && time.Since(up) < tc.ttl-2*time.Second {
					time.Sleep(100 * time.Millisecond)
					_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'escalated'`, run.GetID()).Scan(&escalated)
				}
				if escalated != 1 {
					t.Fatalf("%d escalations with %s of the card left", escalated, tc.ttl-time.Since(up))
				}
				time.Sleep(200 * time.Millisecond)
			}
			s.StopWorker()
			time.Sleep(time.Until(up.Add(tc.ttl - time.Second))) // the card has about a second left
			if err := s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal,
				testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef())); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond) // the timer fires while no worker runs
			s.StartWorker(t)
			var res workflows.ToolCallResult
			if err := run.Get(ctx, &res); err != nil || res.Status != "expired" {
				t.Fatalf("%v %+v", err, res)
			}
			var transfers, refused int
			_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
			_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'expired'`, run.GetID()).Scan(&refused)
			if transfers != 0 || refused != 1 {
				t.Fatalf("%d transfers, %d refusals as expired", transfers, refused)
			}
		})
	}
}
