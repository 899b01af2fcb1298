package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/enums/v1"
)

func transferIn(conv, call, args string, sess policy.Session) workflows.ToolCallInput {
	sess.ConversationID = conv
	return workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: call, Args: json.RawMessage(args), Session: sess}
}

func (s *stackAudit) rows(t *testing.T, sql string, args ...any) []string {
	t.Helper()
	rows, err := s.Owner.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, fmt.Sprint(v))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

type stackAudit struct{ *testenv.Stack }

// TestFirstOutcomeArrivesWhileTheCardIsPending: one round trip returns the
// card; the workflow is still running; the CLI's status query shows it.
func TestFirstOutcomeArrivesWhileTheCardIsPending(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("first", "c1", fortyCases, ama("")))
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != workflows.StatusPendingApproval || first.ValueCents != 38400 || first.ApproverRole != mangrove.RoleStoreManager ||
		first.ExpiresAt == "" || len(first.ArgsHash) != 64 || !strings.HasPrefix(first.Card, "Move 40 cases of UHT milk") {
		t.Fatalf("first outcome: %+v", first)
	}
	desc, err := s.Client.DescribeWorkflow(ctx, run.GetID(), "")
	if err != nil || desc.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the call should still be waiting: %v", err)
	}
	cli, err := testenv.TemporalCLI()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cli, "workflow", "query", "--address", testenv.TemporalAddress(t), "--codec-endpoint", testenv.CodecServer(t),
		"--workflow-id", run.GetID(), "--name", "status", "-o", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pending_approval") || !strings.Contains(string(out), "$384.00 at cost") || !strings.Contains(string(out), first.ArgsHash) {
		t.Fatalf("temporal workflow query: %v\n%s", err, out)
	}
	// Ops find it by its search attributes.
	var listed []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		listed, err = exec.Command(cli, "workflow", "list", "--address", testenv.TemporalAddress(t),
			"--query", `ToolStatus="pending_approval" AND Resource="store/112" AND ApproverRole="store_manager" AND ValueCents=38400`).CombinedOutput()
		if err == nil && strings.Contains(string(listed), run.GetID()) {
			break
		}
	}
	if !strings.Contains(string(listed), run.GetID()) {
		t.Fatalf("temporal workflow list does not find the pending card: %v\n%s", err, listed)
	}
	// A second Call with the same IDs attaches and sees the same card.
	again, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("first", "c1", fortyCases, ama("")))
	if err != nil || again.ArgsHash != first.ArgsHash || again.Status != workflows.StatusPendingApproval {
		t.Fatalf("attach: %v %+v", err, again)
	}
	if err := workflows.SendDecision(ctx, s.Client, run.GetID(), signoff.Approval{Decision: signoff.Reject, Approver: amaID, Evidence: testenv.Evidence("ama", time.Now())}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != "rejected" {
		t.Fatalf("final: %v %+v", err, res)
	}
	// After the end, Call returns the final result.
	done, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("first", "c1", fortyCases, ama("")))
	if err != nil || done.Status != "rejected" {
		t.Fatalf("after the end: %v %+v", err, done)
	}
}

// TestTenConcurrentApprovalsMakeOneTransfer: ten approve signals at once,
// from the routed role: one approval counts, one upstream transfer.
func TestTenConcurrentApprovalsMakeOneTransfer(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("ten", "c1", fortyCases, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_ = s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal,
				testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef()))
		}()
	}
	close(start)
	wg.Wait()
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != "executed" {
		t.Fatalf("%v %+v", err, res)
	}
	var transfers, approved int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, run.GetID()).Scan(&transfers)
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved'`, run.GetID()).Scan(&approved)
	if transfers != 1 || approved != 1 {
		t.Fatalf("%d transfers, %d approved rows; want 1 and 1", transfers, approved)
	}
}

// TestApprovalAfterTheTTLRunsNothing: with a 2 s TTL, an approval that
// comes later finds the call expired and nothing moves.
func TestApprovalAfterTheTTLRunsNothing(t *testing.T) {
	s := testenv.NewStackTTL(t, 2*time.Second)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("ttl", "c1", fortyCases, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	time.Sleep(3 * time.Second)
	err = s.Client.SignalWorkflow(ctx, run.GetID(), "", workflows.ApprovalSignal, testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef()))
	var res workflows.ToolCallResult
	if gerr := run.Get(ctx, &res); gerr != nil || res.Status != "expired" {
		t.Fatalf("%v %+v", gerr, res)
	}
	var transfers, refused int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused'`, run.GetID()).Scan(&refused)
	if transfers != 0 {
		t.Fatalf("%d transfers after the TTL", transfers)
	}
	// Either Temporal refused the late signal (the call had ended) or the workflow refused and audited it.
	if err == nil && refused != 1 {
		t.Fatalf("a late signal was accepted by Temporal but not audited as refused (%d rows)", refused)
	}
}

// StoryQuery is the operating page's answer to "what happened in this conversation, and
// why?": every decision event in order with who, what and where.
const StoryQuery = `SELECT tool, event, reason, resource_id FROM audit_log WHERE conversation_id = $1 ORDER BY id`

