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
	"go.temporal.io/api/workflowservice/v1"
)

func kofi(conv string) policy.Session {
	stores := []int64{}
	for id := int64(110); id <= 121; id++ {
		stores = append(stores, id)
	}
	return policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(stores...), SessionID: "s-kofi", ConversationID: conv, CredentialRef: "cred-kofi"}
}

// task is a recount of UHT milk at a store, due today, with a note.
func task(store int64, note string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"kind": "recount", "articleId": 40211, "dueBy": "today", "note": note, "storeId": store})
	return b
}

func countTasks(t *testing.T, s *testenv.Stack, store int64) int {
	t.Helper()
	var n int
	if err := s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM mangrove.tasks WHERE store_id = $1`, store).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDuplicateStartIsOneRunAndOneTask starts the same tool-call ID several
// times, concurrently (one run) and after it ended (a second run that only
// answers with the first outcome): one upstream task, one set of rows.
func TestDuplicateStartIsOneRunAndOneTask(t *testing.T) {
	s := testenv.NewStack(t)
	in := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "call_dup", Args: task(112, "Check cooler 3"), Session: ama("dup")}
	var wg sync.WaitGroup
	runIDs := make([]string, 8)
	for i := range runIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := workflows.Start(context.Background(), s.Client, s.Policy, s.TaskQueue, in)
			if err != nil {
				t.Error(err)
				return
			}
			var res workflows.ToolCallResult
			if err := run.Get(context.Background(), &res); err != nil || res.Status != "executed" {
				t.Errorf("duplicate %d: %v %+v", i, err, res)
			}
			runIDs[i] = run.GetRunID()
		}()
	}
	wg.Wait()
	for _, id := range runIDs {
		if id != runIDs[0] {
			t.Fatalf("duplicate starts saw different runs: %v", runIDs)
		}
	}
	after := s.Run(t, in)
	if after.Status != "executed" || !strings.Contains(string(after.Result), "T-") || after.IdempotencyKey != workflows.WorkflowID("dup", "call_dup") {
		t.Fatalf("start after the end: %+v", after)
	}
	id := workflows.WorkflowID("dup", "call_dup")
	var resp *workflowservice.ListWorkflowExecutionsResponse
	for range 50 { // visibility trails the runs a little
		var err error
		resp, err = s.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: testenv.Namespace(), Query: fmt.Sprintf("WorkflowId = '%s'", id)})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Executions) >= 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(resp.Executions); n != 2 {
		t.Fatalf("%d runs of %s, want the concurrent starts' one and the late start's answering run", n, id)
	}
	if n := countTasks(t, s, 112); n != 1 {
		t.Fatalf("%d upstream tasks, want 1", n)
	}
	var rows int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE workflow_id = $1`, id).Scan(&rows)
	if rows != 2 {
		t.Fatalf("%d audit rows, want allowed + executed", rows)
	}
}

// TestCreateTaskRateLimit: the 31st create_task for a store in a day is rate_limit.
func TestCreateTaskRateLimit(t *testing.T) {
	s := testenv.NewStack(t)
	for i := 1; i <= 30; i++ {
		res := s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: fmt.Sprint("t", i), Args: task(112, fmt.Sprint("Task number ", i)), Session: ama("rate")})
		if res.Status != "executed" {
			t.Fatalf("call %d: %s/%s %s", i, res.Status, res.Code, res.Message)
		}
	}
	res := s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: "t31", Args: task(112, "Task number 31"), Session: ama("rate")})
	if res.Status != "denied" || res.Code != policy.CodeRateLimit || !strings.Contains(res.Message, "30 calls per day") {
		t.Fatalf("31st: %s/%s %q", res.Status, res.Code, res.Message)
	}
	if n := countTasks(t, s, 112); n != 30 {
		t.Fatalf("%d tasks upstream, want 30", n)
	}
	// Another store's budget is its own.
	if res := s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: "t_other", Args: task(115, "Other store"), Session: kofi("rate")}); res.Status != "executed" {
		t.Fatalf("store 115: %s/%s", res.Status, res.Code)
	}
}

// TestConcurrentCallsCannotPassALimit: with 25 of 30 used, 40 concurrent
// calls admit exactly 5.
func TestConcurrentCallsCannotPassALimit(t *testing.T) {
	s := testenv.NewStack(t)
	for i := 1; i <= 25; i++ {
		if res := s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: fmt.Sprint("seed", i), Args: task(115, fmt.Sprint("Seed task ", i)), Session: kofi("conc")}); res.Status != "executed" {
			t.Fatalf("seed %d: %s/%s", i, res.Status, res.Code)
		}
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := 1; i <= 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run, err := workflows.Start(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "create_task", ToolCallID: fmt.Sprint("race", i),
				Args: task(115, fmt.Sprint("Race task ", i)), Session: kofi("conc")})
			if err != nil {
				t.Error(err)
				return
			}
			var res workflows.ToolCallResult
			if err := run.Get(ctx, &res); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[string(res.Status)+"/"+string(res.Code)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got["executed/ok"] != 5 || got["denied/rate_limit"] != 35 {
		t.Fatalf("outcomes %v, want 5 executed and 35 rate_limit", got)
	}
	if n := countTasks(t, s, 115); n != 30 {
		t.Fatalf("%d tasks upstream, want 30", n)
	}
}

