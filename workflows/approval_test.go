package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/stretchr/testify/mock"
	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/logging"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// fixture is a database and the upstream for time-skipping workflow tests,
// which run the real activities against them.
type fixture struct {
	db   string
	acts *activities.Activities
	// webhooks runs the calls with a webhook in force (acts.Webhook).
	webhooks bool
	// policy, when set, is the packs the calls are judged by instead of testenv.Policy.
	policy *policy.Policy
}

func newFixture(t *testing.T) *fixture {
	db := testenv.Database(t)
	srv := testenv.Upstream(t, db)
	return &fixture{db: db, acts: testenv.NewActivities(testenv.AppPool(t, db), srv.URL, zap.NewNop())}
}

// tenv is a time-skipping environment and the ID of the workflow it runs.
type tenv struct {
	*testsuite.TestWorkflowEnvironment
	id string
}

// run executes one ToolCall in a time-skipping environment; during(env)
// registers delayed callbacks (signals) before it starts.
func (f *fixture) run(t *testing.T, conv, callID, tool, args string, sess policy.Session, during func(env tenv)) workflows.ToolCallResult {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(logging.Temporal(zap.NewNop()))
	env := suite.NewTestWorkflowEnvironment()
	pol := testenv.Policy
	if f.policy != nil {
		pol = f.policy
	}
	workflows.Register(env, workflows.Settings{Policy: pol, ApprovalKeys: testenv.ApprovalKeys, WithdrawKeys: testenv.WithdrawKeys, ApproverIssuers: []string{testenv.Issuer}, Webhooks: f.webhooks})
	f.acts.Policy = pol
	activities.Register(env, f.acts)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(conv, callID)})
	if during != nil {
		during(tenv{env, workflows.WorkflowID(conv, callID)})
	}
	sess.ConversationID = conv
	env.ExecuteWorkflow(workflows.WorkflowType, workflows.ToolCallInput{Tool: tool, ToolCallID: callID, Args: json.RawMessage(args), Session: sess})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed (a bug): %v", err)
	}
	var res workflows.ToolCallResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func status(t *testing.T, env tenv) workflows.Status {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

var (
	amaID  = policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}
	efuaID = policy.Identity{UserID: "efua", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(118)}
	kofiID = policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121)}
)

// decide sends signed decisions at a moment of the wait; hash "" means the
// card's own; a decision with Signature "unsigned" goes without one.
func decide(t *testing.T, env tenv, at time.Duration, seen *workflows.Status, approvals ...signoff.Approval) {
	env.RegisterDelayedCallback(func() {
		st := status(t, env)
		if seen != nil {
			*seen = st
		}
		for _, a := range approvals {
			if a.ArgsHash == "" {
				a.ArgsHash = st.ArgsHash
			}
			switch a.Signature {
			case "unsigned":
				a.Signature = ""
			case "":
				a = testenv.SignAt(a, st.CardRef(env.id), env.Now())
			}
			env.SignalWorkflow(workflows.ApprovalSignal, a)
		}
	}, at)
}

// storeManager is a manager of one store, for stores the seed gives none.
func storeManager(store int64) policy.Identity {
	return policy.Identity{UserID: fmt.Sprint("sm", store), Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(store)}
}

func approve(who policy.Identity) signoff.Approval {
	return signoff.Approval{Decision: signoff.Approve, Approver: who}
}

const fortyCases = `{"articleId":40211,"quantity":40,"reason":"stockout_risk"}`

type auditRow struct {
	Event, Reason, Tool string
	Resource            string
	Approver            string
}

func (f *fixture) audit(t *testing.T, workflowID string) []auditRow {
	t.Helper()
	pool := testenv.OwnerPool(t, f.db)
	rows, err := pool.Query(context.Background(), `SELECT event, reason, tool, coalesce(resource_kind || '/' || resource_id, ''), coalesce(approver_id, '') FROM audit_log WHERE workflow_id = $1 ORDER BY id`, workflowID)
	if err != nil {
		t.Fatal(err)
	}
	var out []auditRow
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.Event, &r.Reason, &r.Tool, &r.Resource, &r.Approver); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := testenv.OwnerPool(t, f.db).QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func events(rows []auditRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Event+"/"+r.Reason)
	}
	return strings.Join(s, " ")
}

