package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func admitIn(note string) activities.AdmitInput {
	args, _ := json.Marshal(map[string]any{"kind": "recount", "dueBy": "today", "note": note, "storeId": 112})
	return checked(policy.Request{Tool: "create_task", Args: args, Session: policy.Session{
		UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1", CredentialRef: "cred-ama"}}, nil)
}

// checked is what the workflow sends admission: its recorded verdict of
// steps 0-6 for the request.
func checked(req policy.Request, value *int64) activities.AdmitInput {
	return activities.AdmitInput{Verdict: testenv.Policy.Check(req, value), Tool: req.Tool, Session: req.Session, ValueCents: value}
}

// atOnce runs n admissions at once, released together, and counts their
// codes.
func atOnce(t *testing.T, n int, admit func(i int) (activities.AdmitResult, error)) map[policy.Code]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[policy.Code]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := admit(i)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			codes[v.Code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return codes
}

// TestAdmitIsRaceFree: 60 admissions at once with 25 of 30 used admit
// exactly 5, and each writes exactly one decision row.
func TestAdmitIsRaceFree(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	ctx := context.Background()
	for i := range 25 {
		if v, err := a.AdmitRun(ctx, fmt.Sprint("seed-", i), "run", admitIn("Seed")); err != nil || v.Code != policy.CodeOK {
			t.Fatalf("seed %d: %v %s", i, err, v.Code)
		}
	}
	codes := atOnce(t, 60, func(i int) (activities.AdmitResult, error) {
		return a.AdmitRun(ctx, fmt.Sprint("race-", i), "run", admitIn("Race"))
	})
	if codes[policy.CodeOK] != 5 || codes[policy.CodeRateLimit] != 55 {
		t.Fatalf("admitted %v, want 5 ok and 55 rate_limit", codes)
	}
	var rows int
	_ = testenv.OwnerPool(t, url).QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE event_key = 'decision'`).Scan(&rows)
	if rows != 85 {
		t.Fatalf("%d decision rows, want 85", rows)
	}
}

// TestAPersonsLimitIsRaceFree: one person calling under two user IDs at
// once, 40 admissions against a per-user limit of 5, admits exactly 5.
// Each user ID's bucket has its own key; the person's lock is what the two
// share. A race is a matter of timing, so eight people each try.
func TestAPersonsLimitIsRaceFree(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	ctx := context.Background()
	in := func(person, user string) activities.AdmitInput {
		k := policy.LimitKey{Key: "search_procedures/user/" + user + "/3600", Tool: mangrove.ToolSearchProcedures, Scope: policy.PerUser, UserID: user,
			Window: policy.Hour, MaxCalls: 5}
		return activities.AdmitInput{Tool: mangrove.ToolSearchProcedures, Verdict: policy.Verdict{Decision: policy.DecisionAllow, Code: policy.CodeOK,
			Limits: []policy.LimitKey{k}, Args: json.RawMessage(`{"query":"cold chain"}`)},
			Session: policy.Session{UserID: user, Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1",
				CredentialRef: "cred-" + person + "-" + user}}
	}
	for p := range 8 {
		person := fmt.Sprint("person", p)
		users := []string{person + ".a", person + ".b"}
		for _, u := range users {
			if _, err := testenv.OwnerPool(t, url).Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, acr, auth_time)
				VALUES ('cred-' || $1 || '-' || $2, $2, 'secret', $3, $1, 'store_manager', 'mfa', now())`, person, u, testenv.Issuer); err != nil {
				t.Fatal(err)
			}
		}
		codes := atOnce(t, 40, func(i int) (activities.AdmitResult, error) {
			return a.AdmitRun(ctx, fmt.Sprint("race-", person, "-", i), "run", in(person, users[i%2]))
		})
		if codes[policy.CodeOK] != 5 || codes[policy.CodeRateLimit] != 35 {
			t.Fatalf("%s, under two user IDs at once: admitted %v, want 5 ok and 35 rate_limit", person, codes)
		}
	}
}

