package workflows_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func edit(who policy.Identity, fields string) signoff.Approval {
	return signoff.Approval{Decision: signoff.Edit, Approver: who, Edit: json.RawMessage(fields)}
}

// TestEditThenApprove: ama edits her 40-case card to 60; the workflow runs
// the dry run again, revalues it at $576.00 and routes it to the area
// manager; her approval signed for version 1 is refused, edits out of bounds or
// of a field the row does not mark editable are refused and change
// nothing, and kofi's approval of the new version runs 60 cases once.
func TestEditThenApprove(t *testing.T) {
	f := newFixture(t)
	var v1, v2 workflows.Status
	res := f.run(t, "edit", "e1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, time.Minute, &v1, edit(amaID, `{"quantity":60}`))
		env.RegisterDelayedCallback(func() {
			v2 = status(t, env)
			old := approve(amaID)
			old.ArgsHash = v1.ArgsHash
			env.SignalWorkflow(workflows.ApprovalSignal, signed(env, old, v1))
		}, 2*time.Minute)
		decide(t, env, 3*time.Minute, nil, edit(kofiID, `{"quantity":250}`), edit(kofiID, `{"articleId":40207}`), edit(kofiID, `{"quantity":"sixty"}`))
		decide(t, env, 4*time.Minute, nil, approve(kofiID))
	})
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	if v1.Version > 1 || v1.ValueCents != 38400 || v1.ApproverRole != mangrove.RoleStoreManager ||
		v2.Version != 2 || v2.ValueCents != 57600 || v2.ApproverRole != mangrove.RoleAreaManager || v2.ArgsHash == v1.ArgsHash || v2.ExpiresAt != v1.ExpiresAt {
		t.Fatalf("version 1 %+v\nversion 2 %+v", v1, v2)
	}
	got := events(f.audit(t, "toolcall-edit-e1"))
	want := "needs_approval/ok edited/ok approval_refused/invalid_arguments approval_refused/over_limit approval_refused/invalid_arguments approval_refused/invalid_arguments approved/ok executed/ok"
	if got != want {
		t.Fatalf("audit:\n got %s\nwant %s", got, want)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = 'toolcall-edit-e1' AND quantity = 60`); n != 1 {
		t.Fatalf("%d transfers of 60 cases, want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = 'toolcall-edit-e1' AND card_version = 2 AND value_cents = 57600
		AND approver_role = 'area_manager' AND decided_by = 'kofi' AND args->>'quantity' = '60'`); n != 1 {
		t.Fatal("the card does not show its second version")
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-edit-e1' AND event = 'edited' AND approver_id = 'ama'
		AND value_cents = 57600 AND message LIKE 'Version 2: ama edited quantity to 60; $576.00 (was $384.00)%'`); n != 1 {
		t.Fatal("the edit is not audited with who edited what")
	}
}

// TestEditsCountAgainstTheLimits: an edit that would take the store past
// its daily spend ($2,000.00) is refused rate_limit and changes nothing; a
// smaller one stands, and the limits count the card at its new value
// from then on.
func TestEditsCountAgainstTheLimits(t *testing.T) {
	f := newFixture(t)
	for id, args := range map[string]string{ // $960.00 + $810.00 spent at store 112
		"big1": `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`,
		"big2": `{"articleId":40388,"quantity":50,"reason":"festival_peak"}`,
	} {
		res := f.run(t, "edit", id, "request_stock_transfer", args, ama(""), func(env tenv) { decide(t, env, time.Minute, nil, approve(kofiID)) })
		if res.Status != workflows.StatusExecuted {
			t.Fatalf("%s: %s/%s %s", args, res.Status, res.Code, res.Message)
		}
	}
	var after workflows.Status
	res := f.run(t, "edit", "e2", "request_stock_transfer", `{"articleId":40211,"quantity":20,"reason":"stockout_risk"}`, ama(""), func(env tenv) {
		decide(t, env, time.Minute, nil, edit(amaID, `{"quantity":30}`)) // $1,770 + $288.00 > $2,000
		decide(t, env, 2*time.Minute, nil, edit(amaID, `{"quantity":23}`))
		decide(t, env, 3*time.Minute, &after, approve(amaID))
	})
	if got := events(f.audit(t, "toolcall-edit-e2")); res.Status != workflows.StatusExecuted || after.ValueCents != 22080 ||
		got != "needs_approval/ok approval_refused/rate_limit edited/ok approved/ok executed/ok" {
		t.Fatalf("%s; after the edits %+v; audit %s", res.Status, after, got)
	}
	// $1,770.00 + $220.80 spent: one more case ($9.60) is past the cap only
	// if the edited card counts at its new value.
	res = f.run(t, "edit", "e3", "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk"}`, ama(""), nil)
	if res.Code != policy.CodeRateLimit {
		t.Fatalf("one case after the edited card: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// signed signs a decision for the card a status showed, now.
func signed(env tenv, a signoff.Approval, st workflows.Status) signoff.Approval {
	return testenv.SignAt(a, st.CardRef(env.id), env.Now())
}

// TestEditsAreBounded: a card takes MaxEdits edits; the next is refused and
// the card stays at its last version.
func TestEditsAreBounded(t *testing.T) {
	f := newFixture(t)
	var last workflows.Status
	res := f.run(t, "edit", "many", "request_stock_transfer", `{"articleId":40211,"quantity":10,"reason":"stockout_risk"}`, ama(""), func(env tenv) {
		for i := range workflows.MaxEdits + 1 {
			decide(t, env, time.Duration(i+1)*time.Minute, nil, edit(amaID, fmt.Sprintf(`{"quantity":%d}`, 11+i)))
		}
		decide(t, env, 10*time.Minute, &last, signoff.Approval{Decision: signoff.Reject, Approver: amaID})
	})
	if res.Status != workflows.StatusRejected || last.Version != workflows.MaxEdits+1 || last.ValueCents != int64(10+workflows.MaxEdits)*960 {
		t.Fatalf("%s; last version %+v", res.Status, last)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-edit-many' AND event = 'approval_refused' AND message LIKE '%the most it takes%'`); n != 1 {
		t.Fatalf("%d refusals of the edit past the bound, want 1", n)
	}
}

// TestAnEditedCardStillExpires: a store manager's card waits on its
// escalation timer alone (the expiry's follows it); an edit that routes it
// to the area manager, who has no role above to escalate to, must not
// leave it waiting for ever: it still expires when version 1 said.
func TestAnEditedCardStillExpires(t *testing.T) {
	f := newFixture(t)
	var v1, before workflows.Status
	res := f.run(t, "edit", "e4", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, time.Minute, &v1, edit(amaID, `{"quantity":60}`))
		env.RegisterDelayedCallback(func() { before = status(t, env) }, workflows.DefaultApprovalTTL-time.Minute)
	})
	if res.Status != workflows.StatusExpired || res.Code != policy.CodeExpired {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	if before.Status != workflows.StatusPendingApproval || before.Version != 2 || before.ApproverRole != mangrove.RoleAreaManager || before.ExpiresAt != v1.ExpiresAt {
		t.Fatalf("a minute before the expiry: %+v (version 1 expired at %s)", before, v1.ExpiresAt)
	}
	if got := events(f.audit(t, "toolcall-edit-e4")); got != "needs_approval/ok edited/ok expired/expired" {
		t.Fatalf("audit %s", got)
	}
}
