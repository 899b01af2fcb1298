package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestOneCardPerIntent: two equivalent transfers started together (same
// tool, store and args; different tool-call IDs) make one card; the other
// ends already_pending, naming that card and its expiry, with nothing
// counted against the limits. Other args make their own card. Once the
// card ends, or its call is terminated, an equivalent call puts a card up
// again.
func TestOneCardPerIntent(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	firsts := make([]workflows.Outcome, 2)
	for i, id := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("intent", id, fortyCases, ama("")))
			if err != nil {
				t.Error(err)
			}
			firsts[i] = first
		}()
	}
	wg.Wait()
	var card, other workflows.Outcome
	for _, f := range firsts {
		switch {
		case f.Status == workflows.StatusPendingApproval:
			card = f
		case f.Code == policy.CodeAlreadyPending:
			other = f
		}
	}
	if card.Status == "" || other.Status != workflows.StatusDenied {
		t.Fatalf("two equivalent calls: %+v / %+v", firsts[0].ToolCallResult, firsts[1].ToolCallResult)
	}
	var named struct{ PendingWorkflowID, ExpiresAt string }
	_ = json.Unmarshal(other.Result, &named)
	// The expiry is the card's, or (when the second call was admitted before
	// the card went up) its claim's, a moment earlier.
	got, _ := time.Parse(time.RFC3339, named.ExpiresAt)
	want, _ := time.Parse(time.RFC3339, card.ExpiresAt)
	if named.PendingWorkflowID != card.IdempotencyKey || want.Sub(got) < 0 || want.Sub(got) > 2*time.Second || !strings.Contains(other.Message, "Do not call again") {
		t.Fatalf("already_pending names %+v (%q), want %s until %s", named, other.Message, card.IdempotencyKey, card.ExpiresAt)
	}
	var cards, counted int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE workflow_id LIKE 'toolcall-intent-%'`).Scan(&cards)
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id LIKE 'toolcall-intent-%' AND event IN ('allowed', 'needs_approval')`).Scan(&counted)
	if cards != 1 || counted != 1 {
		t.Fatalf("%d cards and %d admitted rows, want 1 and 1", cards, counted)
	}

	// The assistant's justification is not part of the intent.
	said := `{"articleId":40211,"quantity":40,"reason":"stockout_risk","justification":"We sold out last Friday."}`
	if f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("intent", "j", said, ama(""))); err != nil || f.Code != policy.CodeAlreadyPending {
		t.Fatalf("the same transfer with a justification: %v %+v", err, f.ToolCallResult)
	}
	// Other args: their own card.
	if f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("intent", "c", `{"articleId":40211,"quantity":41,"reason":"stockout_risk"}`, ama(""))); err != nil || f.Status != workflows.StatusPendingApproval {
		t.Fatalf("41 cases: %v %+v", err, f.ToolCallResult)
	}
	// The card ends (rejected): the intent is free again.
	if err := workflows.SendDecision(ctx, s.Client, card.IdempotencyKey, signoff.Approval{Decision: signoff.Reject, Approver: amaID,
		Evidence: testenv.Evidence("ama", time.Now())}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.GetWorkflow(ctx, card.IdempotencyKey, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("intent", "d", fortyCases, ama(""))); err != nil || f.Status != workflows.StatusPendingApproval {
		t.Fatalf("after the card ended: %v %+v", err, f.ToolCallResult)
	}
	// An operator terminates the 41-case call: its card never says it ended,
	// but the call no longer runs, so an equivalent call is not held back.
	if err := s.Client.TerminateWorkflow(ctx, workflows.WorkflowID("intent", "c"), "", "operator ended it"); err != nil {
		t.Fatal(err)
	}
	if f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("intent", "e", `{"articleId":40211,"quantity":41,"reason":"stockout_risk"}`, ama(""))); err != nil || f.Status != workflows.StatusPendingApproval {
		t.Fatalf("after the holder was terminated: %v %+v", err, f.ToolCallResult)
	}
}

