package workflows_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/testsuite"
)

// resume sends the credential signal at a moment of the wait and keeps the
// status the call showed just before.
func resume(t *testing.T, env tenv, at time.Duration, seen *workflows.Status, payload any) {
	env.RegisterDelayedCallback(func() {
		if seen != nil {
			*seen = status(t, env)
		}
		env.SignalWorkflow(workflows.CredentialSignal, payload)
	}, at)
}

// TestSignInResumesTheCall: a signed-out call waits for the credential
// signal, then runs the chain again with it, once; payloads that are not a
// credential, and a credential that is not the person's, leave it waiting.
func TestSignInResumesTheCall(t *testing.T) {
	f := newFixture(t)
	var waiting, again workflows.Status
	res := f.run(t, "signin", "r1", "get_stock", `{"articleId":40211}`, signedOut(""), func(env tenv) {
		resume(t, env, time.Minute, &waiting, map[string]any{"credentialRef": "cred-ama", "phone": "+233 20 000 0000"})
		resume(t, env, 2*time.Minute, nil, "not an object")
		resume(t, env, 3*time.Minute, nil, workflows.CredentialInput{CredentialRef: "cred-kofi"}) // not ama's
		resume(t, env, 5*time.Minute, &again, workflows.CredentialInput{CredentialRef: "cred-ama"})
	})
	if waiting.Status != workflows.StatusAwaitingSignIn || waiting.ExpiresAt == "" || again.Status != workflows.StatusAwaitingSignIn || again.ExpiresAt != waiting.ExpiresAt {
		t.Fatalf("the call did not wait for a sign-in: %+v, then %+v", waiting, again)
	}
	if res.Status != workflows.StatusExecuted || res.Code != policy.CodeOK {
		t.Fatalf("resumed call: %s/%s %s", res.Status, res.Code, res.Message)
	}
	got := events(f.audit(t, "toolcall-signin-r1"))
	if got != "awaiting_sign_in/credential_unavailable allowed/ok awaiting_sign_in/credential_unavailable" {
		t.Fatalf("audit: %s", got)
	}
}

// TestSignInWaitExpires: nobody signs in, so the call ends expired at the
// sign-in TTL, audited, and nothing runs: no card, no admission.
func TestSignInWaitExpires(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "signin", "x1", "request_stock_transfer", fortyCases, signedOut(""), func(env tenv) {
		resume(t, env, workflows.DefaultSignInTTL+time.Second, nil, workflows.CredentialInput{CredentialRef: "cred-ama"})
	})
	if res.Status != workflows.StatusExpired || res.Code != policy.CodeExpired || !res.AuthRequired {
		t.Fatalf("unanswered sign-in: %s/%s auth=%v %s", res.Status, res.Code, res.AuthRequired, res.Message)
	}
	if got := events(f.audit(t, "toolcall-signin-x1")); got != "awaiting_sign_in/credential_unavailable expired/expired" {
		t.Fatalf("audit: %s", got)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = 'toolcall-signin-x1'`); n != 0 {
		t.Fatal("a card went up for a call nobody signed in for")
	}
}

// TestSignInBeforeTheCard: a transfer whose person is signed out waits,
// and once resumed goes through its dry run to the card and runs once when
// approved.
func TestSignInBeforeTheCard(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "signin", "t1", "request_stock_transfer", `{"articleId":40211,"quantity":7,"reason":"stockout_risk"}`, signedOut(""), func(env tenv) {
		resume(t, env, time.Minute, nil, workflows.CredentialInput{CredentialRef: "cred-ama"})
		decide(t, env, 2*time.Minute, nil, approve(amaID))
	})
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("transfer after sign-in: %s/%s %s", res.Status, res.Code, res.Message)
	}
	if got := events(f.audit(t, "toolcall-signin-t1")); got != "awaiting_sign_in/credential_unavailable needs_approval/ok approved/ok executed/ok" {
		t.Fatalf("audit: %s", got)
	}
}

// TestSignInRoundsAreBounded: a credential that keeps falling short ends
// the call failed after MaxSignInRounds waits.
func TestSignInRoundsAreBounded(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "signin", "b1", "get_stock", `{"articleId":40211}`, withCredential("cred-kofi"), func(env tenv) {
		for i := range workflows.MaxSignInRounds {
			resume(t, env, time.Duration(i+1)*time.Minute, nil, workflows.CredentialInput{CredentialRef: "cred-kofi"})
		}
	})
	if res.Status != workflows.StatusFailed || res.Code != policy.CodeCredentialUnavailable || !res.AuthRequired {
		t.Fatalf("after %d rounds: %s/%s %s", workflows.MaxSignInRounds, res.Status, res.Code, res.Message)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-signin-b1' AND event = 'awaiting_sign_in'`); n != workflows.MaxSignInRounds {
		t.Fatalf("%d sign-in waits audited, want %d", n, workflows.MaxSignInRounds)
	}
}

// signedOut is ama's session with no credential.
func signedOut(string) policy.Session { return withCredential("") }

// withCredential is ama's session with another credential.
func withCredential(ref string) policy.Session {
	s := ama("")
	s.CredentialRef = ref
	return s
}

// TestADuplicateAfterASignInIsTheSameCall: once the person has signed in,
// the call stands with their new credential, so a duplicate start that
// carries it is the same call and gets the call's first outcome (the
// card), never idempotency_conflict.
func TestADuplicateAfterASignInIsTheSameCall(t *testing.T) {
	f := newFixture(t)
	args := `{"articleId":40211,"quantity":7,"reason":"stockout_risk"}`
	signedIn := withCredential("cred-ama")
	signedIn.ConversationID = "signin"
	var got workflows.Outcome
	var gotErr error
	res := f.run(t, "signin", "d1", "request_stock_transfer", args, signedOut(""), func(env tenv) {
		resume(t, env, time.Minute, nil, workflows.CredentialInput{CredentialRef: "cred-ama"})
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(workflows.FirstOutcomeUpdate, "duplicate", &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { gotErr = err },
				OnComplete: func(v any, err error) {
					if gotErr = err; err == nil {
						b, _ := json.Marshal(v)
						gotErr = json.Unmarshal(b, &got)
					}
				},
			}, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "d1", Args: json.RawMessage(args), Session: signedIn})
		}, 90*time.Second)
		decide(t, env, 2*time.Minute, nil, approve(amaID))
	})
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("transfer after sign-in: %s/%s %s", res.Status, res.Code, res.Message)
	}
	if gotErr != nil || got.Status != workflows.StatusPendingApproval || got.Code == policy.CodeIdempotencyConflict {
		t.Fatalf("a duplicate with the new sign-in's credential got %s/%s (%v), want the card", got.Status, got.Code, gotErr)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = 'toolcall-signin-d1' AND reason = 'idempotency_conflict'`); n != 0 {
		t.Fatalf("%d idempotency conflicts audited for the same call", n)
	}
}
