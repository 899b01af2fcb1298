package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// signedInAt names the person behind ama's credential as a sign-in at the
// identity provider the tests' workers trust, as a sign-in through the MCP
// server or the card UI names its person; the seed's demo person is at no
// provider a withdrawal could come from.
func (f *fixture) signedInAt(t *testing.T) {
	t.Helper()
	if _, err := testenv.OwnerPool(t, f.db).Exec(context.Background(), `UPDATE vault.credentials SET issuer = $1 WHERE ref = 'cred-ama'`, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
}

// withdraw is the requester's withdrawal, as who.
func withdraw(who policy.Identity) signoff.Approval {
	return signoff.Approval{Decision: signoff.Withdraw, Approver: who, Reason: "the delivery came early"}
}

// TestAWithdrawnCardRunsNothing: the requester withdraws her card; the
// approval that arrives in the same turn, after it, is refused as late;
// nothing runs, and the card gives back its reservation and its intent.
func TestAWithdrawnCardRunsNothing(t *testing.T) {
	f := newFixture(t)
	f.signedInAt(t)
	res := f.run(t, "wd", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 5*time.Minute, nil, withdraw(amaID), approve(amaID))
	})
	if res.Status != "withdrawn" || res.Code != policy.CodeWithdrawn || string(res.Result) != `{"note":"the delivery came early"}` {
		t.Fatalf("%+v", res)
	}
	rows := f.audit(t, "toolcall-wd-c1")
	if got := events(rows); got != "needs_approval/ok withdrawn/withdrawn approval_refused/withdrawn" {
		t.Fatalf("audit: %s", got)
	}
	if rows[1].Approver != "ama" {
		t.Fatalf("the withdrawal names %q, not its requester", rows[1].Approver)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after a withdrawal", n)
	}
	for what, sql := range map[string]string{
		"the card withdrawn by ama": `SELECT count(*) FROM pending_action WHERE status = 'withdrawn' AND decided_by = 'ama' AND workflow_id = 'toolcall-wd-c1'`,
		"its reservation":           `SELECT 1 - count(*) FROM limit_usage WHERE workflow_id = 'toolcall-wd-c1'`,
		"its intent":                `SELECT 1 - count(*) FROM pending_intents WHERE workflow_id = 'toolcall-wd-c1'`,
	} {
		if n := f.count(t, sql); n != 1 {
			t.Errorf("%s: %d", what, n)
		}
	}
}

// TestOnlyTheRequesterWithdraws: another store's manager, an area manager,
// ama's user ID at the seed's demo provider (another person) and an
// unsigned payload cannot withdraw ama's card, and none of them ends it;
// hers does.
func TestOnlyTheRequesterWithdraws(t *testing.T) {
	f := newFixture(t)
	f.signedInAt(t)
	unsigned := withdraw(amaID)
	unsigned.Signature = "unsigned"
	res := f.run(t, "wd", "c2", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		elsewhere := withdraw(amaID)
		elsewhere.Evidence = testenv.Evidence("ama", env.Now())
		elsewhere.Evidence.Issuer = "urn:toolgate:other"
		decide(t, env, time.Minute, nil, withdraw(efuaID), withdraw(kofiID), elsewhere, unsigned)
		decide(t, env, 2*time.Minute, nil, withdraw(amaID))
	})
	if res.Status != "withdrawn" {
		t.Fatalf("%+v", res)
	}
	want := "needs_approval/ok approval_refused/role approval_refused/role approval_refused/credential_unavailable approval_refused/credential_unavailable withdrawn/withdrawn"
	if got := events(f.audit(t, "toolcall-wd-c2")); got != want {
		t.Fatalf("audit:\n got %s\nwant %s", got, want)
	}
}

// TestAWithdrawalAfterTheApprovalIsRefused: the first decision in the
// workflow's order wins; the withdrawal behind an approval is refused,
// audited, and the approved call runs once.
func TestAWithdrawalAfterTheApprovalIsRefused(t *testing.T) {
	f := newFixture(t)
	f.signedInAt(t)
	res := f.run(t, "wd", "c3", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 5*time.Minute, nil, approve(amaID), withdraw(amaID))
	})
	if res.Status != "executed" {
		t.Fatalf("%+v", res)
	}
	if got := events(f.audit(t, "toolcall-wd-c3")); got != "needs_approval/ok approved/ok executed/ok approval_refused/invalid_arguments" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 1 {
		t.Fatalf("%d transfers", n)
	}
}

// TestWithdrawnCardsFreeTheirBudget: a store takes 5 transfers a day;
// five withdrawn cards leave all five, so the sixth is approved and runs,
// never rate_limit.
func TestWithdrawnCardsFreeTheirBudget(t *testing.T) {
	f := newFixture(t)
	// kofi's credential names his sign-in at the seed's demo provider.
	asker := policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager}
	for i := 1; i <= 5; i++ {
		res := f.run(t, "wdfree", fmt.Sprint("c", i), "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":116}`, kofi(""),
			func(env tenv) {
				w := withdraw(asker)
				w.Evidence = &signoff.AuthEvidence{Issuer: "urn:toolgate:demo", Subject: "kofi", ACR: policy.ACRPassword, AuthTime: env.Now().UTC().Format(time.RFC3339)}
				decide(t, env, time.Minute, nil, w)
			})
		if res.Status != "withdrawn" {
			t.Fatalf("card %d: %+v", i, res)
		}
	}
	res := f.run(t, "wdfree", "c6", "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":116}`, kofi(""),
		func(env tenv) { decide(t, env, time.Minute, nil, approve(storeManager(116))) })
	if res.Status != "executed" {
		t.Fatalf("after 5 withdrawn cards: %s/%s %s", res.Status, res.Code, res.Message)
	}
}