func TestApprovalAt29MinutesExecutes(t *testing.T) {
	f := newFixture(t)
	var seen workflows.Status
	res := f.run(t, "t29", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 29*time.Minute, &seen, approve(amaID))
	})
	if res.Status != "executed" || !strings.Contains(string(res.Result), "TR-") || res.Card != "Move 40 cases of UHT milk 1 L, case of 12 ($384.00 at cost) from store 118 to store 112, arriving tomorrow by 10:00." {
		t.Fatalf("%+v", res)
	}
	if seen.Status != "pending_approval" || seen.ValueCents != 38400 || seen.ApproverRole != mangrove.RoleStoreManager || len(seen.ArgsHash) != 64 || seen.ExpiresAt == "" {
		t.Fatalf("card while pending: %+v", seen)
	}
	if got := events(f.audit(t, "toolcall-t29-c1")); got != "needs_approval/ok escalated/ok approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = 'toolcall-t29-c1' AND from_store_id = 118 AND quantity = 40`); n != 1 {
		t.Fatalf("%d transfers", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'executed' AND decided_by = 'ama' AND value_cents = 38400 AND args->>'fromStoreId' = '118'`); n != 1 {
		t.Fatalf("pending_action not executed")
	}
}

func TestApprovalAt30MinutesIsExpired(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "t30", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 30*time.Minute, nil, approve(amaID))
	})
	if res.Status != "expired" || res.Code != policy.CodeExpired || !strings.Contains(res.Message, "fresh preview") {
		t.Fatalf("%+v", res)
	}
	rows := f.audit(t, "toolcall-t30-c1")
	if got := events(rows); got != "needs_approval/ok escalated/ok expired/expired approval_refused/expired" && got != "needs_approval/ok escalated/ok approval_refused/expired expired/expired" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after expiry", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'expired'`); n != 1 {
		t.Fatal("pending_action not expired")
	}
}

func TestRejectRunsNothing(t *testing.T) {
	f := newFixture(t)
	rej := signoff.Approval{Decision: signoff.Reject, Approver: amaID, Reason: "we get a delivery tomorrow"}
	res := f.run(t, "rej", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 5*time.Minute, nil, rej, approve(amaID))
	})
	if res.Status != "rejected" || res.Code != policy.CodeRejected {
		t.Fatalf("%+v", res)
	}
	if got := events(f.audit(t, "toolcall-rej-c1")); got != "needs_approval/ok rejected/rejected approval_refused/rejected" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after reject", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'rejected' AND decision_note = 'we get a delivery tomorrow'`); n != 1 {
		t.Fatal("pending_action not rejected with the note")
	}
}

// TestRefusedDecisionsAreAuditedAndTheWaitGoesOn: wrong role, wrong store,
// wrong hash, a malformed decision and decisions after the approval are
// refused and audited; the valid approval in between runs once.
func TestRefusedDecisionsAreAuditedAndTheWaitGoesOn(t *testing.T) {
	f := newFixture(t)
	wrongHash := approve(amaID)
	wrongHash.ArgsHash = strings.Repeat("0", 64)
	res := f.run(t, "ref", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		forged := approve(amaID)
		forged.Signature = "unsigned"
		otherKey := testenv.Sign(approve(amaID), signoff.CardRef{WorkflowID: env.id})
		otherKey.KeyID = "stolen"
		decide(t, env, time.Minute, nil, approve(kofiID), approve(efuaID), wrongHash, signoff.Approval{Decision: "yes", Approver: amaID}, forged, otherKey)
		decide(t, env, 10*time.Minute, nil, approve(amaID), approve(amaID), signoff.Approval{Decision: signoff.Reject, Approver: amaID})
	})
	if res.Status != "executed" {
		t.Fatalf("%+v", res)
	}
	want := "needs_approval/ok approval_refused/role approval_refused/resource_scope approval_refused/invalid_arguments approval_refused/invalid_arguments " +
		"approval_refused/credential_unavailable approval_refused/credential_unavailable " +
		"approved/ok executed/ok approval_refused/invalid_arguments approval_refused/invalid_arguments"
	if got := events(f.audit(t, "toolcall-ref-c1")); got != want {
		t.Fatalf("audit:\n got %s\nwant %s", got, want)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 1 {
		t.Fatalf("%d transfers", n)
	}
}

