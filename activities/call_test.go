package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// TestCallToolRunsOnlyTheApprovedArgs: args whose hash is not the card's
// are refused before any token is fetched or anything moves.
func TestCallToolRunsOnlyTheApprovedArgs(t *testing.T) {
	url := testenv.Database(t)
	srv := testenv.Upstream(t, url)
	a := testenv.NewActivities(testenv.AppPool(t, url), srv.URL, zap.NewNop())
	approved, _ := json.Marshal(mangrove.TransferAction{ArticleID: 40211, Quantity: 40, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})
	hash, _ := signoff.ArgsHash("request_stock_transfer", approved)
	tampered, _ := json.Marshal(mangrove.TransferAction{ArticleID: 40211, Quantity: 200, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := activities.CallInput{Acting: activities.Acting{Tool: "request_stock_transfer", Args: tampered, Resource: policy.ResourceRef{Kind: "store", ID: "112"}, UserID: "ama", CredentialRef: "cred-ama"},
		IdempotencyKey: "toolcall-x-1", ArgsHash: hash}
	if _, err := env.ExecuteActivity(a.CallTool, in); err == nil || !strings.Contains(err.Error(), "approved card") {
		t.Fatalf("tampered args ran: %v", err)
	}
	var n int
	_ = testenv.OwnerPool(t, url).QueryRow(context.Background(), `SELECT count(*) FROM mangrove.transfers`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d transfers after a tampered call", n)
	}
	in.Args = approved
	v, err := env.ExecuteActivity(a.CallTool, in)
	if err != nil {
		t.Fatalf("approved args: %v", err)
	}
	var res activities.CallResult
	_ = v.Get(&res)
	if !strings.Contains(string(res.Result), "TR-") {
		t.Fatalf("result %s", res.Result)
	}
}

// TestCallToolRecordsItsOutcome: the call's activity writes the executed
// row and the card's final state with the result; a failed outcome the
// workflow writes later under the same key (a completion lost on the way)
// changes neither; and an outcome the database refuses leaves the call's
// result standing, with Recorded false so the workflow writes it.
func TestCallToolRecordsItsOutcome(t *testing.T) {
	url := testenv.Database(t)
	srv := testenv.Upstream(t, url)
	a := testenv.NewActivities(testenv.AppPool(t, url), srv.URL, zap.NewNop())
	owner := testenv.OwnerPool(t, url)
	ctx := context.Background()
	session := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1", CredentialRef: "cred-ama"}
	action, _ := json.Marshal(mangrove.TransferAction{ArticleID: 40211, Quantity: 40, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})
	hash, _ := signoff.ArgsHash("request_stock_transfer", action)
	card := activities.CardRow{Version: 3, Status: activities.CardExecuted, Tool: "request_stock_transfer", Session: session, Resource: policy.ResourceRef{Kind: "store", ID: "112"},
		Args: action, ArgsHash: hash, Card: "40 cases", ValueCents: 100, ApproverRole: mangrove.RoleAreaManager, ExpiresAt: "2026-12-01T12:00:00Z"}
	outcome := activities.AuditInput{Key: "outcome", Event: activities.EventExecuted, Reason: policy.CodeOK, Tool: "request_stock_transfer", Session: session, Args: action, Resource: policy.ResourceRef{Kind: "store", ID: "112"}}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := activities.CallInput{Acting: activities.Acting{Tool: "request_stock_transfer", Args: action, Resource: policy.ResourceRef{Kind: "store", ID: "112"}, UserID: "ama", CredentialRef: "cred-ama"},
		IdempotencyKey: "toolcall-x-2", ArgsHash: hash, After: &activities.OutcomeRecord{Audit: outcome, Card: &card}}
	v, err := env.ExecuteActivity(a.CallTool, in)
	if err != nil {
		t.Fatal(err)
	}
	var res activities.CallResult
	_ = v.Get(&res)
	if !res.Recorded || !strings.Contains(string(res.Result), "TR-") {
		t.Fatalf("recorded %v, result %s", res.Recorded, res.Result)
	}
	check := func(when string) {
		t.Helper()
		var event, status, rowResult, cardResult string
		var rows int
		_ = owner.QueryRow(ctx, `SELECT count(*), min(event), min(result::text) FROM audit_log WHERE event_key = 'outcome'`).Scan(&rows, &event, &rowResult)
		_ = owner.QueryRow(ctx, `SELECT status, result::text FROM pending_action`).Scan(&status, &cardResult)
		if rows != 1 || event != "executed" || status != "executed" || !strings.Contains(rowResult, "TR-") || !strings.Contains(cardResult, "TR-") {
			t.Fatalf("%s: %d outcome rows (%s, result %s), card %s (result %s)", when, rows, event, rowResult, status, cardResult)
		}
	}
	check("after the call")

	failed := outcome
	failed.Event, failed.Reason = activities.EventFailed, policy.CodeTimeout
	lost := card
	lost.Status, lost.Result = activities.CardFailed, nil
	if _, err := env.ExecuteActivity(a.Record, activities.RecordInput{Audit: failed, Card: lost}); err != nil {
		t.Fatal(err)
	}
	check("after a failed outcome under the same key")

	refused := outcome
	refused.Key, refused.Event = "outcome-2", "no such event"
	in.IdempotencyKey, in.After = "toolcall-x-3", &activities.OutcomeRecord{Audit: refused}
	if v, err = env.ExecuteActivity(a.CallTool, in); err != nil {
		t.Fatalf("a refused record failed the call that ran: %v", err)
	}
	res = activities.CallResult{}
	_ = v.Get(&res)
	if res.Recorded || !strings.Contains(string(res.Result), "TR-") {
		t.Fatalf("refused record: recorded %v, result %s", res.Recorded, res.Result)
	}
}

// TestPendingCardTakesTheRetriedExpiry: the pending card is written in the
// workflow task that puts it up; a retried task writes it again, later,
// and the card must show the expiry the workflow holds it to, which is the
// retry's. A later state never takes an earlier one's place.
func TestPendingCardTakesTheRetriedExpiry(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	owner := testenv.OwnerPool(t, url)
	session := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1", CredentialRef: "cred-ama"}
	action, _ := json.Marshal(mangrove.TransferAction{ArticleID: 40211, Quantity: 40, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})
	card := activities.CardRow{Version: 1, Status: activities.CardPending, Tool: "request_stock_transfer", Session: session, Resource: policy.ResourceRef{Kind: "store", ID: "112"},
		Args: action, ArgsHash: "h", Card: "40 cases", ValueCents: 100, ApproverRole: mangrove.RoleAreaManager, ExpiresAt: "2026-12-01T12:00:00Z"}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	expiry := func() string {
		var at time.Time
		_ = owner.QueryRow(context.Background(), `SELECT expires_at FROM pending_action`).Scan(&at)
		return at.UTC().Format(time.RFC3339)
	}
	for _, step := range []struct {
		status   activities.CardStatus
		version  int
		at, want string
	}{
		{activities.CardPending, 1, "2026-12-01T12:00:00Z", "2026-12-01T12:00:00Z"},
		{activities.CardPending, 1, "2026-12-01T12:00:09Z", "2026-12-01T12:00:09Z"}, // the retried task's
		{activities.CardApproved, 2, "2026-12-01T12:00:00Z", "2026-12-01T12:00:09Z"},
		{activities.CardPending, 1, "2026-12-01T12:30:00Z", "2026-12-01T12:00:09Z"}, // late: changes nothing
	} {
		c := card
		c.Status, c.Version, c.ExpiresAt = step.status, step.version, step.at
		if _, err := env.ExecuteActivity(a.Project, c); err != nil {
			t.Fatal(err)
		}
		if got := expiry(); got != step.want {
			t.Fatalf("after %s v%d at %s: expires %s, want %s", step.status, step.version, step.at, got, step.want)
		}
	}
}