// TestAlreadyPendingNamesNoOnesCall: kofi asks for the transfer ama's card
// already waits for. He is told a card is pending and until when, and
// nothing names ama's call: not the message the model reads (which the
// evals export keeps) nor the result. Ama, asking again herself, is told
// the same, and her result keeps her own card's workflow ID.
func TestAlreadyPendingNamesNoOnesCall(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	card, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("ama.conv", "c1", fortyCases, ama("")))
	if err != nil || card.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, card.ToolCallResult)
	}
	kofi := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(112, 113), SessionID: "k1", CredentialRef: "cred-kofi"}
	other, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("kofi.conv", "c1", fortyCases, kofi))
	if err != nil || other.Code != policy.CodeAlreadyPending {
		t.Fatalf("kofi's equivalent call: %v %+v", err, other.ToolCallResult)
	}
	if strings.Contains(other.Message, "toolcall-") || strings.Contains(other.Message, "ama") || strings.Contains(string(other.Result), "toolcall-") ||
		!strings.Contains(other.Message, "until "+card.ExpiresAt) {
		t.Fatalf("kofi is told of ama's call: %q %s", other.Message, other.Result)
	}
	var row string
	_ = s.Owner.QueryRow(ctx, `SELECT message || coalesce(result::text, '') FROM audit_log WHERE workflow_id = $1 AND reason = 'already_pending'`,
		workflows.WorkflowID("kofi.conv", "c1")).Scan(&row)
	if row == "" || strings.Contains(row, "toolcall-") {
		t.Fatalf("kofi's audit row names ama's call: %q", row)
	}
	again, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("ama.conv", "c2", fortyCases, ama("")))
	if err != nil || again.Code != policy.CodeAlreadyPending || strings.Contains(again.Message, "toolcall-") ||
		!strings.Contains(string(again.Result), `"pendingWorkflowId":"`+card.IdempotencyKey+`"`) {
		t.Fatalf("ama asking again: %v %q %s", err, again.Message, again.Result)
	}
}

// TestOneCardPerIntentPerRequester: for a tool whose resource is each
// requester's own (a library loan), two members asking the same thing get
// a card each, and neither is told the other's workflow ID; one member
// asking twice still gets one card.
func TestOneCardPerIntentPerRequester(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: testenv.WithLibrary})
	ctx := context.Background()
	renew := func(user, id string) workflows.Outcome {
		in := workflows.ToolCallInput{Tool: testenv.LibraryRenew, ToolCallID: id, Args: json.RawMessage(`{"loanId":"LN-2041","weeks":2}`),
			Session: policy.Session{UserID: user, Role: testenv.LibraryMember, SessionID: "s-" + user, ConversationID: "loans", CredentialRef: "cred-" + user}}
		f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, in)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ama, kofi := renew("ama", "a"), renew("kofi", "k")
	if ama.Status != workflows.StatusPendingApproval || kofi.Status != workflows.StatusPendingApproval || ama.IdempotencyKey == kofi.IdempotencyKey {
		t.Fatalf("two members renewing alike: %+v / %+v (%s)", ama.ToolCallResult, kofi.ToolCallResult, kofi.Result)
	}
	again := renew("ama", "a2")
	var named struct{ PendingWorkflowID string }
	_ = json.Unmarshal(again.Result, &named)
	if again.Code != policy.CodeAlreadyPending || named.PendingWorkflowID != ama.IdempotencyKey {
		t.Fatalf("one member renewing twice: %+v %s", again.ToolCallResult, again.Result)
	}
	var cards int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE workflow_id LIKE 'toolcall-loans-%'`).Scan(&cards)
	if cards != 2 {
		t.Fatalf("%d cards, want one per member", cards)
	}
}

// TestAlreadyPendingNamesACallOnlyToItsPerson: two people share the user ID
// ama at one identity provider (subjects ama-1 and ama-2, as a provider
// whose preferred_username two accounts may hold). The second person's
// equivalent call is already_pending but is not told the first person's
// workflow ID; the first person, under another sign-in of theirs, is.
func TestAlreadyPendingNamesACallOnlyToItsPerson(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	for ref, subject := range map[string]string{"cred-ama-1": "ama-1", "cred-ama-1b": "ama-1", "cred-ama-2": "ama-2"} {
		if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time)
			SELECT $1, user_id, client_secret, $2, $3, role, store_ids, 'mfa', now() FROM vault.credentials WHERE ref = 'cred-ama'`, ref, testenv.Issuer, subject); err != nil {
			t.Fatal(err)
		}
	}
	as := func(conv, ref string) workflows.Outcome {
		t.Helper()
		sess := ama("")
		sess.CredentialRef = ref
		out, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn(conv, "c1", fortyCases, sess))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	card := as("first", "cred-ama-1")
	if card.Status != workflows.StatusPendingApproval {
		t.Fatalf("the first person's call: %+v", card.ToolCallResult)
	}
	other := as("second", "cred-ama-2")
	if other.Code != policy.CodeAlreadyPending || strings.Contains(string(other.Result), "toolcall-") || strings.Contains(other.Message, "toolcall-") {
		t.Fatalf("the second person named ama is told the first one's call: %q %s", other.Message, other.Result)
	}
	again := as("again", "cred-ama-1b")
	if again.Code != policy.CodeAlreadyPending || !strings.Contains(string(again.Result), `"pendingWorkflowId":"`+card.IdempotencyKey+`"`) {
		t.Fatalf("the first person asking again: %q %s", again.Message, again.Result)
	}
}