func TestHundredCasesRouteToTheAreaManager(t *testing.T) {
	f := newFixture(t)
	var seen workflows.Status
	res := f.run(t, "hundred", "c1", "request_stock_transfer", `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`, ama(""), func(env tenv) {
		decide(t, env, time.Minute, &seen, approve(amaID))
		decide(t, env, 2*time.Minute, nil, approve(kofiID))
	})
	if seen.ValueCents != 96000 || seen.ApproverRole != mangrove.RoleAreaManager || res.Status != "executed" {
		t.Fatalf("card %+v, result %s", seen, res.Status)
	}
	if got := events(f.audit(t, "toolcall-hundred-c1")); got != "needs_approval/ok approval_refused/role approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
}

func TestOverLimitBeforeAnyCard(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "big", "c1", "request_stock_transfer", `{"articleId":40211,"quantity":250,"reason":"festival_peak"}`, kofi(""), nil)
	if res.Status != "denied" || res.Code != policy.CodeOverLimit || !strings.Contains(res.Message, "$2,400.00") {
		t.Fatalf("%+v", res)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action`); n != 0 {
		t.Fatalf("%d cards exist", n)
	}
	if got := events(f.audit(t, "toolcall-big-c1")); got != "denied/over_limit" {
		t.Fatalf("audit: %s", got)
	}
}

func TestTransferLimitsPerStorePerDay(t *testing.T) {
	f := newFixture(t)
	approveAt := func(env tenv) {
		decide(t, env, time.Minute, nil, approve(kofiID), approve(storeManager(113)), approve(storeManager(114)))
	}
	for i := 1; i <= 5; i++ {
		if res := f.run(t, "six", fmt.Sprint("c", i), "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":113}`, kofi(""), approveAt); res.Status != "executed" {
			t.Fatalf("transfer %d: %s/%s %s", i, res.Status, res.Code, res.Message)
		}
	}
	if res := f.run(t, "six", "c6", "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":113}`, kofi(""), approveAt); res.Code != policy.CodeRateLimit {
		t.Fatalf("sixth: %s/%s", res.Status, res.Code)
	}
	// Spend: two 100-case transfers (192000 cents) then 10 more cases (9600) pass $2,000.00 in a day.
	for i := 1; i <= 2; i++ {
		if res := f.run(t, "spend", fmt.Sprint("c", i), "request_stock_transfer", `{"articleId":40211,"quantity":100,"reason":"festival_peak","storeId":114}`, kofi(""), approveAt); res.Status != "executed" {
			t.Fatalf("spend %d: %s/%s %s", i, res.Status, res.Code, res.Message)
		}
	}
	res := f.run(t, "spend", "c3", "request_stock_transfer", `{"articleId":40211,"quantity":10,"reason":"festival_peak","storeId":114}`, kofi(""), approveAt)
	if res.Code != policy.CodeRateLimit || !strings.Contains(res.Message, "$2,000.00") {
		t.Fatalf("over the daily spend: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// TestRejectedAndExpiredCardsFreeTheirBudget: nothing ran, so they do not count.
func TestRejectedAndExpiredCardsFreeTheirBudget(t *testing.T) {
	f := newFixture(t)
	for i := 1; i <= 5; i++ {
		during := func(env tenv) {
			decide(t, env, time.Minute, nil, signoff.Approval{Decision: signoff.Reject, Approver: storeManager(116)})
		}
		if i%2 == 0 {
			during = nil // left to expire
		}
		f.run(t, "free", fmt.Sprint("c", i), "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":116}`, kofi(""), during)
	}
	res := f.run(t, "free", "c6", "request_stock_transfer", `{"articleId":40211,"quantity":1,"reason":"stockout_risk","storeId":116}`, kofi(""),
		func(env tenv) {
			decide(t, env, time.Minute, nil, approve(storeManager(116)))
		})
	if res.Status != "executed" {
		t.Fatalf("after 5 rejected/expired cards: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// TestApprovalIsAuditedWhenTheCallDiesFirst: the approval's record is
// written by the transfer's own activity before it calls upstream; if that
// activity dies before its first step (a killed worker), the workflow
// writes the approval itself, so the audit log never loses it.
func TestApprovalIsAuditedWhenTheCallDiesFirst(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "died", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		env.OnActivity("CallTool", mock.Anything, mock.Anything).Return(activities.CallResult{},
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))
		decide(t, env, time.Minute, nil, approve(amaID))
	})
	if res.Status != "failed" || res.Code != policy.CodeTimeout || res.Retryable {
		t.Fatalf("%+v", res)
	}
	if got := events(f.audit(t, "toolcall-died-c1")); got != "needs_approval/ok approved/ok failed/timeout" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'failed' AND decided_by = 'ama'`); n != 1 {
		t.Fatal("the card should say failed, decided by ama")
	}
}

// TestOutcomeIsAuditedWhenTheCallCannotRecordIt: when the call's activity
// ran upstream but could not write the outcome (the database went away for
// that moment), the workflow writes it: the audit log never loses it.
func TestOutcomeIsAuditedWhenTheCallCannotRecordIt(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "unrecorded", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		env.OnActivity("CallTool", mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.CallInput) (activities.CallResult, error) {
			in.After = nil // the write that failed
			return f.acts.CallTool(ctx, in)
		})
		decide(t, env, time.Minute, nil, approve(amaID))
	})
	if res.Status != "executed" {
		t.Fatalf("%+v", res)
	}
	if got := events(f.audit(t, "toolcall-unrecorded-c1")); got != "needs_approval/ok approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'executed' AND result->>'transferNumber' LIKE 'TR-%'`); n != 1 {
		t.Fatal("the card should say executed, with the result")
	}
}

