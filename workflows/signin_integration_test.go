package workflows_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestSignInThroughTheStack, on the dev server: a signed-out create_task
// waits (first outcome awaiting_sign_in, authRequired), is resumed with the
// credential of the person's new sign-in and runs once upstream; a
// credential signal to a call that is not waiting is refused; a call nobody
// signs in for expires at the sign-in TTL and runs nothing.
func TestSignInThroughTheStack(t *testing.T) {
	var posts atomic.Int64
	s := testenv.NewStackWith(t, testenv.StackOptions{SignInTTL: 4 * time.Second, UpstreamWrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tasks") {
				posts.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	ctx := context.Background()
	task := func(id string) workflows.ToolCallInput {
		sess := ama("signin")
		sess.CredentialRef = ""
		return workflows.ToolCallInput{Tool: "create_task", ToolCallID: id, Args: json.RawMessage(`{"kind":"shelf_check","dueBy":"today"}`), Session: sess}
	}

	first := s.First(t, task("resumed"))
	if first.Status != workflows.StatusAwaitingSignIn || first.Code != policy.CodeCredentialUnavailable || !first.AuthRequired || first.ExpiresAt == "" ||
		!strings.Contains(first.Message, "Do not call again") {
		t.Fatalf("first outcome of a signed-out call: %+v", first)
	}
	id := workflows.WorkflowID("signin", "resumed")
	ref := issueCredential(t, s, "ama", mangrove.RoleStoreManager, []int64{112}, policy.ACRPassword)
	if err := workflows.Resume(ctx, s.Client, id, ref); err != nil {
		t.Fatal(err)
	}
	res := awaitResult(t, s.Client.GetWorkflow(ctx, id, ""), 30*time.Second, "the resumed call")
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("resumed call: %s/%s %s", res.Status, res.Code, res.Message)
	}
	if err := workflows.Resume(ctx, s.Client, id, ref); err == nil || !strings.Contains(err.Error(), "not awaiting a sign-in") {
		t.Fatalf("a credential for a call that is not waiting: %v", err)
	}
	if err := workflows.Resume(ctx, s.Client, id, "cred ama"); err == nil || !strings.Contains(err.Error(), "credentialRef must be") {
		t.Fatalf("a malformed credential: %v", err)
	}

	expiring := s.First(t, task("abandoned"))
	if expiring.Status != workflows.StatusAwaitingSignIn {
		t.Fatalf("first outcome: %+v", expiring)
	}
	res = awaitResult(t, s.Client.GetWorkflow(ctx, workflows.WorkflowID("signin", "abandoned"), ""), 30*time.Second, "the abandoned call")
	if res.Status != workflows.StatusExpired || res.Code != policy.CodeExpired {
		t.Fatalf("a call nobody signed in for: %s/%s %s", res.Status, res.Code, res.Message)
	}

	var tasks, executed, expired int
	_ = s.Owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM mangrove.tasks),
		(SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'executed'),
		(SELECT count(*) FROM audit_log WHERE workflow_id = $2 AND event = 'expired')`, id, workflows.WorkflowID("signin", "abandoned")).Scan(&tasks, &executed, &expired)
	if n := posts.Load(); n != 1 || tasks != 1 || executed != 1 || expired != 1 {
		t.Fatalf("%d task POSTs upstream, %d tasks, %d executed rows, %d expired rows; want 1, 1, 1, 1", n, tasks, executed, expired)
	}
	// Nothing of the wait is sensitive: the history holds the credential
	// handle only, never a token or the sign-in itself.
	for _, text := range historyTexts(t, s, id, true) {
		if strings.Contains(text, "demo-secret") || strings.Contains(strings.ToLower(text), "accesstoken") {
			t.Fatalf("the history holds a secret: %s", text)
		}
	}
}
