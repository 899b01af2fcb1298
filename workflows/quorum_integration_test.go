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

// TestTwoPersonRuleThroughTheStack, on the dev server: kofi asks for 200
// cases ($1,920.00); his own approval does not count, adwoa's is the first
// of two, her second is refused, and two more area managers approving at
// once make one transfer.
func TestTwoPersonRuleThroughTheStack(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	sess := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113), SessionID: "k1", ConversationID: "quorum", CredentialRef: "cred-kofi"}
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "big",
		Args: json.RawMessage(twoHundredCases), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval || first.ValueCents != 192000 || first.ApproverRole != mangrove.RoleAreaManager ||
		!strings.Contains(first.Message, "Waiting for 2 different people with the role area_manager") {
		t.Fatalf("%v %+v", err, first)
	}
	decideAs := func(who policy.Identity) {
		t.Helper()
		if err := workflows.SendDecision(ctx, s.Client, run.GetID(), signoff.Approval{Decision: signoff.Approve, Approver: who, Evidence: testenv.Evidence(who.UserID, time.Now())},
			testenv.ApprovalSigner); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string) int {
		var n int
		_ = s.Owner.QueryRow(ctx, sql, run.GetID()).Scan(&n)
		return n
	}
	waitFor := func(sql string, want int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); count(sql) < want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d, want %d", sql, count(sql), want)
			}
		}
	}
	decideAs(kofiID)
	waitFor(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'role' AND approver_id = 'kofi'`, 1)
	decideAs(adwoaID)
	waitFor(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_counted' AND approver_id = 'adwoa' AND approver_acr = 'mfa'`, 1)
	decideAs(adwoaID)
	waitFor(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND approver_id = 'adwoa'`, 1)
	v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery)
	var st workflows.Status
	if err != nil || v.Get(&st) != nil || st.Status != workflows.StatusPendingApproval || st.ApprovalsNeeded != 2 || len(st.ApprovedBy) != 1 {
		t.Fatalf("after one valid approval: %v %+v", err, st)
	}
	// Two more signed approvals, sent at once: the second of them finds the
	// card decided.
	var wg sync.WaitGroup
	for _, who := range []policy.Identity{yoofiID, {UserID: "akua", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113)}} {
		a := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: who, Evidence: testenv.Evidence(who.UserID, time.Now())}, first.CardRef())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Client.SignalWorkflow(ctx, run.GetID(), first.RunID, workflows.ApprovalSignal, a); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	res := awaitResult(t, run, 30*time.Second, "the approved transfer")
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	if n := count(`SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approval_counted', 'approved')`); n != 2 {
		t.Fatalf("%d approvals counted, want 2", n)
	}
}

// kofisBigCard puts up kofi's 200-case card, which two people must
// approve, in conversation conv: its first outcome, its run, and a reader
// of its status now.
func kofisBigCard(t *testing.T, s *testenv.Stack, conv string) (workflows.Outcome, client.WorkflowRun, func() workflows.Status) {
	t.Helper()
	ctx := context.Background()
	sess := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113), SessionID: "k1", ConversationID: conv, CredentialRef: "cred-kofi"}
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "big",
		Args: json.RawMessage(twoHundredCases), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	return first, run, func() workflows.Status {
		t.Helper()
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery)
		var st workflows.Status
		if err != nil || v.Get(&st) != nil {
			t.Fatal(err)
		}
		return st
	}
}