// TestTooManyRefusedDecisionsLockTheCard: the card takes MaxRefusedDecisions
// refused signed decisions, each audited; the next locks it for good, and a
// valid approval after that changes nothing. An unsigned claim is audited
// but spends none of them, and never fills the approver column.
func TestTooManyRefusedDecisionsLockTheCard(t *testing.T) {
	f := newFixture(t)
	var flood []signoff.Approval
	for i := range workflows.MaxRefusedDecisions + 1 {
		a := approve(kofiID) // signed, but the wrong role; each its own decision, as a repeat never counts
		a.Reason = fmt.Sprintf("attempt %d", i)
		flood = append(flood, a)
	}
	forged := approve(amaID)
	forged.Signature = "unsigned"
	res := f.run(t, "lock", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, time.Minute, nil, forged)
		decide(t, env, 2*time.Minute, nil, flood...)
		decide(t, env, 3*time.Minute, nil, approve(amaID))
	})
	if res.Status != workflows.StatusRejected || res.Code != policy.CodeLocked || !strings.Contains(res.Message, "locked") {
		t.Fatalf("%+v", res)
	}
	want := "needs_approval/ok approval_refused/credential_unavailable" + strings.Repeat(" approval_refused/role", workflows.MaxRefusedDecisions) + " rejected/locked"
	if got := events(f.audit(t, "toolcall-lock-c1")); got != want {
		t.Fatalf("audit:\n got %s\nwant %s", got, want)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE event = 'approval_refused' AND reason = 'credential_unavailable' AND approver_id IS NULL AND claimed_approver_id = 'ama'`); n != 1 {
		t.Fatalf("the unsigned claim should be kept apart from approver_id: %d rows", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE event = 'approval_refused' AND reason = 'role' AND approver_id = 'kofi' AND claimed_approver_id IS NULL`); n != workflows.MaxRefusedDecisions {
		t.Fatalf("verified refusals should name kofi as approver: %d rows", n)
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after a lock", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE status = 'rejected'`); n != 1 {
		t.Fatal("pending_action not rejected")
	}
}

// signedIn is an approval carrying a sign-in at acr, age before the moment
// it is sent, by issuer.
type signedIn struct {
	a      signoff.Approval
	issuer string
	acr    string
	age    time.Duration
}

