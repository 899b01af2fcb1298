package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap/zaptest"
)

// ui is the whole stack plus the card UI on a real loopback port, signing
// people in at a demo identity provider.
type ui struct {
	*testenv.Stack
	URL string
	IdP *testenv.IdP
	// ahead moves the card UI's and the provider's clocks forward together.
	ahead atomic.Int64
}

func (u *ui) now() time.Time { return time.Now().Add(time.Duration(u.ahead.Load())) }

func newUI(t *testing.T, ttl time.Duration) *ui {
	return newUIWith(t, testenv.StackOptions{ApprovalTTL: ttl})
}

// newUIWith is newUI with the stack's options: its packs (o.Policy, the
// shipped ones when nil) are the card UI's too, their roles and their
// resources' claims.
func newUIWith(t *testing.T, o testenv.StackOptions) *ui {
	h := &testenv.LateHandler{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u := &ui{URL: srv.URL}
	id := testenv.NewIdPWith(t, srv.URL, u.now)
	o.ApproverIssuers = append(o.ApproverIssuers, id.URL)
	if o.Audiences != nil && o.Exchange == nil {
		o.Exchange = id.Exchange()
	}
	s := testenv.NewStackWith(t, o)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	claims, err := s.Policy.ClaimMap("")
	if err != nil {
		t.Fatal(err)
	}
	auth, err := approvals.NewAuth(context.Background(), approvals.OIDC{Roles: approvals.RolesOf(s.Policy), Issuer: id.URL, ClientID: id.ClientID, ClientSecret: id.ClientSecret,
		RedirectURL: srv.URL + "/auth/callback", Scopes: []string{"openid", "profile"}, UserClaim: "preferred_username", NameClaim: "name",
		RoleClaim: "toolgate_role", Policy: s.Policy, Resources: claims}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h.Set((&approvals.Server{Policy: s.Policy, Pool: testenv.ServicePool(t, s.DatabaseURL, "approvals"), Temporal: s.Client, Auth: auth,
		Signer: testenv.ApprovalSigner, SessionKey: key, Logger: zaptest.NewLogger(t), DecisionWait: 15 * time.Second, Now: u.now,
		Auditor: insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}, TemporalWeb: "http://temporal-web.test/", Namespace: testenv.Namespace()}).Handler())
	u.Stack, u.IdP = s, id
	return u
}

var amaSession = policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s-ama", CredentialRef: "cred-ama"}

// request puts a transfer card up and returns its first outcome.
func (u *ui) request(t *testing.T, conv, call string, quantity int) workflows.Outcome {
	t.Helper()
	sess := amaSession
	sess.ConversationID = conv
	first, _, err := workflows.Call(context.Background(), u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: call,
		Args: json.RawMessage(fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"stockout_risk"}`, quantity)), Session: sess})
	if err != nil || first.Status != workflows.StatusPendingApproval {
		t.Fatalf("card %s: %v %+v", call, err, first)
	}
	return first
}

func (u *ui) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := u.Owner.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// browserless is one signed-in HTTP session of the card UI (and of the
// provider: one cookie jar for both, as a browser has).
type browserless struct {
	t    *testing.T
	u    *ui
	base string
	c    *http.Client
	// page is the last page a sign-in step answered with.
	page string
}

var requestIDRe = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)

// signIn signs user in with their password through the real code flow.
func (u *ui) signIn(t *testing.T, user string) *browserless {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browserless{t: t, u: u, base: u.URL, c: &http.Client{Jar: jar}}
	b.step(b.c.Get(u.URL + "/"))
	b.password(user)
	if _, page := b.get("/"); !strings.Contains(page, `class="who"`) {
		t.Fatalf("sign in %s: not the inbox:\n%s", user, page)
	}
	return b
}

// step keeps the page a sign-in step answered with.
func (b *browserless) step(resp *http.Response, err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.page = string(body)
}

// password answers the provider's password page.
func (b *browserless) password(user string) {
	b.t.Helper()
	m := requestIDRe.FindStringSubmatch(b.page)
	if m == nil || !strings.Contains(b.page, `name="password"`) {
		b.t.Fatalf("not the provider's password page:\n%s", b.page)
	}
	b.step(b.c.PostForm(b.u.IdP.URL+"/login/password", url.Values{"authRequestID": {m[1]}, "username": {user}, "password": {b.u.IdP.Users[user].Password}}))
}

// code answers the provider's code page.
func (b *browserless) code(code string) {
	b.t.Helper()
	m := requestIDRe.FindStringSubmatch(b.page)
	if m == nil || !strings.Contains(b.page, `name="code"`) {
		b.t.Fatalf("not the provider's code page:\n%s", b.page)
	}
	b.step(b.c.PostForm(b.u.IdP.URL+"/login/totp", url.Values{"authRequestID": {m[1]}, "code": {code}}))
}

func (b *browserless) get(path string) (int, string) {
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var (
	csrfRe    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	hashRe    = regexp.MustCompile(`name="argsHash" value="([^"]+)"`)
	versionRe = regexp.MustCompile(`name="signedVersion" value="([^"]+)"`)
)

