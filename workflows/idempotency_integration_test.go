package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// bareStart starts a ToolCall as a client that knows nothing of toolgate's
// start options would: Temporal's default reuse policy, nothing else.
func bareStart(t *testing.T, s *testenv.Stack, in workflows.ToolCallInput) workflows.ToolCallResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WorkflowID(in.Session.ConversationID, in.ToolCallID), TaskQueue: s.TaskQueue},
		workflows.WorkflowType, in)
	if err != nil {
		t.Fatalf("bare start: %v", err)
	}
	var res workflows.ToolCallResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("bare run: %v", err)
	}
	return res
}

// TestSecondRunOfAClosedIDRunsNothingTwice: after a call ends, a bare
// client starts the same ID again (Temporal's default reuse policy allows
// it). The second run gets the first outcome back and admits, audits and
// executes nothing: one task, one decision row, one count toward the limit.
func TestSecondRunOfAClosedIDRunsNothingTwice(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	calls := []workflows.ToolCallInput{
		{Tool: "create_task", ToolCallID: "task", Args: task(112, "Check cooler 3"), Session: ama("rerun")},
		{Tool: "get_stock", ToolCallID: "read", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("rerun")},
		{Tool: "get_stock", ToolCallID: "denied", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`), Session: ama("rerun")},
	}
	for _, in := range calls {
		first := s.Run(t, in)
		again := bareStart(t, s, in)
		a, _ := json.Marshal(first)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Errorf("%s: the second run answered\n%s\nnot the first outcome\n%s", in.ToolCallID, b, a)
		}
	}
	rows := (&stackAudit{s}).rows(t, `SELECT workflow_id, event, count(*), count(DISTINCT run_id) FROM audit_log GROUP BY 1, 2 ORDER BY 1, 2`)
	want := []string{"toolcall-rerun-denied denied 1 1", "toolcall-rerun-read allowed 1 1", "toolcall-rerun-task allowed 1 1", "toolcall-rerun-task executed 1 1"}
	if strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Fatalf("audit after second runs:\n got %v\nwant %v", rows, want)
	}
	var tasks int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.tasks`).Scan(&tasks)
	if tasks != 1 {
		t.Fatalf("%d tasks after a second run", tasks)
	}
}

// TestReusedCallIDWithOtherArgsIsAConflict: the same tool-call ID with
// another tool, other args or another session gets idempotency_conflict,
// audited, never the first call's outcome: whether the first call ended
// (a bare client's second run) or still waits for a person (a duplicate
// start through Update-with-Start).
func TestReusedCallIDWithOtherArgsIsAConflict(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	in := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "task", Args: task(112, "Check cooler 3"), Session: ama("conflict")}
	s.Run(t, in)
	other := in
	other.Args = task(112, "Transfer the petty cash")
	for _, res := range []workflows.ToolCallResult{bareStart(t, s, other), callOutcome(t, s, other).ToolCallResult} {
		if res.Status != workflows.StatusDenied || res.Code != policy.CodeIdempotencyConflict || strings.Contains(string(res.Result), "taskId") {
			t.Fatalf("other args on a closed ID: %+v", res)
		}
	}
	pending, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("conflict", "card", fortyCases, ama("")))
	if err != nil || pending.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, pending)
	}
	for name, dup := range map[string]workflows.ToolCallInput{
		"other args":    transferIn("conflict", "card", `{"articleId":40211,"quantity":41,"reason":"stockout_risk"}`, ama("")),
		"other session": transferIn("conflict", "card", fortyCases, kofi("")),
		"other tool":    {Tool: "get_stock", ToolCallID: "card", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("conflict")},
	} {
		out := callOutcome(t, s, dup)
		if out.Status != workflows.StatusDenied || out.Code != policy.CodeIdempotencyConflict || out.ArgsHash != "" || out.Card != "" {
			t.Errorf("%s on a pending card: %+v", name, out)
		}
	}
	same := callOutcome(t, s, transferIn("conflict", "card", fortyCases, ama("")))
	if same.Status != workflows.StatusPendingApproval || same.ArgsHash != pending.ArgsHash {
		t.Fatalf("the same call again should attach to the card: %+v", same)
	}
	if err := s.Client.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test over"); err != nil {
		t.Fatal(err)
	}
	rows := (&stackAudit{s}).rows(t, `SELECT workflow_id, event, reason FROM audit_log WHERE reason = 'idempotency_conflict' ORDER BY id`)
	if len(rows) != 5 {
		t.Fatalf("conflicts audited: %v, want 5 rows", rows)
	}
	var tasks int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.tasks`).Scan(&tasks)
	if tasks != 1 {
		t.Fatalf("%d tasks", tasks)
	}
}

func callOutcome(t *testing.T, s *testenv.Stack, in workflows.ToolCallInput) workflows.Outcome {
	t.Helper()
	out, _, err := workflows.Call(context.Background(), s.Client, s.Policy, s.TaskQueue, in)
	if err != nil {
		t.Fatalf("call %s: %v", in.ToolCallID, err)
	}
	return out
}

// TestCallIDsMapBackToOnePair: toolcall-a-b + c and toolcall-a + b-c
// would be one workflow ID. A tool-call ID with '-' (or any character
// outside the set) is refused before anything starts, by the client
// helpers and by the workflow itself when a bare client starts it.
func TestCallIDsMapBackToOnePair(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	for _, bad := range []workflows.ToolCallInput{
		{Tool: "get_stock", ToolCallID: "b-c", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("a")},
		{Tool: "get_stock", ToolCallID: "c/1", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("a")},
		{Tool: "get_stock", ToolCallID: strings.Repeat("c", 65), Args: json.RawMessage(`{"articleId":40211}`), Session: ama("a")},
	} {
		_, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, bad)
		if err == nil || !strings.Contains(err.Error(), "toolCallId") {
			t.Errorf("%q: %v", bad.ToolCallID, err)
		}
		_, err = s.Client.DescribeWorkflow(ctx, workflows.WorkflowID("a", bad.ToolCallID), "")
		var nf *serviceerror.NotFound
		if err == nil || !errors.As(err, &nf) {
			t.Errorf("%q: something started (%v)", bad.ToolCallID, err)
		}
	}
	// A bare client starting toolcall-a-b-c for conversation a, call b-c.
	res := bareStart(t, s, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "b-c", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("a")})
	if res.Status != workflows.StatusDenied || res.Code != policy.CodeInvalidArguments || !strings.Contains(res.Message, "toolCallId") {
		t.Fatalf("bare start with an ambiguous ID: %+v", res)
	}
}
