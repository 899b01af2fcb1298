package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

// TestWithdrawRacesApprove: on the real stack, 20 cards each get kofi's
// withdrawal and their store manager's approval at the same moment. Each
// ends with one winner, in the order its workflow received them: executed
// once, or withdrawn with nothing run; each decision that reached the
// card has one audit row (the loser's a refusal), and one that came after
// the call had ended was refused by the server instead.
func TestWithdrawRacesApprove(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	const races = 20
	stores := []int64{110, 111, 113, 114, 115, 116, 117, 119, 120, 121}
	won := map[workflows.CallStatus]int{}
	for i := range races {
		store := stores[i%len(stores)]
		id := fmt.Sprintf("race%d", i)
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: id,
			Args:    json.RawMessage(`{"articleId":40211,"quantity":1,"reason":"stockout_risk"}`),
			Session: policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(store), SessionID: "s-race", ConversationID: "race", CredentialRef: "cred-kofi"}})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %s: %v %+v", id, err, first)
		}
		// kofi's credential names his sign-in at the seed's demo provider:
		// his withdrawal comes from there.
		withdrawal := signoff.Approval{Decision: signoff.Withdraw, Approver: policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager},
			Evidence: &signoff.AuthEvidence{Issuer: "urn:toolgate:demo", Subject: "kofi", ACR: policy.ACRPassword, AuthTime: time.Now().UTC().Format(time.RFC3339)}}
		approval := approve(storeManager(store))
		approval.Evidence = testenv.Evidence(approval.Approver.UserID, time.Now())
		var wg sync.WaitGroup
		sent := make([]error, 2)
		gate := make(chan struct{})
		for j, a := range []signoff.Approval{withdrawal, approval} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				sent[j] = workflows.SendDecision(ctx, s.Client, run.GetID(), a, testenv.ApprovalSigner)
			}()
		}
		close(gate)
		wg.Wait()
		var res workflows.ToolCallResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		var withdrawn, approved, executed, refused, transfers int
		err = s.Owner.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event = 'withdrawn'), count(*) FILTER (WHERE event = 'approved'),
			count(*) FILTER (WHERE event = 'executed'), count(*) FILTER (WHERE event = 'approval_refused'),
			(SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1)
			FROM audit_log WHERE workflow_id = $1`, run.GetID()).Scan(&withdrawn, &approved, &executed, &refused, &transfers)
		if err != nil {
			t.Fatal(err)
		}
		unsent := 0
		for _, e := range sent {
			if e != nil {
				unsent++
			}
		}
		switch {
		case res.Status == workflows.StatusWithdrawn && withdrawn == 1 && approved+executed+transfers == 0 && sent[0] == nil:
		case res.Status == workflows.StatusExecuted && withdrawn == 0 && approved == 1 && executed == 1 && transfers == 1 && sent[1] == nil:
		default:
			t.Fatalf("%s: ended %s with %d withdrawn, %d approved, %d executed rows and %d transfers (sent: %v)", id, res.Status, withdrawn, approved, executed, transfers, sent)
		}
		won[res.Status]++
		if refused+unsent != 1 {
			t.Fatalf("%s: the loser has %d refusals and %d unsent decisions, want one of them (sent: %v)", id, refused, unsent, sent)
		}
	}
	t.Logf("of %d races, %d withdrawn and %d executed", races, won[workflows.StatusWithdrawn], won[workflows.StatusExecuted])
}