// TestSigningOutStartsNoLimitAfresh: a call that names nobody (no
// credential, or one the vault names no person for) counts every call
// under its user ID, so a person at their per-user limit who calls again
// signed out is refused, and one who called signed out first is counted
// when they sign in.
func TestSigningOutStartsNoLimitAfresh(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	ctx := context.Background()
	if _, err := testenv.OwnerPool(t, url).Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, acr, auth_time)
		VALUES ('cred-out-1', 'efua', 'secret', $1, 'efua-1', 'store_manager', 'mfa', now())`, testenv.Issuer); err != nil {
		t.Fatal(err)
	}
	in := func(tool, ref string) activities.AdmitInput {
		k := policy.LimitKey{Key: tool + "/user/efua/3600", Tool: tool, Scope: policy.PerUser, UserID: "efua", Window: policy.Hour, MaxCalls: 2}
		return activities.AdmitInput{Tool: tool, Verdict: policy.Verdict{Decision: policy.DecisionAllow, Code: policy.CodeOK,
			Limits: []policy.LimitKey{k}, Args: json.RawMessage(`{"query":"cold chain"}`)},
			Session: policy.Session{UserID: "efua", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1", CredentialRef: ref}}
	}
	n := 0
	admit := func(tool, ref string) policy.Code {
		t.Helper()
		n++
		v, err := a.AdmitRun(ctx, fmt.Sprint("out-", n), "run", in(tool, ref))
		if err != nil {
			t.Fatal(err)
		}
		return v.Code
	}
	for _, c := range []struct {
		tool  string
		refs  []string
		final string
	}{{"search_procedures", []string{"cred-out-1", "cred-out-1"}, ""}, {"get_stock", []string{"", ""}, "cred-out-1"}} {
		for i, ref := range c.refs {
			if code := admit(c.tool, ref); code != policy.CodeOK {
				t.Fatalf("%s, call %d (credential %q): %s", c.tool, i+1, ref, code)
			}
		}
		if code := admit(c.tool, c.final); code != policy.CodeRateLimit {
			t.Fatalf("%s: after %d calls, the next (credential %q) was %s, want %s", c.tool, len(c.refs), c.final, code, policy.CodeRateLimit)
		}
	}
}

// TestAdmitRetryReturnsTheRecordedDecision: a retried admission neither
// counts its own row nor writes a second one.
func TestAdmitRetryReturnsTheRecordedDecision(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	ctx := context.Background()
	for i := range 29 {
		if _, err := a.AdmitRun(ctx, fmt.Sprint("seed-", i), "run", admitIn("Seed")); err != nil {
			t.Fatal(err)
		}
	}
	first, err := a.AdmitRun(ctx, "wf-30", "run", admitIn("Thirtieth"))
	if err != nil || first.Code != policy.CodeOK {
		t.Fatalf("30th: %v %s", err, first.Code)
	}
	again, err := a.AdmitRun(ctx, "wf-30", "run", admitIn("Thirtieth"))
	if err != nil || again.Code != policy.CodeOK || again != first {
		t.Fatalf("retry: %v %+v, want the first decision %+v", err, again, first)
	}
	var rows int
	_ = testenv.OwnerPool(t, url).QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = 'wf-30'`).Scan(&rows)
	if rows != 1 {
		t.Fatalf("%d rows for the retried admission", rows)
	}
}

// TestAdmitWaitsForTheBucketLock: while another transaction holds the
// bucket's lock and adds the last 5 admissions, Admit waits and then sees
// them, so it refuses the 31st. Without the lock it would count 25 and admit.
func TestAdmitWaitsForTheBucketLock(t *testing.T) {
	url := testenv.Database(t)
	a := testenv.NewActivities(testenv.AppPool(t, url), "http://unused", zap.NewNop())
	ctx := context.Background()
	for i := range 25 {
		if _, err := a.AdmitRun(ctx, fmt.Sprint("seed-", i), "run", admitIn("Seed")); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := testenv.AppPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, activities.LockID("create_task/store/112/86400")); err != nil {
		t.Fatal(err)
	}
	done := make(chan activities.AdmitResult, 1)
	go func() {
		v, err := a.AdmitRun(ctx, "late", "run", admitIn("Late"))
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	time.Sleep(time.Second) // an unlocked Admit would count and commit in this time
	for i := range 5 {
		if _, err := holder.Exec(ctx, `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, store_id, workflow_id, run_id, event_key)
			VALUES ('allowed', 'ok', 'create_task', 'ama', 'store_manager', 's1', 'c1', 112, $1, 'run', 'decision')`, fmt.Sprint("holder-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v := <-done; v.Code != policy.CodeRateLimit {
		t.Fatalf("Admit behind the lock gave %s, want rate_limit", v.Code)
	}
}
