package workflows_test

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

// inClient is ama's approval of the card up now, made in her own MCP
// client: signed by the MCP server's key with the sign-in behind her token
// (a password a minute ago), marked confirmed in the client.
func inClient(t *testing.T, env tenv, at time.Duration, seen *workflows.Status) {
	env.RegisterDelayedCallback(func() {
		st := status(t, env)
		*seen = st
		a := signoff.Approval{Decision: signoff.Approve, ArgsHash: st.ArgsHash, Approver: amaID,
			Evidence: &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "ama", ACR: policy.ACRPassword,
				AuthTime: env.Now().Add(-time.Minute).UTC().Format(time.RFC3339), Via: signoff.ConfirmedInClient}}
		env.SignalWorkflow(workflows.ApprovalSignal, signoff.SignApproval(a, st.CardRef(env.id), testenv.WithdrawSigner.KeyID, testenv.WithdrawSigner.Key,
			env.Now().UTC().Format(time.RFC3339)))
	}, at)
}

// TestAConfirmationInTheClientCountsWhereTheRowAllowsIt: ama's $384
// transfer is hers to confirm. Where the row allows a confirmation in the
// client, the status query says what sign-in one needs, and hers counts:
// the transfer runs once, and the audit row says how she decided. Where
// the row does not, the same decision is refused and the card waits for
// a decision at the card UI.
func TestAConfirmationInTheClientCountsWhereTheRowAllowsIt(t *testing.T) {
	f := newFixture(t)
	f.signedInAt(t)
	f.policy = testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolRequestStockTransfer {
				d.Rows[i].ConfirmInClient = true
			}
		}
	})
	var seen workflows.Status
	res := f.run(t, "inclient", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) { inClient(t, env, time.Minute, &seen) })
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("%+v", res)
	}
	if seen.ConfirmInClient == nil || seen.ConfirmInClient.ACR != policy.ACRPassword {
		t.Fatalf("the status query says a confirmation in the client needs %+v", seen.ConfirmInClient)
	}
	if got := events(f.audit(t, "toolcall-inclient-c1")); got != "needs_approval/ok approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-inclient-c1' AND event = 'approved' AND approver_id = 'ama' AND approver_via = 'confirmed_in_client'`); n != 1 {
		t.Fatalf("%d approved rows say ama confirmed in her client", n)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 1 {
		t.Fatalf("%d transfers", n)
	}

	f.policy = nil
	res = f.run(t, "inclient", "c2", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		inClient(t, env, time.Minute, &seen)
		decide(t, env, 2*time.Minute, nil, approve(amaID))
	})
	if res.Status != workflows.StatusExecuted || seen.ConfirmInClient != nil {
		t.Fatalf("%+v; the status query offered %+v", res, seen.ConfirmInClient)
	}
	if got := events(f.audit(t, "toolcall-inclient-c2")); got != "needs_approval/ok approval_refused/step_up_required approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
}
