package activities_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// TestAnEditCountsEveryOtherCallInItsWindow: an edited card is counted
// once, at its new value, beside every other call its buckets hold. A card
// put up two hours ago, outside its hour's window, is edited while two
// other transfers into the store, the hour's limit, are in it: the edit
// is refused. Taking the card's own count away from the window's, when the
// window no longer holds it, would count one of the others out.
func TestAnEditCountsEveryOtherCallInItsWindow(t *testing.T) {
	ctx := context.Background()
	owner, revise := reviser(t)
	const tool = mangrove.ToolRequestStockTransfer
	// The card's run is the test environment's, which Revise reads.
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id,
		value_cents, workflow_id, run_id, event_key)
		VALUES (now() - interval '2 hours', 'needs_approval', 'ok', $1, 'ama', 'store_manager', 's', 'c', 'store', '112', 100, 'default-test-workflow-id', 'default-test-run-id', 'decision'),
		       (now() - interval '20 minutes', 'allowed', 'ok', $1, 'kofi', 'area_manager', 's', 'c', 'store', '112', 100, 'other-1', 'run', 'decision'),
		       (now() - interval '10 minutes', 'allowed', 'ok', $1, 'kofi', 'area_manager', 's', 'c', 'store', '112', 100, 'other-2', 'run', 'decision')`, tool); err != nil {
		t.Fatal(err)
	}
	store := policy.ResourceRef{Kind: mangrove.KindStore, ID: "112"}
	res := revise(transferEdit(policy.LimitKey{Key: "transfers-112-hour", Tool: tool, Scope: policy.PerResource, Resource: store, Window: policy.Hour, MaxCalls: 2}, nil))
	if res.Code != policy.CodeRateLimit {
		t.Fatalf("an edit with the hour's two transfers in its window: %+v, want %s", res, policy.CodeRateLimit)
	}
	var edits int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = 'default-test-workflow-id' AND event = 'edited'`).Scan(&edits); err != nil || edits != 0 {
		t.Fatalf("a refused edit wrote %d edited rows (%v)", edits, err)
	}
}

// TestAnEditCountsItsPersonsCalls: an edited card's per-user limit counts
// the person who asked for it (the card's requester), under whatever user
// ID they made their other calls. ama asked under the user ID ama, and has
// made the hour's two other transfers under kofi: her edit is refused.
func TestAnEditCountsItsPersonsCalls(t *testing.T) {
	ctx := context.Background()
	owner, revise := reviser(t)
	const tool = mangrove.ToolRequestStockTransfer
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id,
		value_cents, workflow_id, run_id, event_key, requester_issuer, requester_subject)
		VALUES (now() - interval '30 minutes', 'needs_approval', 'ok', $1, 'ama', 'store_manager', 's', 'c', 'store', '112', 100, 'default-test-workflow-id', 'default-test-run-id', 'decision', $2, 'ama-1'),
		       (now() - interval '20 minutes', 'allowed', 'ok', $1, 'kofi', 'area_manager', 's', 'c', 'store', '112', 100, 'other-1', 'run', 'decision', $2, 'ama-1'),
		       (now() - interval '10 minutes', 'allowed', 'ok', $1, 'kofi', 'area_manager', 's', 'c', 'store', '112', 100, 'other-2', 'run', 'decision', $2, 'ama-1')`,
		tool, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
	res := revise(transferEdit(policy.LimitKey{Key: "transfers-ama-hour", Tool: tool, Scope: policy.PerUser, UserID: "ama", Window: policy.Hour, MaxCalls: 2},
		&signoff.Person{Issuer: testenv.Issuer, Subject: "ama-1"}))
	if res.Code != policy.CodeRateLimit {
		t.Fatalf("an edit of ama's card with her hour's two other transfers made under kofi: %+v, want %s", res, policy.CodeRateLimit)
	}
}

// reviser is a database and Revise run in an activity environment, whose
// run (default-test-workflow-id, default-test-run-id) is the card's.
func reviser(t *testing.T) (*pgxpool.Pool, func(activities.ReviseInput) activities.ReviseResult) {
	t.Helper()
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return testenv.OwnerPool(t, url), func(in activities.ReviseInput) activities.ReviseResult {
		t.Helper()
		v, err := env.ExecuteActivity(a.Revise, in)
		if err != nil {
			t.Fatal(err)
		}
		var res activities.ReviseResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// transferEdit is an edit, to version 2, of ama's card for a transfer of 2
// cases into store 112, counted against limit, whose requester is person.
func transferEdit(limit policy.LimitKey, person *signoff.Person) activities.ReviseInput {
	const tool = mangrove.ToolRequestStockTransfer
	store := policy.ResourceRef{Kind: mangrove.KindStore, ID: "112"}
	session := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
	value := int64(100)
	args := json.RawMessage(`{"articleId":40211,"quantity":2,"reason":"stockout_risk"}`)
	return activities.ReviseInput{
		Verdict:    policy.Verdict{Decision: policy.DecisionApprove, Code: policy.CodeOK, Resource: store, Args: args, Limits: []policy.LimitKey{limit}},
		ValueCents: value, PrevValueCents: value,
		Audit: activities.AuditInput{Key: "edit-1", Event: activities.EventEdited, Reason: policy.CodeOK, Tool: tool, Session: session, Args: args, Resource: store, Value: &value},
		Card: activities.CardRow{Version: 2, Status: activities.CardPending, Tool: tool, Session: session, Resource: store, Args: args, ArgsHash: "h",
			Card: "2 cases", ValueCents: value, ApproverRole: mangrove.RoleAreaManager, ExpiresAt: "2026-12-31T12:00:00Z", Requester: person},
	}
}