// decideAs sends decisions with the sign-in evidence each names.
func decideAs(t *testing.T, env tenv, at time.Duration, decisions ...signedIn) {
	env.RegisterDelayedCallback(func() {
		st := status(t, env)
		for _, d := range decisions {
			a := d.a
			a.ArgsHash = st.ArgsHash
			a.Evidence = &signoff.AuthEvidence{Issuer: d.issuer, Subject: a.Approver.UserID, ACR: d.acr, AuthTime: env.Now().Add(-d.age).UTC().Format(time.RFC3339)}
			env.SignalWorkflow(workflows.ApprovalSignal, testenv.SignAt(a, st.CardRef(env.id), env.Now()))
		}
	}, at)
}

// TestApprovalsNeedTheirEvidence: the $960 card needs an mfa sign-in
// within 5 minutes, the $384 card a password within 8 hours; anything short,
// or from an identity provider the worker does not trust, is refused and
// audited with the evidence it carried, and the wait goes on.
func TestApprovalsNeedTheirEvidence(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "stepup", "c1", "request_stock_transfer", `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`, ama(""), func(env tenv) {
		decideAs(t, env, time.Minute,
			signedIn{approve(kofiID), testenv.Issuer, policy.ACRPassword, time.Minute},
			signedIn{approve(kofiID), testenv.Issuer, policy.ACRMFA, 5*time.Minute + 30*time.Second},
			signedIn{approve(kofiID), "https://evil.example", policy.ACRMFA, 0},
			signedIn{approve(kofiID), testenv.Issuer, policy.ACRMFA, time.Minute})
	})
	if res.Status != "executed" {
		t.Fatalf("%+v", res)
	}
	if got := events(f.audit(t, "toolcall-stepup-c1")); got != "needs_approval/ok approval_refused/step_up_required approval_refused/step_up_required approval_refused/credential_unavailable approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-stepup-c1' AND event = 'approved' AND approver_issuer = $1
		AND approver_subject = 'kofi' AND approver_acr = 'mfa' AND approver_auth_time IS NOT NULL`, testenv.Issuer); n != 1 {
		t.Fatal("the approval row does not carry the approver's evidence")
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-stepup-c1' AND event = 'approval_refused' AND approver_acr = 'pwd'`); n != 1 {
		t.Fatal("the refused pwd decision does not carry its evidence")
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = 'toolcall-stepup-c1' AND required_acr = 'mfa' AND required_max_age_seconds = 300`); n != 1 {
		t.Fatal("the card does not record the evidence it needs")
	}

	res = f.run(t, "stepup", "c2", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decideAs(t, env, time.Minute,
			signedIn{approve(amaID), testenv.Issuer, policy.ACRPassword, 8*time.Hour + time.Minute},
			signedIn{approve(amaID), testenv.Issuer, policy.ACRPassword, 7 * time.Hour})
	})
	if got := events(f.audit(t, "toolcall-stepup-c2")); res.Status != "executed" || got != "needs_approval/ok approval_refused/step_up_required approved/ok executed/ok" {
		t.Fatalf("%s, audit: %s", res.Status, got)
	}
}

// TestOneCardPerIntentTimeSkipping: a card holds its intent while pending
// and releases it when it ends; an equivalent call while another card holds
// it ends already_pending, naming that card, with nothing admitted.
func TestOneCardPerIntentTimeSkipping(t *testing.T) {
	f := newFixture(t)
	pool := testenv.OwnerPool(t, f.db)
	var intent string
	res := f.run(t, "held", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		env.RegisterDelayedCallback(func() {
			if err := pool.QueryRow(context.Background(), `SELECT intent FROM pending_intents WHERE workflow_id = 'toolcall-held-c1'`).Scan(&intent); err != nil {
				t.Errorf("the pending card holds no intent: %v", err)
			}
		}, time.Minute)
	})
	if res.Status != workflows.StatusExpired || intent == "" {
		t.Fatalf("%s, intent %q", res.Status, intent)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_intents`); n != 0 {
		t.Fatalf("the expired card still holds %d intents", n)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO pending_intents VALUES ($1, 'toolcall-holder-c1', 'r', '2099-01-01T00:00:00Z')`, intent); err != nil {
		t.Fatal(err)
	}
	// The holder is ama's own call, its card (the ended one's row, taken
	// over) naming her sign-in: her equivalent call is told its ID.
	if _, err := pool.Exec(context.Background(), `INSERT INTO tool_calls (workflow_id, run_id, fingerprint, tool, user_id)
		VALUES ('toolcall-holder-c1', 'r', 'f', 'request_stock_transfer', 'ama')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE pending_action SET workflow_id = 'toolcall-holder-c1' WHERE workflow_id = 'toolcall-held-c1'
		AND requester_subject = 'ama'`); err != nil {
		t.Fatal(err)
	}
	res = f.run(t, "again", "c2", "request_stock_transfer", fortyCases, ama(""), nil)
	if res.Status != workflows.StatusDenied || res.Code != policy.CodeAlreadyPending || !strings.Contains(string(res.Result), `"pendingWorkflowId":"toolcall-holder-c1"`) ||
		!strings.Contains(string(res.Result), `"expiresAt":"2099-01-01T00:00:00Z"`) {
		t.Fatalf("%+v %s", res, res.Result)
	}
	if got := events(f.audit(t, "toolcall-again-c2")); got != "denied/already_pending" {
		t.Fatalf("audit: %s", got)
	}
}

// TestReasonsReachBothSides: the assistant's justification goes on the card
// apart from the card line, sanitized; a rejection's note comes back to the
// model in the result, sanitized, with a message that says to tell the person.
func TestReasonsReachBothSides(t *testing.T) {
	f := newFixture(t)
	args := `{"articleId":40211,"quantity":40,"reason":"festival_peak","justification":"Festival on Saturday; the supplier said call 0244 123 456 to confirm."}`
	res := f.run(t, "reasons", "c1", "request_stock_transfer", args, ama(""), func(env tenv) {
		decide(t, env, time.Minute, nil, signoff.Approval{Decision: signoff.Reject, Approver: amaID, Reason: "Delivery due tomorrow; ring me on 0244 555 123 if not."})
	})
	var note struct{ Note string }
	_ = json.Unmarshal(res.Result, &note)
	if res.Status != workflows.StatusRejected || !strings.Contains(note.Note, "Delivery due tomorrow") || strings.Contains(note.Note, "555") ||
		!strings.Contains(res.Message, "result.note") || strings.Contains(res.Card, "Festival on Saturday") {
		t.Fatalf("%+v %s", res, res.Result)
	}
	var shown string
	if err := testenv.OwnerPool(t, f.db).QueryRow(context.Background(), `SELECT justification FROM pending_action WHERE workflow_id = 'toolcall-reasons-c1'`).Scan(&shown); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "Festival on Saturday") || strings.Contains(shown, "123 456") {
		t.Fatalf("the card shows %q", shown)
	}
	// Over 280 characters is invalid_arguments, before any card.
	long := `{"articleId":40211,"quantity":40,"reason":"festival_peak","justification":"` + strings.Repeat("x", 281) + `"}`
	if res := f.run(t, "reasons", "c2", "request_stock_transfer", long, ama(""), nil); res.Code != policy.CodeInvalidArguments {
		t.Fatalf("a 281-character justification: %s/%s", res.Status, res.Code)
	}
}

// TestUnansweredCardsEscalate: a $384.00 card nobody answers by half its
// TTL is also offered to the area manager (recorded, audited, shown); kofi's
// approval before that is refused (role), after it counts; the expiry does
// not move.
func TestUnansweredCardsEscalate(t *testing.T) {
	f := newFixture(t)
	var before, after workflows.Status
	res := f.run(t, "esc", "c1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, 10*time.Minute, &before, approve(kofiID))
		decide(t, env, 16*time.Minute, &after, approve(kofiID))
	})
	if res.Status != workflows.StatusExecuted || before.EscalatedTo != "" || after.EscalatedTo != mangrove.RoleAreaManager || before.ExpiresAt != after.ExpiresAt {
		t.Fatalf("%s; before %+v; after %+v", res.Status, before, after)
	}
	if got := events(f.audit(t, "toolcall-esc-c1")); got != "needs_approval/ok approval_refused/role escalated/ok approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = 'toolcall-esc-c1' AND escalated_role = 'area_manager' AND decided_by = 'kofi'`); n != 1 {
		t.Fatal("the card does not show the escalation")
	}
	// Escalated and still unanswered, a card expires when it said it would.
	var escalated, pastExpiry bool
	res = f.run(t, "esc", "c3", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		env.RegisterDelayedCallback(func() { escalated = status(t, env).EscalatedTo == mangrove.RoleAreaManager }, 29*time.Minute)
		env.RegisterDelayedCallback(func() { pastExpiry = true }, 31*time.Minute)
	})
	if got := events(f.audit(t, "toolcall-esc-c3")); res.Status != workflows.StatusExpired || !escalated || pastExpiry || got != "needs_approval/ok escalated/ok expired/expired" {
		t.Fatalf("%s (escalated %v, still waiting past its expiry %v), audit: %s", res.Status, escalated, pastExpiry, got)
	}
	// A card routed to the top role has nobody to escalate to.
	res = f.run(t, "esc", "c2", "request_stock_transfer", `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`, ama(""), nil)
	if got := events(f.audit(t, "toolcall-esc-c2")); res.Status != workflows.StatusExpired || strings.Contains(got, "escalated") {
		t.Fatalf("%s, audit: %s", res.Status, got)
	}
}