// decisionForm is a decision with the card page's own form values (its
// CSRF token, args hash and version), those the page shows.
func decisionForm(page, decision string) url.Values {
	form := url.Values{"decision": {decision}}
	for name, re := range map[string]*regexp.Regexp{"csrf": csrfRe, "argsHash": hashRe, "signedVersion": versionRe} {
		if m := re.FindStringSubmatch(page); m != nil {
			form.Set(name, m[1])
		}
	}
	return form
}

// decide posts a decision from the card page's own form values.
func (b *browserless) decide(id, decision string) (int, string) {
	_, page := b.get("/cards/" + id)
	resp, err := b.c.PostForm(b.base+"/cards/"+id+"/decision", decisionForm(page, decision))
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestADecisionNamesTheVersionItsApproverSaw: a decision posted without the
// card version its page showed, or with a version the card has not reached,
// is refused with 400 and signs nothing: the version is the approver's, as
// the args hash is. With the version shown, it runs.
func TestADecisionNamesTheVersionItsApproverSaw(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "ver", "c1", 40)
	id := workflows.WorkflowID("ver", "c1")
	ama := u.signIn(t, "ama")
	_, page := ama.get("/cards/" + id)
	shown := versionRe.FindStringSubmatch(page)
	if shown == nil || shown[1] != "1" {
		t.Fatalf("the card page does not name version 1 for its decision:\n%s", page)
	}
	post := func(version string) int {
		t.Helper()
		form := decisionForm(page, signoff.Approve)
		form.Del("signedVersion")
		if version != "" {
			form.Set("signedVersion", version)
		}
		resp, err := ama.c.PostForm(u.URL+"/cards/"+id+"/decision", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, v := range []string{"", "2", "0", "one"} {
		if code := post(v); code != http.StatusBadRequest {
			t.Errorf("a decision naming version %q: %d, want 400", v, code)
		}
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approval_refused', 'approved')`, id); n != 0 {
		t.Fatalf("%d decisions reached the call, want none", n)
	}
	if code := post("1"); code != http.StatusOK && code != http.StatusSeeOther {
		t.Fatalf("the decision naming the version shown: %d", code)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 1 {
		t.Fatalf("%d transfers after the decision naming the version shown, want 1", n)
	}
}

// TestTwoSessionsDoubleSubmitOneTransfer: the same approver, signed in
// twice, double-submits from both sessions; one transfer exists.
func TestTwoSessionsDoubleSubmitOneTransfer(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "dbl", "c1", 40)
	id := workflows.WorkflowID("dbl", "c1")
	tabs := []*browserless{u.signIn(t, "ama"), u.signIn(t, "ama")}
	var wg sync.WaitGroup
	pages := make([]string, 4)
	for i := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, pages[i] = tabs[i%2].decide(id, signoff.Approve)
		}()
	}
	wg.Wait()
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, id); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approved'`, id); n != 1 {
		t.Fatalf("%d approved rows, want 1", n)
	}
	executed := 0
	for _, p := range pages {
		if strings.Contains(p, "Executed: transfer TR-") {
			executed++
		}
	}
	if executed == 0 {
		t.Fatalf("no page showed the outcome:\n%s", pages[0])
	}
}

// TestForgedDecisionRunsNothing: correct JSON sent straight to Temporal,
// without a valid signature, is refused and audited; nothing runs.
func TestForgedDecisionRunsNothing(t *testing.T) {
	u := newUI(t, 0)
	first := u.request(t, "forge", "c1", 40)
	id := workflows.WorkflowID("forge", "c1")
	amaID := policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}
	bare := signoff.Approval{Decision: signoff.Approve, ArgsHash: first.ArgsHash, Approver: amaID}
	stolen := testenv.Sign(bare, first.CardRef())
	stolen.Approver.Resources = mangrove.Stores(112, 118)
	for _, a := range []signoff.Approval{bare, stolen} {
		if err := u.Client.SignalWorkflow(context.Background(), id, "", workflows.ApprovalSignal, a); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused' AND reason = 'credential_unavailable'`, id) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the forged decisions were not audited as refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := u.count(t, `SELECT count(*) FROM mangrove.transfers`); n != 0 {
		t.Fatalf("%d transfers after forged decisions", n)
	}
	if n := u.count(t, `SELECT count(*) FROM pending_action WHERE workflow_id = $1 AND status = 'pending_approval'`, id); n != 1 {
		t.Fatal("the card should still be pending")
	}
	// The forgeries claimed to be ama. Shown her card with a link naming
	// their refusal rows, she must not read "your decision was refused":
	// she never decided.
	ama := u.signIn(t, "ama")
	for _, row := range u.ids(t, `SELECT id FROM audit_log WHERE workflow_id = $1 AND event = 'approval_refused'`, id) {
		if _, page := ama.get(fmt.Sprintf("/cards/%s?refused=%d", id, row)); strings.Contains(page, "Your decision was refused") {
			t.Fatalf("a forged decision claiming ama is shown to ama as hers (row %d)", row)
		}
	}
}