// TestACallThatRanNothingGivesItsBudgetBack, on the dev server: five
// approved transfers at store 112 (the day's limit) are refused at
// execution because their credential was revoked after the cards went up.
// Nothing ran upstream, so each returns its reservation in the transaction
// that records its end (a released row), and the sixth, correct call goes
// up as a card instead of being refused rate_limit.
func TestACallThatRanNothingGivesItsBudgetBack(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time, demo)
		SELECT 'cred-ama-gone', user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time, demo FROM vault.credentials WHERE ref = 'cred-ama'`); err != nil {
		t.Fatal(err)
	}
	gone := ama("")
	gone.CredentialRef = "cred-ama-gone"
	var ids []string
	for q := 1; q <= 5; q++ {
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("budget", fmt.Sprint("c", q),
			fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"stockout_risk"}`, q), gone))
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %d: %v %+v", q, err, first)
		}
		ids = append(ids, run.GetID())
	}
	if _, err := s.Owner.Exec(ctx, `UPDATE vault.credentials SET revoked = true WHERE ref = 'cred-ama-gone'`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := workflows.SendDecision(ctx, s.Client, id, signoff.Approval{Decision: signoff.Approve, Approver: amaID, Evidence: testenv.Evidence("ama", time.Now())},
			testenv.ApprovalSigner); err != nil {
			t.Fatal(err)
		}
		res := awaitResult(t, s.Client.GetWorkflow(ctx, id, ""), 30*time.Second, id)
		if res.Status != workflows.StatusFailed || res.Code != policy.CodeCredentialUnavailable {
			t.Fatalf("%s with a revoked credential: %+v", id, res)
		}
	}
	first, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("budget", "retry", `{"articleId":40211,"quantity":3,"reason":"stockout_risk"}`, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("the retry with a good credential, after five calls that ran nothing: %v %+v", err, first)
	}
	var released int
	if err := s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE conversation_id = 'budget' AND event = 'released' AND reason = 'credential_unavailable'
		AND resource_kind = 'store' AND resource_id = '112' AND value_cents > 0`).Scan(&released); err != nil || released != 5 {
		t.Fatalf("released rows: %d (%v), want one per call that ran nothing", released, err)
	}
}

// TestAPerUserLimitIsAPersons: a per-user limit counts the person behind
// the call's credential (the issuer and subject of their sign-in), never
// the user ID, which a provider lets two people share (OIDC Core 5.7).
// ama, at her limit of find_book calls under the user ID ama, is refused
// under her other user ID kofi; a second person whose user ID is also ama
// is not refused for ama's calls, and has a limit of their own.
func TestAPerUserLimitIsAPersons(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: testenv.WithLibrary})
	ctx := context.Background()
	for _, c := range []struct{ ref, user, subject string }{{"cred-find-1", "ama", "ama-1"}, {"cred-find-2", "kofi", "ama-1"}, {"cred-find-3", "ama", "ama-2"}} {
		if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, acr, auth_time)
			SELECT $1, $2, client_secret, $3, $4, 'member', 'mfa', now() FROM vault.credentials WHERE ref = 'cred-' || $2`, c.ref, c.user, testenv.Issuer, c.subject); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	find := func(user, ref string) workflows.ToolCallResult {
		t.Helper()
		n++
		return s.First(t, workflows.ToolCallInput{Tool: testenv.LibraryTool, ToolCallID: fmt.Sprint("find.", n), Args: json.RawMessage(`{"title":"Middlemarch"}`),
			Session: policy.Session{UserID: user, Role: testenv.LibraryMember, SessionID: "s-" + ref, ConversationID: "books", CredentialRef: ref}}).ToolCallResult
	}
	// The library's upstream is Mangrove's, which knows no books: each
	// search is admitted, counted and then refused upstream.
	for i := range testenv.LibrarySearches {
		if res := find("ama", "cred-find-1"); res.Code != policy.CodeUpstreamError {
			t.Fatalf("ama's search %d of %d: %+v", i+1, testenv.LibrarySearches, res)
		}
	}
	if res := find("kofi", "cred-find-2"); res.Code != policy.CodeRateLimit {
		t.Fatalf("ama at her limit, searching under her other user ID kofi, was not refused: %+v", res)
	}
	for i := range testenv.LibrarySearches {
		if res := find("ama", "cred-find-3"); res.Code != policy.CodeUpstreamError {
			t.Fatalf("a second person under the user ID ama, search %d of %d, was refused for ama's: %+v", i+1, testenv.LibrarySearches, res)
		}
	}
	if res := find("ama", "cred-find-3"); res.Code != policy.CodeRateLimit {
		t.Fatalf("the second person past their own limit was not refused: %+v", res)
	}
	// Each decision row names the person it counted.
	var ama, other int
	if err := s.Owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE requester_subject = 'ama-1'), count(*) FILTER (WHERE requester_subject = 'ama-2')
		FROM audit_log WHERE tool = $1 AND event_key = 'decision' AND requester_issuer = $2`, testenv.LibraryTool, testenv.Issuer).Scan(&ama, &other); err != nil {
		t.Fatal(err)
	}
	if want := testenv.LibrarySearches + 1; ama != want || other != want {
		t.Fatalf("the decision rows name ama %d and the other person %d times, want %d each", ama, other, want)
	}
}
