package workflows_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// issueCredential stores a credential for user with an unguessable handle,
// bound to a sign-in at acr with the given role and stores, and returns
// the handle.
func issueCredential(t *testing.T, s *testenv.Stack, user string, role policy.Role, stores []int64, acr string) string {
	t.Helper()
	ref := "cr_" + strings.ToLower(rand.Text())
	if _, err := s.Owner.Exec(context.Background(), `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time)
		SELECT $1, user_id, client_secret, 'https://id.toolgate.test', user_id, $3, $4, $5, now() FROM vault.credentials WHERE ref = 'cred-' || $2`,
		ref, user, string(role), stores, acr); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestCredentialsAreBoundToTheirSignIn: a session that claims more than the
// sign-in behind its credential (another role, a store it does not hold)
// is refused credential_unavailable; a demo credential works only in dev
// mode, and a seeded row bound to no sign-in never; a tool whose row needs
// a requester tier refuses a weaker sign-in
// with step_up_required, the tiers and authRequired, and runs for a
// credential that holds it.
func TestCredentialsAreBoundToTheirSignIn(t *testing.T) {
	s := testenv.NewStack(t)
	read := func(id string, sess policy.Session) workflows.ToolCallResult {
		sess.ConversationID = "bound"
		// A refused credential waits for a sign-in: its first outcome says why.
		return s.First(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: id, Args: json.RawMessage(`{"articleId":40211}`), Session: sess}).ToolCallResult
	}
	asArea := ama("")
	asArea.Role = mangrove.RoleAreaManager
	wider := ama("")
	wider.Resources = mangrove.Stores(112, 118)
	for id, sess := range map[string]policy.Session{"role": asArea, "stores": wider} {
		if res := read(id, sess); res.Code != policy.CodeCredentialUnavailable || res.Status != workflows.StatusAwaitingSignIn || !res.AuthRequired || !strings.Contains(res.Message, "Ask them to sign in") {
			t.Errorf("a session claiming another %s: %s/%s %q", id, res.Status, res.Code, res.Message)
		}
	}
	if res := read("narrower", policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(115), SessionID: "k", CredentialRef: "cred-kofi"}); res.Status != workflows.StatusExecuted {
		t.Errorf("a session narrower than its credential: %s/%s %s", res.Status, res.Code, res.Message)
	}

	// A demo credential outside dev mode; a real handle works there.
	s.Activities.DevMode = false
	t.Cleanup(func() { s.Activities.DevMode = true })
	if res := read("demo", ama("")); res.Code != policy.CodeCredentialUnavailable {
		t.Errorf("a demo credential outside dev mode: %s/%s", res.Status, res.Code)
	}
	real := ama("")
	real.CredentialRef = issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRPassword)
	if res := read("handle", real); res.Status != workflows.StatusExecuted {
		t.Errorf("an issued credential outside dev mode: %s/%s %s", res.Status, res.Code, res.Message)
	}

	// A seeded row names no sign-in: a call naming it is refused, even
	// with the person's own secret.
	if _, err := s.Owner.Exec(context.Background(), `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack)
		SELECT 'cred-ama-seeded', user_id, client_secret, secret_pack FROM vault.credentials WHERE ref = 'cred-ama'`); err != nil {
		t.Fatal(err)
	}
	seeded := ama("")
	seeded.CredentialRef = "cred-ama-seeded"
	if res := read("seeded", seeded); res.Code != policy.CodeCredentialUnavailable {
		t.Errorf("a seeded row named as a credential: %s/%s %s", res.Status, res.Code, res.Message)
	}
	// A requester tier: none in the shipped table, so set one here.
	s.UsePolicy(t, mfaStock(t))
	res := read("tier", real)
	var tiers struct{ RequiredTier, HeldTier string }
	_ = json.Unmarshal(res.Result, &tiers)
	if res.Code != policy.CodeStepUpRequired || res.Status != workflows.StatusAwaitingSignIn || !res.AuthRequired || res.Retryable || tiers.RequiredTier != "mfa" || tiers.HeldTier != "pwd" ||
		!strings.Contains(res.Message, "stronger sign-in") || !strings.Contains(res.Message, "Do not call again") {
		t.Fatalf("a pwd credential for an mfa tool: %+v %s", res, res.Result)
	}
	strong := ama("")
	strong.CredentialRef = issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRMFA)
	if res := read("tier_mfa", strong); res.Status != workflows.StatusExecuted {
		t.Errorf("an mfa credential for an mfa tool: %s/%s %s", res.Status, res.Code, res.Message)
	}
	var audited int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'awaiting_sign_in' AND reason = 'step_up_required'`,
		workflows.WorkflowID("bound", "tier")).Scan(&audited)
	if audited != 1 {
		t.Fatalf("%d awaiting_sign_in/step_up_required rows audited, want 1", audited)
	}
	// A seeded row is never a credential, even bound to its person
	// (migration 032) with all a sign-in's claims filled in and its secret
	// good at the upstream: its readable ref is still no sign-in's.
	if _, err := s.Owner.Exec(context.Background(), `UPDATE vault.credentials SET demo = false, issuer = 'https://id.toolgate.test', subject = 'ama-1',
		role = 'store_manager', store_ids = '{112}', resources = '{"store": ["112"]}', acr = 'mfa', auth_time = now() WHERE ref = 'cred-ama'`); err != nil {
		t.Fatal(err)
	}
	bound := ama("")
	bound.CredentialRef = "cred-ama"
	if res := read("bound_seeded", bound); res.Code != policy.CodeCredentialUnavailable {
		t.Errorf("a seeded row bound to its person, named as a credential: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// TestARequesterTierHasAMaximumAge: with get_stock needing an mfa
// requester, an mfa sign-in from a day before the call no longer counts as
// the tier (step_up_required, with the tier's maximum age), and a fresh
// one does.
func TestARequesterTierHasAMaximumAge(t *testing.T) {
	s := testenv.NewStack(t)
	s.UsePolicy(t, mfaStock(t))
	read := func(id string, ref string) workflows.ToolCallResult {
		sess := ama("aged")
		sess.CredentialRef = ref
		return s.First(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: id, Args: json.RawMessage(`{"articleId":40211}`), Session: sess}).ToolCallResult
	}
	old := issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRMFA)
	if _, err := s.Owner.Exec(context.Background(), `UPDATE vault.credentials SET auth_time = now() - interval '1 day' WHERE ref = $1`, old); err != nil {
		t.Fatal(err)
	}
	res := read("day_old", old)
	var tiers struct {
		RequiredTier, HeldTier string
		MaxAgeSeconds          int64
	}
	_ = json.Unmarshal(res.Result, &tiers)
	if res.Code != policy.CodeStepUpRequired || res.Status != workflows.StatusAwaitingSignIn || !res.AuthRequired || tiers.RequiredTier != "mfa" ||
		tiers.MaxAgeSeconds != int64(policy.RequesterTierMaxAge.Seconds()) {
		t.Fatalf("an mfa sign-in a day old for an mfa tool: %+v %s", res, res.Result)
	}
	fresh := issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRMFA)
	if res := read("fresh", fresh); res.Status != workflows.StatusExecuted {
		t.Fatalf("a fresh mfa sign-in for an mfa tool: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// TestARevokedSignInsCredentialNeverRuns: a credential issued to ama's
// sign-in as a revocation of that sign-in ran (so its row was not marked
// revoked) is refused at the exchange all the same: the call waits for a
// new sign-in and nothing runs upstream.
func TestARevokedSignInsCredentialNeverRuns(t *testing.T) {
	s := testenv.NewStack(t)
	sess := ama("raced")
	sess.CredentialRef = issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRPassword)
	if _, err := s.Owner.Exec(context.Background(), `INSERT INTO vault.sign_in_revocations (issuer, subject, revoked_at, reason)
		VALUES ('https://id.toolgate.test', 'ama', now() + interval '1 second', 'locked')`); err != nil {
		t.Fatal(err)
	}
	res := s.First(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "c1", Args: json.RawMessage(`{"articleId":40211}`), Session: sess}).ToolCallResult
	if res.Status != workflows.StatusAwaitingSignIn || res.Code != policy.CodeCredentialUnavailable {
		t.Fatalf("a credential of a revoked sign-in: %s/%s %s", res.Status, res.Code, res.Message)
	}
}

// mfaStock is the Mangrove pack with get_stock needing an mfa requester
// (the shipped table has no requester tier).
func mfaStock(t *testing.T) *policy.Policy {
	return testenv.Mangrove(t, func(d *policy.Pack) {
		for i := range d.Rows {
			if d.Rows[i].Tool == mangrove.ToolGetStock {
				d.Rows[i].RequesterTier = policy.ACRMFA
			}
		}
	})
}
