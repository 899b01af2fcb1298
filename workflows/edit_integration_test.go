package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// TestEditThroughTheStack, on the dev server: ama edits her 40-case card to
// 60 cases; it is revalued at $576.00 and routed to the area manager; her
// approval and kofi's, signed for the old version, are refused; his
// approval of the new version runs 60 cases once.
func TestEditThroughTheStack(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "e1",
		Args: json.RawMessage(fortyCases), Session: ama("edits")})
	if err != nil || first.Status != workflows.StatusPendingApproval || first.ValueCents != 38400 {
		t.Fatalf("%v %+v", err, first)
	}
	send := func(a signoff.Approval, card signoff.CardRef) {
		t.Helper()
		a.Evidence = testenv.Evidence(a.Approver.UserID, time.Now())
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), first.RunID, workflows.ApprovalSignal, testenv.Sign(a, card)); err != nil {
			t.Fatal(err)
		}
	}
	waitRows := func(sql string, want int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var n int
			_ = s.Owner.QueryRow(ctx, sql, run.GetID()).Scan(&n)
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d rows, want %d", sql, n, want)
			}
		}
	}
	send(signoff.Approval{Decision: signoff.Edit, ArgsHash: first.ArgsHash, Approver: amaID, Edit: json.RawMessage(`{"quantity":60}`)}, first.CardRef())
	waitRows(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'edited' AND approver_id = 'ama' AND value_cents = 57600`, 1)
	// The edit's row is written by its activity, before the workflow task
	// that puts the new version up completes: the status follows.
	var st workflows.Status
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery)
		st = workflows.Status{}
		if err == nil && v.Get(&st) == nil && st.Version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the edit: %v %+v", err, st)
		}
	}
	if st.ValueCents != 57600 || st.ApproverRole != mangrove.RoleAreaManager || st.ArgsHash == first.ArgsHash {
		t.Fatalf("after the edit: %+v", st)
	}
	send(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}, first.CardRef())
	send(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: kofiID}, first.CardRef())
	waitRows(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused'`, 2)
	send(signoff.Approval{Decision: signoff.Approve, ArgsHash: st.ArgsHash, Approver: kofiID}, st.CardRef(run.GetID()))
	res := awaitResult(t, run, 30*time.Second, "the edited transfer")
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	var transfers int
	var refusals []string
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1 AND quantity = 60`, run.GetID()).Scan(&transfers)
	rows, _ := s.Owner.Query(ctx, `SELECT approver_id || '/' || reason FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' ORDER BY id`, run.GetID())
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		refusals = append(refusals, r)
	}
	if transfers != 1 || len(refusals) != 2 || refusals[0] != "ama/invalid_arguments" || refusals[1] != "kofi/invalid_arguments" {
		t.Fatalf("%d transfers of 60 cases; refusals %v", transfers, refusals)
	}
}
