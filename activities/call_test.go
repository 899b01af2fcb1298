package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
	approved, _ := json.Marshal(policy.TransferAction{ArticleID: 40211, Quantity: 40, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})
	hash, _ := policy.ArgsHash("request_stock_transfer", approved)
	tampered, _ := json.Marshal(policy.TransferAction{ArticleID: 40211, Quantity: 200, Reason: "stockout_risk", StoreID: 112, FromStoreID: 118})

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := activities.CallInput{Tool: "request_stock_transfer", Args: tampered, StoreID: 112, UserID: "ama", CredentialRef: "cred-ama", IdempotencyKey: "toolcall-x-1", ArgsHash: hash}
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
