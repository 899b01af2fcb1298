package approvals_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap/zaptest"
)

// copyCookie is a second client holding a copy of b's session cookie.
func (b *browserless) copyCookie(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	for _, c := range b.c.Jar.Cookies(mustURL(b.base)) {
		if c.Name == approvals.SessionCookie {
			jar.SetCookies(mustURL(b.base), []*http.Cookie{{Name: c.Name, Value: c.Value}})
		}
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func signedOut(t *testing.T, c *http.Client, base string) bool {
	t.Helper()
	c = &http.Client{Jar: c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin")
}

// TestStepUpForTheBigCard: kofi, signed in with a password, opens the
// $960.00 card; the card UI sends him back to the provider for his code
// (acr_values=mfa, max_age=300) and returns to the card; his approval
// carries mfa and executes once.
func TestStepUpForTheBigCard(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "big", "c1", 100)
	id := workflows.WorkflowID("big", "c1")
	kofi := u.signIn(t, "kofi")
	if _, page := kofi.get("/cards/" + id); strings.Contains(page, `id="approve"`) || !strings.Contains(page, `id="reject"`) ||
		!strings.Contains(page, `href="/signin?card=`+id+`" id="step-up"`) {
		t.Fatalf("the $960.00 card for a password sign-in offers approve, or hides reject or the step-up:\n%s", page)
	}
	kofi.step(kofi.c.Get(u.URL + "/signin?card=" + id))
	if !strings.Contains(kofi.page, "second factor") {
		t.Fatalf("the step-up did not ask for the code:\n%s", kofi.page)
	}
	kofi.code(kofi.u.IdP.Code(t, "kofi"))
	if !strings.Contains(kofi.page, "Continue") {
		t.Fatalf("after the code:\n%s", kofi.page)
	}
	if _, page := kofi.get("/cards/" + id); !strings.Contains(page, `id="approve"`) || !strings.Contains(page, "authenticator code, within 5 minutes") {
		t.Fatalf("the card after the step-up:\n%s", page)
	}
	if code, page := kofi.decide(id, signoff.Approve); code != http.StatusOK || !strings.Contains(page, "Executed: transfer TR-") {
		t.Fatalf("decide: %d\n%s", code, page)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 1 {
		t.Fatalf("%d transfers", n)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved' AND approver_id = 'kofi'
		AND approver_issuer = $2 AND approver_subject = 'kofi' AND approver_acr = 'mfa' AND approver_auth_time > now() - interval '5 minutes'`, id, u.IdP.URL); n != 1 {
		t.Fatal("the approval row does not carry kofi's mfa evidence")
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'stepped_up' AND user_id = 'kofi' AND acr = 'mfa' AND workflow_id = $1`, id); n != 1 {
		t.Fatal("the step-up is not in sign_in_log")
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'signed_in' AND user_id = 'kofi' AND acr = 'pwd'`); n != 1 {
		t.Fatal("the sign-in is not in sign_in_log")
	}
}

// TestRejectNeedsNoStepUp: kofi, signed in by password, rejects the
// $960.00 card (mfa within 5 minutes to approve) from the card as he is,
// with a note: the card ends rejected by him and nothing runs.
func TestRejectNeedsNoStepUp(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "no", "c1", 100)
	id := workflows.WorkflowID("no", "c1")
	kofi := u.signIn(t, "kofi")
	_, page := kofi.get("/cards/" + id)
	form := decisionForm(page, signoff.Reject)
	form.Set("reason", "no festival this week")
	kofi.step(kofi.c.PostForm(u.URL+"/cards/"+id+"/decision", form))
	if !strings.Contains(kofi.page, "Rejected by kofi") {
		t.Fatalf("a rejection by a password sign-in:\n%s", kofi.page)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'rejected' AND approver_id = 'kofi' AND approver_acr = 'pwd'`, id); n != 1 {
		t.Fatal("the rejection is not audited with kofi's password sign-in")
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 0 {
		t.Fatalf("%d transfers after a rejection", n)
	}
}

// TestStepUpNearTheEdgeOfMaxAge: a step-up 4m45s old is too old for the
// card UI to sign on a 5-minute card (it keeps a margin for the decision's
// trip), so it asks the provider for a max_age within that margin and the
// provider asks again, rather than handing back the same old sign-in.
func TestStepUpNearTheEdgeOfMaxAge(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "edge", "c1", 100)
	u.request(t, "edge", "c2", 99)
	kofi := u.signIn(t, "kofi")
	kofi.step(kofi.c.Get(u.URL + "/signin?card=" + workflows.WorkflowID("edge", "c1")))
	kofi.code(u.IdP.Code(t, "kofi"))
	if _, page := kofi.get("/cards/" + workflows.WorkflowID("edge", "c1")); !strings.Contains(page, `id="approve"`) {
		t.Fatalf("after the step-up:\n%s", page)
	}
	u.ahead.Store(int64(4*time.Minute + 45*time.Second))
	kofi.step(kofi.c.Get(u.URL + "/signin?card=" + workflows.WorkflowID("edge", "c2")))
	if strings.Contains(kofi.page, "Sign-in failed") || !strings.Contains(kofi.page, `name="password"`) {
		t.Fatalf("a step-up near the edge of max_age did not ask again:\n%s", kofi.page)
	}
}

// TestSignOutRevokesACopiedCookie: the session lives server-side, so a copy
// of the cookie stops working when its owner signs out; the provider's
// session ends with it.
func TestSignOutRevokesACopiedCookie(t *testing.T) {
	u := newUI(t, 0)
	ama := u.signIn(t, "ama")
	copied := ama.copyCookie(t)
	if signedOut(t, copied, u.URL) {
		t.Fatal("the copied cookie did not work before sign-out")
	}
	_, page := ama.get("/")
	ama.step(ama.c.PostForm(u.URL+"/signout", map[string][]string{"csrf": {csrfRe.FindStringSubmatch(page)[1]}}))
	if !strings.Contains(ama.page, "You are signed out") {
		t.Fatalf("sign out:\n%s", ama.page)
	}
	if !signedOut(t, copied, u.URL) {
		t.Fatal("a copied cookie outlived sign-out")
	}
	// The provider's session ended too (RP-initiated logout): signing in asks for the password again.
	ama.step(ama.c.Get(u.URL + "/"))
	if !strings.Contains(ama.page, `name="password"`) {
		t.Fatalf("after sign-out the provider signed ama straight back in:\n%s", ama.page)
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'signed_out' AND user_id = 'ama'`); n != 1 {
		t.Fatal("the sign-out is not in sign_in_log")
	}
}

// TestLockoutEndsAuthority: kofi, signed in, is sent for his code by the
// $960.00 card and enters five wrong ones. The account locks: his existing
// session (and a copy of its cookie) ends at once by back-channel logout,
// the right code afterwards passes nothing, a new sign-in fails, no
// decision reaches the call, and the credential issued to his sign-in is
// revoked.
func TestLockoutEndsAuthority(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "lock", "c1", 100)
	id := workflows.WorkflowID("lock", "c1")
	kofi := u.signIn(t, "kofi")
	// A credential issued to kofi's sign-in at this provider (as the MCP
	// server issues one): the card UI's back-channel logout revokes it.
	if _, err := u.Owner.Exec(context.Background(), `INSERT INTO vault.credentials (ref, user_id, client_secret, issuer, subject, role, store_ids, acr, auth_time)
		SELECT 'cr_kofi_lock', user_id, client_secret, $1, 'kofi', role, store_ids, 'pwd', now() FROM vault.credentials WHERE ref = 'cred-kofi'`, u.IdP.URL); err != nil {
		t.Fatal(err)
	}
	copied := kofi.copyCookie(t)
	kofi.step(kofi.c.Get(u.URL + "/signin?card=" + id))
	for i := 0; i < idp.MaxFactorFailures-1; i++ {
		kofi.code("000000")
		if !strings.Contains(kofi.page, "not right") {
			t.Fatalf("wrong code %d:\n%s", i+1, kofi.page)
		}
	}
	right := u.IdP.Code(t, "kofi")
	kofi.code("000000")
	if !strings.Contains(kofi.page, "account locked") {
		t.Fatalf("the fifth wrong code:\n%s", kofi.page)
	}
	if !u.IdP.Locked("kofi") {
		t.Fatal("not locked at the provider")
	}
	if !signedOut(t, copied, u.URL) || !signedOut(t, kofi.c, u.URL) {
		t.Fatal("the lock did not end kofi's session")
	}
	if n := u.count(t, `SELECT count(*) FROM vault.credentials WHERE ref = 'cr_kofi_lock' AND revoked`); n != 1 {
		t.Fatal("the lock did not revoke the credential issued to kofi's sign-in")
	}
	// The right code, on a flow that reached the code step: refused.
	again := u.signInStart(t)
	again.password("kofi")
	if !strings.Contains(again.page, "account locked") {
		t.Fatalf("a locked account signed in:\n%s", again.page)
	}
	kofi.step(kofi.c.Get(u.URL + "/signin?next=/"))
	if strings.Contains(kofi.page, `name="code"`) {
		kofi.code(right)
	}
	if signedOut(t, kofi.c, u.URL) == false {
		t.Fatal("the right code after the lock signed kofi in")
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approved', 'rejected', 'approval_refused')`, id); n != 0 {
		t.Fatalf("%d decisions reached the call", n)
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'session_revoked' AND subject = 'kofi' AND message LIKE '%locked%'`); n != 1 {
		t.Fatal("the revocation is not in sign_in_log")
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'sign_in_failed' AND message LIKE '%account locked%'`); n < 2 {
		t.Fatalf("%d failed sign-ins in sign_in_log, want the lock and the later attempt", n)
	}
}

// signInStart is a fresh browser at the provider's password page.
func (u *ui) signInStart(t *testing.T) *browserless {
	jar, _ := cookiejar.New(nil)
	b := &browserless{t: t, u: u, base: u.URL, c: &http.Client{Jar: jar}}
	b.step(b.c.Get(u.URL + "/"))
	return b
}

// TestDecisionsShortOfEvidenceAreRefused: decisions signed with the card
// UI's key but carrying an old sign-in, a password where the card needs
// mfa, or a provider the worker does not trust, are refused and audited;
// nothing runs.
func TestDecisionsShortOfEvidenceAreRefused(t *testing.T) {
	u := newUI(t, 0)
	first := u.request(t, "short", "c1", 100)
	id := workflows.WorkflowID("short", "c1")
	kofiID := policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(112)}
	now := time.Now()
	for _, ev := range []signoff.AuthEvidence{
		{Issuer: u.IdP.URL, Subject: "kofi", ACR: policy.ACRMFA, AuthTime: now.Add(-6 * time.Minute).UTC().Format(time.RFC3339)},
		{Issuer: u.IdP.URL, Subject: "kofi", ACR: policy.ACRPassword, AuthTime: now.UTC().Format(time.RFC3339)},
		{Issuer: "https://id.evil.example", Subject: "kofi", ACR: policy.ACRMFA, AuthTime: now.UTC().Format(time.RFC3339)},
	} {
		a := testenv.Sign(signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: kofiID, Evidence: &ev}, first.CardRef())
		if err := u.Client.SignalWorkflow(context.Background(), id, "", workflows.ApprovalSignal, a); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused'`, id) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the decisions were not audited as refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'step_up_required' AND approver_subject = 'kofi'`, id); n != 2 {
		t.Fatalf("%d step_up_required refusals, want 2", n)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'credential_unavailable' AND approver_issuer = 'https://id.evil.example'`, id); n != 1 {
		t.Fatal("the unknown issuer's decision is not refused as credential_unavailable")
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers", n)
	}
}

// codeFlow walks a sign-in of user up to the provider's redirect back to
// the card UI, and returns that callback URL unvisited.
func (u *ui) codeFlow(t *testing.T, c *http.Client, user string) string {
	t.Helper()
	var callback string
	c.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == "/auth/callback" {
			callback = r.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	defer func() { c.CheckRedirect = nil }()
	b := &browserless{t: t, u: u, base: u.URL, c: c}
	b.step(c.Get(u.URL + "/signin?next=//evil.example/x"))
	if callback == "" { // no single sign-on yet: the password page
		b.password(user)
	}
	if callback == "" {
		t.Fatalf("the provider did not redirect back:\n%s", b.page)
	}
	return callback
}

// TestCallbackChecks: a callback this browser did not start (another
// flow's state, or no flow cookie at all: a code injected into someone
// else's browser), and a provider error, sign no one in and are audited; a
// sign-in never returns to another site; a logout token the provider did
// not sign ends nothing.
func TestCallbackChecks(t *testing.T) {
	u := newUI(t, 0)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	first := u.codeFlow(t, c, "ama")
	_ = u.codeFlow(t, c, "ama") // a second flow replaces the first's cookie
	stranger, _ := cookiejar.New(nil)
	for name, try := range map[string]*http.Client{"another flow's state": c, "no flow cookie": {Jar: stranger}} {
		resp, err := try.Get(first)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !signedOut(t, try, u.URL) {
			t.Fatalf("%s: %d, signed in", name, resp.StatusCode)
		}
	}
	last := u.codeFlow(t, c, "ama")
	resp, err := c.Get(last)
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = io.Copy(body, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || signedOut(t, c, u.URL) || strings.Contains(body.String(), "evil.example") {
		t.Fatalf("the good callback: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = c.Get(u.URL + "/auth/callback?error=access_denied&error_description=nope&state=x")
	resp.Body.Close()
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'sign_in_failed'`); n != 3 {
		t.Fatalf("%d failed sign-ins audited, want 3", n)
	}
	// A logout token signed by someone else, or with no logout event, ends nothing.
	other := testenv.NewIdP(t, u.URL)
	forged := other.LogoutToken(t, u.IdP.URL, u.IdP.ClientID, "ama", true)
	for name, tok := range map[string]string{"forged": forged, "garbage": "x.y.z",
		"no event": u.IdP.LogoutToken(t, u.IdP.URL, u.IdP.ClientID, "ama", false)} {
		resp, err := http.PostForm(u.URL+"/auth/backchannel-logout", map[string][]string{"logout_token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || signedOut(t, c, u.URL) {
			t.Fatalf("%s logout token: %d, or it ended the session", name, resp.StatusCode)
		}
	}
}

// TestRoleChangeEndsSessions: a role change at the provider ends the
// person's card UI sessions at once; signing in again gives the new role.
func TestRoleChangeEndsSessions(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "role", "c1", 40)
	ama := u.signIn(t, "ama")
	copied := ama.copyCookie(t)
	if err := u.IdP.SetRole(context.Background(), "ama", "store_manager", []int64{118}); err != nil {
		t.Fatal(err)
	}
	if !signedOut(t, copied, u.URL) || !signedOut(t, ama.c, u.URL) {
		t.Fatal("a role change did not end ama's session")
	}
	again := u.signIn(t, "ama")
	if code, _ := again.get("/cards/" + workflows.WorkflowID("role", "c1")); code != http.StatusNotFound {
		t.Fatalf("ama, moved to store 118, still sees store 112's card: %d", code)
	}
	if n := u.count(t, `SELECT count(*) FROM sign_in_log WHERE event = 'session_revoked' AND subject = 'ama' AND message LIKE '%role_changed%'`); n != 1 {
		t.Fatal("the revocation is not in sign_in_log")
	}
}

// TestCardShowsTheAssistantsWords: the assistant's justification is on the
// card, marked as its words and apart from the card line; a rejection's
// note reaches the model.
func TestCardShowsTheAssistantsWords(t *testing.T) {
	u := newUI(t, 0)
	sess := amaSession
	sess.ConversationID = "words"
	first, run, err := workflows.Call(context.Background(), u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "c1",
		Args: json.RawMessage(`{"articleId":40211,"quantity":40,"reason":"festival_peak","justification":"The <b>festival</b> is on Saturday."}`), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("%v %+v", err, first)
	}
	ama := u.signIn(t, "ama")
	_, page := ama.get("/cards/" + run.GetID())
	if !strings.Contains(page, `id="justification"`) || !strings.Contains(page, "The assistant says") || !strings.Contains(page, "The &lt;b&gt;festival&lt;/b&gt; is on Saturday.") {
		t.Fatalf("the card page:\n%s", page)
	}
	if strings.Contains(first.Card, "festival") {
		t.Fatalf("the assistant's words are in the card line: %q", first.Card)
	}
	_, page = ama.get("/cards/" + run.GetID())
	form := decisionForm(page, signoff.Reject)
	form.Set("reason", "Delivery due tomorrow.")
	ama.step(ama.c.PostForm(u.URL+"/cards/"+run.GetID()+"/decision", form))
	var res workflows.ToolCallResult
	if err := run.Get(context.Background(), &res); err != nil || res.Status != workflows.StatusRejected || !strings.Contains(string(res.Result), "Delivery due tomorrow.") {
		t.Fatalf("%v %+v %s", err, res, res.Result)
	}
}

// TestEscalatedCardReachesTheAreaManager: the $384.00 card, unanswered by
// half its TTL, appears in kofi's inbox marked escalated, and his approval
// runs it once; before that he does not see it.
func TestEscalatedCardReachesTheAreaManager(t *testing.T) {
	u := newUI(t, 6*time.Second)
	u.request(t, "escalate", "c1", 40)
	id := workflows.WorkflowID("escalate", "c1")
	kofi := u.signIn(t, "kofi")
	if _, inbox := kofi.get("/"); strings.Contains(inbox, "$384.00") {
		t.Fatal("kofi sees the store manager's card before it escalates")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, inbox := kofi.get("/"); strings.Contains(inbox, "$384.00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the card never reached kofi's inbox")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, page := kofi.get("/cards/" + id); !strings.Contains(page, `id="escalated"`) {
		t.Fatalf("the card does not say it escalated:\n%s", page)
	}
	if code, page := kofi.decide(id, signoff.Approve); code != http.StatusOK || !strings.Contains(page, "Executed: transfer TR-") {
		t.Fatalf("kofi's approval: %d\n%s", code, page)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('escalated', 'approved', 'executed')`, id); n != 3 {
		t.Fatalf("%d escalated/approved/executed rows, want 3", n)
	}
}

// TestCookiesAreSecureBehindHTTPS: a card UI whose public URL (its
// registered callback) is https marks its cookies Secure without being
// told to; one on plain http (make dev) does not.
func TestCookiesAreSecureBehindHTTPS(t *testing.T) {
	id := testenv.NewIdP(t, "https://cards.example.com")
	for _, tc := range []struct {
		callback string
		secure   bool
	}{{"https://cards.example.com/auth/callback", true}, {"http://127.0.0.1:8080/auth/callback", false}} {
		auth, err := approvals.NewAuth(context.Background(), approvals.OIDC{Roles: approvals.RolesOf(testenv.Policy), Issuer: id.URL, ClientID: id.ClientID, ClientSecret: id.ClientSecret,
			RedirectURL: tc.callback, Scopes: []string{"openid", "profile"}, UserClaim: "preferred_username", NameClaim: "name",
			RoleClaim: "toolgate_role", Policy: testenv.Policy, Resources: mangrove.ClaimMap()}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		(&approvals.Server{Auth: auth, SessionKey: []byte(strings.Repeat("k", 32)), Logger: zaptest.NewLogger(t)}).Handler().
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/signin?next=/", nil))
		cookies := rec.Result().Cookies()
		if len(cookies) == 0 {
			t.Fatalf("%s: /signin set no cookie", tc.callback)
		}
		for _, c := range cookies {
			if c.Secure != tc.secure {
				t.Fatalf("%s: cookie %s Secure=%v, want %v", tc.callback, c.Name, c.Secure, tc.secure)
			}
		}
	}
}