var (
	adwoaID = policy.Identity{UserID: "adwoa", Role: mangrove.RoleAreaManager, Resources: kofiID.Resources}
	yoofiID = policy.Identity{UserID: "yoofi", Role: mangrove.RoleAreaManager, Resources: kofiID.Resources}
)

const twoHundredCases = `{"articleId":40211,"quantity":200,"reason":"festival_peak"}`

// TestTwoPersonRule: a $1,920.00 transfer needs two distinct area
// managers; the same person twice counts once, the requester never counts,
// the call runs once after the second approval, and one rejection ends it.
func TestTwoPersonRule(t *testing.T) {
	f := newFixture(t)
	var between workflows.Status
	res := f.run(t, "quorum", "q1", "request_stock_transfer", twoHundredCases, ama(""), func(env tenv) {
		decide(t, env, time.Minute, nil, approve(kofiID))
		decide(t, env, 2*time.Minute, &between, approve(kofiID))
		decide(t, env, 3*time.Minute, nil, approve(adwoaID))
	})
	if res.Status != workflows.StatusExecuted || between.ApprovalsNeeded != 2 || len(between.ApprovedBy) != 1 || between.ApprovedBy[0] != "kofi" || between.ValueCents != 192000 {
		t.Fatalf("%s/%s; between the approvals: %+v", res.Status, res.Code, between)
	}
	if got := events(f.audit(t, "toolcall-quorum-q1")); got != "needs_approval/ok approval_counted/ok approval_refused/role approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = 'toolcall-quorum-q1' AND approvals_needed = 2
		AND approvals->0->>'userId' = 'kofi' AND decided_by = 'adwoa' AND status = 'executed'`); n != 1 {
		t.Fatal("the card does not show its two approvers")
	}
	if n := f.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = 'toolcall-quorum-q1'`); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}

	// The requester is an area manager: their own approval does not count.
	kofi113 := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113), SessionID: "k", CredentialRef: "cred-kofi"}
	res = f.run(t, "quorum", "q2", "request_stock_transfer", twoHundredCases, kofi113, func(env tenv) {
		decide(t, env, time.Minute, nil, approve(kofiID), approve(adwoaID))
		decide(t, env, 2*time.Minute, nil, approve(yoofiID))
	})
	if got := events(f.audit(t, "toolcall-quorum-q2")); res.Status != workflows.StatusExecuted ||
		got != "needs_approval/ok approval_refused/role approval_counted/ok approved/ok executed/ok" {
		t.Fatalf("%s, audit: %s", res.Status, got)
	}

	// One rejection ends it, whatever was approved before.
	kofi114 := kofi113
	kofi114.Resources = mangrove.Stores(114)
	res = f.run(t, "quorum", "q3", "request_stock_transfer", `{"articleId":40211,"quantity":190,"reason":"festival_peak"}`, kofi114, func(env tenv) {
		decide(t, env, time.Minute, nil, approve(adwoaID))
		decide(t, env, 2*time.Minute, nil, signoff.Approval{Decision: signoff.Reject, Approver: yoofiID, Reason: "too much"})
	})
	if got := events(f.audit(t, "toolcall-quorum-q3")); res.Status != workflows.StatusRejected || got != "needs_approval/ok approval_counted/ok rejected/rejected" {
		t.Fatalf("%s, audit: %s", res.Status, got)
	}
}