// TestDemoStory plays the operating page's story and checks its audit rows
// exactly.
func TestDemoStory(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	sess := ama("story")
	if r := s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "1", Args: json.RawMessage(`{"articleId":40211}`), Session: sess}); !strings.Contains(string(r.Result), `"cases":6`) {
		t.Fatalf("stock at 112: %+v", r)
	}
	if r := s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "2", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`), Session: sess}); r.Code != policy.CodeResourceScope {
		t.Fatalf("stock at 118: %+v", r)
	}
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("story", "3", fortyCases, sess))
	if err != nil || first.Card != "Move 40 cases of UHT milk 1 L, case of 12 ($384.00 at cost) from store 118 to store 112, arriving tomorrow by 10:00." || first.ApproverRole != mangrove.RoleStoreManager {
		t.Fatalf("card: %v %+v", err, first)
	}
	a := signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID, Evidence: testenv.Evidence("ama", time.Now())}
	if err := workflows.SendDecision(ctx, s.Client, run.GetID(), a, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	// The network drops: the approver's client sends the approval again.
	_ = workflows.SendDecision(ctx, s.Client, run.GetID(), a, testenv.ApprovalSigner)
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil || res.Status != "executed" {
		t.Fatalf("%v %+v", err, res)
	}
	// ...and the upstream call is repeated by hand with the same key.
	var number string
	_ = json.Unmarshal(res.Result, &struct {
		N *string `json:"transferNumber"`
	}{&number})
	tok := upstreamToken(t, s.Upstream.URL, "ama", "demo-secret-ama")
	repeat := upstreamPost(t, s.Upstream.URL+"/v1/stores/112/transfers", tok, run.GetID(), `{"articleId":40211,"quantity":40,"fromStoreId":118,"reason":"stockout_risk"}`)
	if !strings.Contains(repeat, number) || !strings.Contains(repeat, `"replayed":true`) {
		t.Fatalf("repeat by hand: %s (first %s)", repeat, number)
	}
	if r := s.Run(t, workflows.ToolCallInput{Tool: "change_price", ToolCallID: "4", Args: json.RawMessage(`{"articleId":40211,"newPriceCents":899}`), Session: sess}); r.Code != policy.CodeToolDenied {
		t.Fatalf("change_price: %+v", r)
	}

	got := (&stackAudit{s}).rows(t, StoryQuery, "story")
	var core []string
	for _, r := range got {
		if !strings.Contains(r, "approval_refused") {
			core = append(core, r)
		}
	}
	want := []string{
		"get_stock allowed ok 112",
		"get_stock denied resource_scope 118",
		"request_stock_transfer needs_approval ok 112",
		"request_stock_transfer approved ok 112",
		"request_stock_transfer executed ok 112",
		"change_price denied tool_denied 112",
	}
	if strings.Join(core, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant (plus approval_refused):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var transfers int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers upstream", transfers)
	}
	t.Logf("audit rows of the story:\n%s", strings.Join(got, "\n"))
	readme, _ := os.ReadFile("../docs/operating.md")
	if !strings.Contains(string(readme), strings.Replace(StoryQuery, "$1", "'story'", 1)) {
		t.Fatal("docs/operating.md must show the story's audit query")
	}
}

// TestSayingNoNeedsNoStepUp, on the dev server: kofi's area manager
// signed in by password two hours ago. Her approval of the $960.00 card
// (mfa within 5 minutes) is refused step_up_required, and her rejection
// of it counts: the card ends rejected with her note, and nothing runs.
func TestSayingNoNeedsNoStepUp(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("no", "c1", `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`, ama("")))
	if err != nil || first.Status != workflows.StatusPendingApproval || first.ApproverRole != mangrove.RoleAreaManager {
		t.Fatalf("%v %+v", err, first)
	}
	signedIn := time.Now().Add(-2 * time.Hour)
	pwd := &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "kofi", ACR: policy.ACRPassword, AMR: []string{"pwd"}, AuthTime: signedIn.UTC().Format(time.RFC3339)}
	if err := workflows.SendDecision(ctx, s.Client, run.GetID(), signoff.Approval{Decision: signoff.Approve, Approver: kofiID, Evidence: pwd}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	if err := workflows.SendDecision(ctx, s.Client, run.GetID(), signoff.Approval{Decision: signoff.Reject, Approver: kofiID, Evidence: pwd, Reason: "no festival this week"},
		testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, run, 30*time.Second, "the rejected card")
	if res.Status != workflows.StatusRejected || res.Code != policy.CodeRejected || !strings.Contains(string(res.Result), "no festival this week") {
		t.Fatalf("a rejection by a password sign-in: %s/%s %s %s", res.Status, res.Code, res.Message, res.Result)
	}
	got := strings.Join((&stackAudit{s}).rows(t, `SELECT event || '/' || reason || '/' || coalesce(approver_acr, '') FROM audit_log WHERE workflow_id = $1 AND event <> 'needs_approval' ORDER BY id`, run.GetID()), " ")
	if got != "approval_refused/step_up_required/pwd rejected/rejected/pwd" {
		t.Fatalf("audit: %s", got)
	}
	var transfers int
	if err := s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers`).Scan(&transfers); err != nil || transfers != 0 {
		t.Fatalf("%d transfers (%v)", transfers, err)
	}
}