// TestAnIntentIsItsPersons: for a tool whose resource is each requester's
// own (a library loan), the intent is the person's, by the issuer and
// subject of their sign-in: ama renewing under a second user ID (ama.k, the
// same sign-in's subject) is already_pending, told her own card; a second
// person under the user ID ama (subject ama-2) gets a card of her own.
func TestAnIntentIsItsPersons(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: testenv.WithLibrary})
	ctx := context.Background()
	for _, c := range []struct{ ref, user, subject string }{{"cred-lib-1", "ama", "ama-1"}, {"cred-lib-2", "ama.k", "ama-1"}, {"cred-lib-3", "ama", "ama-2"}} {
		if _, err := s.Owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, acr, auth_time)
			SELECT $1, $2, client_secret, $3, $4, 'member', 'mfa', now() FROM vault.credentials WHERE ref = 'cred-ama'`, c.ref, c.user, testenv.Issuer, c.subject); err != nil {
			t.Fatal(err)
		}
	}
	renew := func(user, ref, id string) workflows.Outcome {
		t.Helper()
		in := workflows.ToolCallInput{Tool: testenv.LibraryRenew, ToolCallID: id, Args: json.RawMessage(`{"loanId":"LN-2041","weeks":2}`),
			Session: policy.Session{UserID: user, Role: testenv.LibraryMember, SessionID: "s-" + id, ConversationID: "loans", CredentialRef: ref}}
		f, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, in)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first := renew("ama", "cred-lib-1", "a1")
	if first.Status != workflows.StatusPendingApproval {
		t.Fatalf("ama's renewal: %+v %s", first.ToolCallResult, first.Result)
	}
	again := renew("ama.k", "cred-lib-2", "a2")
	if again.Code != policy.CodeAlreadyPending || !strings.Contains(string(again.Result), `"pendingWorkflowId":"`+first.IdempotencyKey+`"`) {
		t.Fatalf("ama renewing again under another user ID: %+v %s", again.ToolCallResult, again.Result)
	}
	other := renew("ama", "cred-lib-3", "b1")
	if other.Status != workflows.StatusPendingApproval || other.IdempotencyKey == first.IdempotencyKey {
		t.Fatalf("a second person under the user ID ama: %+v %s", other.ToolCallResult, other.Result)
	}
	// A librarian's edit to 3 weeks keeps the card ama's: asking for 3
	// weeks under her other user ID finds it.
	librarian := policy.Identity{UserID: "lena", Role: testenv.LibraryStaff}
	edit := signoff.Approval{Decision: signoff.Edit, ArgsHash: first.ArgsHash, Approver: librarian, Edit: json.RawMessage(`{"weeks":3}`)}
	if err := s.Client.SignalWorkflow(ctx, first.IdempotencyKey, first.RunID, workflows.ApprovalSignal, testenv.Sign(edit, first.CardRef())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var version int
		_ = s.Owner.QueryRow(ctx, `SELECT card_version FROM pending_action WHERE workflow_id = $1`, first.IdempotencyKey).Scan(&version)
		if version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the librarian's edit did not put up version 2")
		}
	}
	in := workflows.ToolCallInput{Tool: testenv.LibraryRenew, ToolCallID: "a3", Args: json.RawMessage(`{"loanId":"LN-2041","weeks":3}`),
		Session: policy.Session{UserID: "ama.k", Role: testenv.LibraryMember, SessionID: "s-a3", ConversationID: "loans", CredentialRef: "cred-lib-2"}}
	edited, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, in)
	if err != nil || edited.Code != policy.CodeAlreadyPending || !strings.Contains(string(edited.Result), `"pendingWorkflowId":"`+first.IdempotencyKey+`"`) {
		t.Fatalf("ama asking for the edited renewal under another user ID: %v %+v %s", err, edited.ToolCallResult, edited.Result)
	}
}