// TestAnEditClearsWhatWasApproved, on the dev server: adwoa's approval is
// the first of two on kofi's 200-case card; yoofi's edit to 190 cases
// (still two people) puts up a new version, and the card row, the card's
// status and the count all start again from none: adwoa may approve the
// new version and counts once.
func TestAnEditClearsWhatWasApproved(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	_, run, status := kofisBigCard(t, s, "quorum-edit")
	send := func(a signoff.Approval) {
		t.Helper()
		st := status()
		a.ArgsHash, a.Evidence = st.ArgsHash, testenv.Evidence(a.Approver.UserID, time.Now())
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), st.RunID, workflows.ApprovalSignal, testenv.Sign(a, st.CardRef(run.GetID()))); err != nil {
			t.Fatal(err)
		}
	}
	row := func() (marks string, version int) {
		_ = s.Owner.QueryRow(ctx, `SELECT coalesce(approvals::text, ''), card_version FROM pending_action WHERE workflow_id = $1`, run.GetID()).Scan(&marks, &version)
		return
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				marks, version := row()
				t.Fatalf("%s: card row version %d approvals %q, status %+v", what, version, marks, status())
			}
		}
	}
	send(signoff.Approval{Decision: signoff.Approve, Approver: adwoaID})
	waitFor("adwoa's approval on the card row", func() bool { m, _ := row(); return strings.Contains(m, "adwoa") })
	send(signoff.Approval{Decision: signoff.Edit, Approver: yoofiID, Edit: json.RawMessage(`{"quantity":190}`)})
	// A card row is written by its activity before the workflow task that
	// changes the status completes: each wait is for both.
	waitFor("the edit", func() bool { _, v := row(); return v == 2 && status().Version == 2 })
	if marks, _ := row(); marks != "" || len(status().ApprovedBy) != 0 {
		t.Fatalf("after the edit the card row keeps approvals %q, the workflow %v", marks, status().ApprovedBy)
	}
	send(signoff.Approval{Decision: signoff.Approve, Approver: adwoaID})
	waitFor("adwoa's approval of the new version", func() bool {
		m, _ := row()
		return strings.Contains(m, "adwoa") && len(status().ApprovedBy) > 0
	})
	if st := status(); st.Status != workflows.StatusPendingApproval || len(st.ApprovedBy) != 1 {
		t.Fatalf("after adwoa approved the new version: %+v", st)
	}
}