func (u *ui) ids(t *testing.T, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := u.Owner.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		t.Fatalf("no rows: %v", err)
	}
	return ids
}

// TestUIGuards: no session, a tampered cookie, a missing CSRF token, or
// another store's card all fail, and none sends a decision.
func TestUIGuards(t *testing.T) {
	u := newUI(t, 0)
	u.request(t, "guards", "c1", 40)
	id := workflows.WorkflowID("guards", "c1")
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := anon.Get(u.URL + "/cards/" + id)
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?next=") {
		t.Fatalf("no session: %v %v", err, resp.StatusCode)
	}
	ama := u.signIn(t, "ama")
	var cookie *http.Cookie
	for _, c := range ama.c.Jar.Cookies(mustURL(u.URL)) {
		if c.Name == approvals.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	// A cookie is a random ID: any other value, or one a byte off, is no session.
	raw, _ := base64.RawURLEncoding.DecodeString(cookie.Value)
	raw[0] ^= 1
	for _, v := range []string{base64.RawURLEncoding.EncodeToString(raw), "kofi", cookie.Value + "x"} {
		jar, _ := cookiejar.New(nil)
		jar.SetCookies(mustURL(u.URL), []*http.Cookie{{Name: approvals.SessionCookie, Value: v}})
		tampered := &http.Client{Jar: jar, CheckRedirect: anon.CheckRedirect}
		if resp, _ := tampered.Get(u.URL + "/"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("tampered cookie %q: %d", v, resp.StatusCode)
		}
	}
	resp, _ = ama.c.PostForm(u.URL+"/cards/"+id+"/decision", url.Values{"decision": {"approve"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no CSRF token: %d", resp.StatusCode)
	}
	efua := u.signIn(t, "efua")
	if code, _ := efua.get("/cards/" + id); code != http.StatusNotFound {
		t.Fatalf("efua opening ama's card: %d", code)
	}
	if code, _ := efua.decide(id, signoff.Approve); code != http.StatusNotFound {
		t.Fatalf("efua deciding ama's card: %d", code)
	}
	if n := u.count(t, `SELECT count(*) FROM audit_log WHERE workflow_id = $1 AND event IN ('approved', 'approval_refused')`, id); n != 0 {
		t.Fatalf("%d decisions reached the call", n)
	}
}

func mustURL(s string) *url.URL {
	u, _ := url.Parse(s)
	return u
}

// TestAConfirmationLinkIsItsRequestersAlone: the page an MCP client sends
// a requester to, /cards/<id>/confirm, shows ama her own card with its
// decision and Withdraw; kofi's card, which she approves as its store's
// manager, she may open as a card, never at its confirmation link.
func TestAConfirmationLinkIsItsRequestersAlone(t *testing.T) {
	u := newUI(t, 0)
	if _, err := u.Owner.Exec(context.Background(), `UPDATE vault.credentials SET issuer = $1 WHERE ref IN ('cred-ama', 'cred-kofi')`, u.IdP.URL); err != nil {
		t.Fatal(err)
	}
	u.request(t, "conf", "mine", 40)
	mine := workflows.WorkflowID("conf", "mine")
	first, _, err := workflows.Call(context.Background(), u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "kofis",
		Args:    json.RawMessage(`{"articleId":40211,"quantity":30,"reason":"stockout_risk","storeId":112}`),
		Session: policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(112), SessionID: "s-kofi", ConversationID: "conf", CredentialRef: "cred-kofi"}})
	if err != nil || first.Status != workflows.StatusPendingApproval || first.ApproverRole != mangrove.RoleStoreManager {
		t.Fatalf("kofi's card: %v %+v", err, first)
	}
	ama := u.signIn(t, "ama")
	if code, page := ama.get("/cards/" + mine + workflows.ConfirmSuffix); code != http.StatusOK || !strings.Contains(page, `id="withdraw"`) || !strings.Contains(page, `id="approve"`) {
		t.Fatalf("ama at her own card's confirmation link: %d\n%.600s", code, page)
	}
	if code, page := ama.get("/cards/" + first.IdempotencyKey + workflows.ConfirmSuffix); code != http.StatusForbidden || !strings.Contains(page, `id="not-yours"`) || strings.Contains(page, "Move 30 cases") {
		t.Fatalf("ama at kofi's card's confirmation link: %d\n%.600s", code, page)
	}
	if code, page := ama.get("/cards/" + first.IdempotencyKey); code != http.StatusOK || !strings.Contains(page, `id="approve"`) || strings.Contains(page, `id="withdraw"`) {
		t.Fatalf("ama at kofi's card: %d\n%.600s", code, page)
	}
}
