package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestApprovingFromATerminal: starter pending lists the cards an approver
// may decide and no others; starter approve takes the workflow ID it
// shows; a decision the workflow refuses is an error naming the refusal's
// code, and one it counts runs the call.
func TestApprovingFromATerminal(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{ApproverIssuers: []string{OperatorIssuer}})
	asStarter(t, s)
	t.Setenv("TOOLGATE_APPROVAL_SIGNING_KEY", testenv.SigningKeyEnv())
	ctx := context.Background()
	sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s-term", ConversationID: "term", CredentialRef: "cred-ama"}
	var ids []string
	for call, quantity := range map[string]string{"t1": "40", "t2": "30"} {
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: call,
			Args: json.RawMessage(`{"articleId":40211,"quantity":` + quantity + `,"reason":"stockout_risk"}`), Session: sess})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %s: %v %+v", call, err, first)
		}
		ids = append(ids, run.GetID())
	}
	slices.Sort(ids) // t1, t2

	var out strings.Builder
	if err := run([]string{"pending", "--role", "store_manager", "--stores", "112", "--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var listed []PendingCard
	if err := json.Unmarshal([]byte(out.String()), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("pending listed %v (%v):\n%s", listed, err, out.String())
	}
	for _, c := range listed {
		if c.Tool != "request_stock_transfer" || c.ApproverRole != "store_manager" || (c.Value != "$384.00" && c.Value != "$288.00") || c.Resource != "store=112" ||
			!strings.Contains(c.Card, "cases of UHT milk") || c.ExpiresAt == "" || (c.WorkflowID != ids[0] && c.WorkflowID != ids[1]) {
			t.Errorf("a listed card: %+v", c)
		}
	}
	out.Reset()
	if err := run([]string{"pending", "--role", "store_manager", "--stores", "118"}, &out); err != nil || !strings.Contains(out.String(), "no card waits for a store_manager over store=118") {
		t.Fatalf("another store's manager sees: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run([]string{"pending", "--role", "store_manager", "--resources", "store=112"}, &out); err != nil || !strings.Contains(out.String(), ids[0]) ||
		!strings.Contains(out.String(), ids[1]) ||
		!strings.Contains(out.String(), "value $384.00 · routed to store_manager") || !strings.Contains(out.String(), "2 card(s)") {
		t.Fatalf("pending as text: %v\n%s", err, out.String())
	}

	err := run([]string{"approve", "--workflow-id", ids[0], "--user", "kofi", "--role", "area_manager", "--stores", "112"}, &out)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), ": role (") {
		t.Fatalf("an approval by the wrong role: %v", err)
	}
	if err := run([]string{"approve", "--workflow-id", ids[0], "--conversation", "term", "--user", "bea", "--role", "store_manager", "--stores", "112"}, &out); err == nil ||
		!strings.Contains(err.Error(), "name the call once") {
		t.Fatalf("a call named twice: %v", err)
	}
	out.Reset()
	if err := run([]string{"approve", "--workflow-id", ids[0], "--user", "bea", "--role", "store_manager", "--stores", "112"}, &out); err != nil {
		t.Fatalf("an approval by the card's role: %v", err)
	}
	if !strings.Contains(out.String(), "approve of "+ids[0]+": approved") {
		t.Fatalf("approve printed %q", out.String())
	}
	var res workflows.ToolCallResult
	if err := s.Client.GetWorkflow(ctx, ids[0], "").Get(ctx, &res); err != nil || res.Status != workflows.StatusExecuted {
		t.Fatalf("the approved call: %v %+v", err, res)
	}
	out.Reset()
	if err := run([]string{"reject", "--conversation", "term", "--call-id", "t2", "--user", "bea", "--role", "store_manager", "--stores", "112", "--reason", "no"}, &out); err != nil ||
		!strings.Contains(out.String(), "reject of "+ids[1]+": rejected") {
		t.Fatalf("a rejection by conversation and call ID: %v %q", err, out.String())
	}
}

// TestWithdrawingFromATerminal: an operator withdraws ama's card for her,
// never for another person; it ends withdrawn, and a second withdrawal
// finds nothing pending.
func TestWithdrawingFromATerminal(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{ApproverIssuers: []string{OperatorIssuer}})
	asStarter(t, s)
	t.Setenv("TOOLGATE_APPROVAL_SIGNING_KEY", testenv.SigningKeyEnv())
	ctx := context.Background()
	sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s-wd", ConversationID: "wd", CredentialRef: "cred-ama"}
	first, run1, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "w1",
		Args: json.RawMessage(`{"articleId":40211,"quantity":40,"reason":"stockout_risk"}`), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("card: %v %+v", err, first)
	}
	var out strings.Builder
	if err := run([]string{"withdraw", "--workflow-id", run1.GetID(), "--user", "efua"}, &out); err == nil || !strings.Contains(err.Error(), "asked for by ama, not efua") {
		t.Fatalf("a withdrawal for another person: %v", err)
	}
	if err := run([]string{"withdraw", "--conversation", "wd", "--call-id", "w1", "--user", "ama", "--reason", "came early"}, &out); err != nil ||
		!strings.Contains(out.String(), "withdraw of "+run1.GetID()+": withdrawn") {
		t.Fatalf("ama's withdrawal: %v %q", err, out.String())
	}
	var res workflows.ToolCallResult
	if err := run1.Get(ctx, &res); err != nil || res.Status != workflows.StatusWithdrawn || res.Code != policy.CodeWithdrawn {
		t.Fatalf("the withdrawn call: %v %+v", err, res)
	}
	if err := run([]string{"withdraw", "--workflow-id", run1.GetID(), "--user", "ama"}, &out); err == nil || !strings.Contains(err.Error(), "is withdrawn, not pending approval") {
		t.Fatalf("a second withdrawal: %v", err)
	}
}

// TestMigrateNamesItsDatabase: migrate creates cluster-wide roles, so it
// never falls back to a server nobody named.
func TestMigrateNamesItsDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	err := run([]string{"migrate"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is unset") {
		t.Fatalf("migrate with no DATABASE_URL: %v", err)
	}
}