// TestADecisionCountsOnlyOnItsVersionAndOnce, on the dev server: adwoa's
// signed approval is the first of two on kofi's 200-case card, and yoofi's,
// signed for the same version, is held back (captured in transit). akua
// edits the card to 190 cases and back to 200, so version 3 shows version
// 1's args hash with no approvals. yoofi's captured approval is refused as
// signed for version 1, and adwoa's, sent again 26 times (its signature
// spelled another way each time), is a repeat each time, which neither
// counts nor locks the card: it takes two fresh approvals of version 3.
func TestADecisionCountsOnlyOnItsVersionAndOnce(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	first, run, status := kofisBigCard(t, s, "quorum-versions")
	akuaID := policy.Identity{UserID: "akua", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113)}
	signed := func(a signoff.Approval) signoff.Approval {
		st := status()
		a.ArgsHash, a.Evidence = st.ArgsHash, testenv.Evidence(a.Approver.UserID, time.Now())
		return testenv.Sign(a, st.CardRef(run.GetID()))
	}
	send := func(a signoff.Approval) {
		t.Helper()
		if err := s.Client.SignalWorkflow(ctx, run.GetID(), first.RunID, workflows.ApprovalSignal, a); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(who, like string) int {
		var n int
		_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND coalesce(approver_id, '') = $2
			AND message LIKE $3`, run.GetID(), who, like).Scan(&n)
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, status())
			}
		}
	}
	counted := signed(signoff.Approval{Decision: signoff.Approve, Approver: adwoaID})
	intercepted := signed(signoff.Approval{Decision: signoff.Approve, Approver: yoofiID})
	send(counted)
	waitFor("adwoa's approval counted", func() bool { return len(status().ApprovedBy) == 1 })
	send(signed(signoff.Approval{Decision: signoff.Edit, Approver: akuaID, Edit: json.RawMessage(`{"quantity":190}`)}))
	waitFor("the edit to 190", func() bool { return status().Version == 2 })
	send(signed(signoff.Approval{Decision: signoff.Edit, Approver: akuaID, Edit: json.RawMessage(`{"quantity":200}`)}))
	waitFor("the edit back to 200", func() bool { return status().Version == 3 })
	if st := status(); st.ArgsHash != first.ArgsHash || len(st.ApprovedBy) != 0 {
		t.Fatalf("version 3 should show version 1's args hash and no approvals: %+v", st)
	}
	send(intercepted)
	waitFor("yoofi's captured approval refused", func() bool { return refused("yoofi", "%signed for version 1 of the card%") == 1 })
	const replays = workflows.MaxRefusedDecisions + 6
	for i := range replays {
		// The same signature spelled another way each time: base64 decoding
		// skips line breaks, so each one still verifies.
		again := counted
		again.Signature += strings.Repeat("\n", i)
		send(again)
	}
	waitFor("adwoa's repeats audited up to their cap", func() bool { return refused("adwoa", "%received before%") == workflows.MaxUnsignedAudited })
	if st := status(); st.Status != workflows.StatusPendingApproval || len(st.ApprovedBy) != 0 {
		t.Fatalf("decisions signed for version 1 counted on version 3, or their repeats locked it: %+v", st)
	}
	send(signed(signoff.Approval{Decision: signoff.Approve, Approver: adwoaID}))
	waitFor("adwoa's fresh approval counted", func() bool { return len(status().ApprovedBy) == 1 })
	send(signed(signoff.Approval{Decision: signoff.Approve, Approver: yoofiID}))
	res := awaitResult(t, run, 30*time.Second, "the transfer approved afresh by adwoa and yoofi")
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	if n := refused("", fmt.Sprintf("%d more payloads%%repeated a signed decision%%", replays-workflows.MaxUnsignedAudited)); n != 1 {
		t.Fatalf("%d summary rows of the repeats past the cap, want 1", n)
	}
}

// TestOnePersonIsOnePerson, on the dev server: kofi's credential was issued
// to his sign-in (subject kofi-7 at the provider). Signed approvals of his
// 200-case card under another user ID with that issuer and subject are his
// own and do not count, and adwoa under a second user ID is still adwoa:
// the card needs two people, and only yoofi makes the second.
func TestOnePersonIsOnePerson(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time)
		SELECT 'cred-kofi-7', user_id, client_secret, $1, 'kofi-7', role, store_ids, 'mfa', now() FROM vault.credentials WHERE ref = 'cred-kofi'`, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
	sess := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113), SessionID: "k1", ConversationID: "one-person", CredentialRef: "cred-kofi-7"}
	first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "big",
		Args: json.RawMessage(twoHundredCases), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	as := func(userID, subject string) {
		t.Helper()
		who := policy.Identity{UserID: userID, Role: mangrove.RoleAreaManager, Resources: kofiID.Resources}
		ev := testenv.Evidence(subject, time.Now())
		if err := workflows.SendDecision(ctx, s.Client, run.GetID(), signoff.Approval{Decision: signoff.Approve, Approver: who, Evidence: ev}, testenv.ApprovalSigner); err != nil {
			t.Fatal(err)
		}
	}
	refusedAs := func(userID string) {
		t.Helper()
		var n int
		for deadline := time.Now().Add(20 * time.Second); n == 0; time.Sleep(50 * time.Millisecond) {
			_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'role' AND approver_id = $2`,
				run.GetID(), userID).Scan(&n)
			if time.Now().After(deadline) {
				t.Fatalf("%s's approval was not refused as the same person", userID)
			}
		}
	}
	as("kofi.boateng", "kofi-7")
	refusedAs("kofi.boateng")
	as("kofi@mangrove.example", "kofi-7")
	refusedAs("kofi@mangrove.example")
	as("adwoa", "adwoa-3")
	as("adwoa@mangrove.example", "adwoa-3")
	refusedAs("adwoa@mangrove.example")
	v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.StatusQuery)
	var st workflows.Status
	if err != nil || v.Get(&st) != nil || st.Status != workflows.StatusPendingApproval || len(st.ApprovedBy) != 1 {
		t.Fatalf("after kofi twice and adwoa twice under other names: %v %+v", err, st)
	}
	as("yoofi", "yoofi-5")
	if res := awaitResult(t, run, 30*time.Second, "the approved transfer"); res.Status != workflows.StatusExecuted {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
}
