package northgate_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/northgate"
	"github.com/toolgate/toolgate/packs/northgate/upstream"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// desk is Northgate's stand-in and the whole stack in front of it: the
// demo provider, the worker, and the MCP server a voice agent calls,
// which seals a factor before anything records it.
type desk struct {
	*testenv.Stack
	idp     *testenv.IdP
	bank    *upstream.Server
	url     string
	mcpLogs *observer.ObservedLogs
}

func newDesk(t *testing.T) *desk {
	t.Helper()
	set := packs.MustLoad("mangrove,northgate")
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	id := testenv.NewIdPForMCP(t, "http://127.0.0.1:9", srv.URL)
	bank, bankURL := testenv.Northgate(t, id.URL)
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, Shapers: set.Shapers, Previewers: set.Previewers,
		Upstreams: map[string]string{northgate.Name: bankURL}, Exchange: id.Exchange(),
		Audiences: map[string]string{northgate.Name: testenv.NorthgateAudience}, ApproverIssuers: []string{id.URL}})
	ctx := context.Background()
	verify, err := mcpgate.NewVerifier(ctx, id.URL, testenv.MCPAudience, mcpgate.DefaultClaims(set.Policy), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pool := testenv.ServicePool(t, s.DatabaseURL, "mcp")
	core, logs := observer.New(zap.DebugLevel)
	srv.Config.Handler = (&mcpgate.Server{Temporal: s.Client, TaskQueue: s.TaskQueue, Policy: set.Policy, Verify: verify,
		Credential: mcpgate.VaultCredentials(pool, id.Exchange(), nil), Revoked: mcpgate.VaultRevocations(pool), Seal: mcpgate.VaultSeal(pool),
		Resource: srv.URL + mcpgate.Path, AuthorizationServer: id.URL, Logger: zap.New(core)}).Handler()
	return &desk{Stack: s, idp: id, bank: bank, url: srv.URL, mcpLogs: logs}
}

// line is one conversation: a phone call, which the voice agent names on
// every request (2026-07-28 has no MCP sessions), or, on an earlier
// revision, its MCP session. A redial is a new one.
type line struct {
	t     *testing.T
	cs    *mcp.ClientSession
	d     *desk
	token string
	// meta is sent with every call: on a sessionless line, the
	// conversation it names.
	meta mcp.Meta
}

// dial signs user in at the provider as the MCP client and opens a line.
func (d *desk) dial(t *testing.T, user string) *line {
	t.Helper()
	return d.connect(t, d.signIn(t, user))
}

// connect opens a line with an access token on the SDK's newest
// revision, naming a conversation of its own.
func (d *desk) connect(t *testing.T, token string) *line {
	t.Helper()
	l := d.open(t, token, "")
	l.meta = mcp.Meta{mcpgate.ConversationMeta: "line." + strings.ToLower(rand.Text())}
	return l
}

// open connects with an access token on revision (the SDK's newest when
// empty).
func (d *desk) open(t *testing.T, token, revision string) *line {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "northgate-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: d.url + mcpgate.Path, HTTPClient: testenv.Bearer(token)},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &line{t: t, cs: cs, d: d, token: token}
}

// session signs user in and opens an MCP session (2025-11-25), which is
// the line's conversation.
func (d *desk) session(t *testing.T, user string) *line {
	t.Helper()
	l := d.open(t, d.signIn(t, user), sessionRevision)
	if l.cs.ID() == "" {
		t.Fatal("2025-11-25 opened no MCP session")
	}
	return l
}

// sessionRevision is the newest protocol revision with MCP sessions.
const sessionRevision = "2025-11-25"

// signIn is an access token for user, signed in at the provider as the
// MCP client.
func (d *desk) signIn(t *testing.T, user string) string {
	t.Helper()
	tok, err := idp.SignIn(context.Background(), d.idp.URL, testenv.MCPClientID, d.idp.Users[user], idp.ACRPassword)
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// sessionless signs user in and opens a line on 2026-07-28, which has no
// MCP sessions: every call names conversation (none when empty).
func (d *desk) sessionless(t *testing.T, user, conversation string) *line {
	t.Helper()
	l := d.open(t, d.signIn(t, user), mcpgate.FirstSessionlessRevision)
	if v := l.cs.InitializeResult().ProtocolVersion; v != mcpgate.FirstSessionlessRevision || l.cs.ID() != "" {
		t.Fatalf("a sessionless line got revision %s, session %q", v, l.cs.ID())
	}
	if conversation != "" {
		l.meta = mcp.Meta{mcpgate.ConversationMeta: conversation}
	}
	return l
}

// named is the line's sign-in naming another conversation.
func (l *line) named(conversation string) *line {
	return &line{t: l.t, cs: l.cs, d: l.d, token: l.token, meta: mcp.Meta{mcpgate.ConversationMeta: conversation}}
}

// again is a second conversation on the same sign-in: a new MCP session
// with the same token, so the same credential.
func (l *line) again() *line {
	l.t.Helper()
	if l.meta == nil {
		return l.d.open(l.t, l.token, sessionRevision)
	}
	return l.d.connect(l.t, l.token)
}

// answer is a tools/call's structured result.
type answer struct {
	Status  string          `json:"status"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Result  json.RawMessage `json:"result"`
	Card    string          `json:"card"`
	CallID  string          `json:"callId"`
	text    string
}

func (l *line) call(tool, args string) answer {
	l.t.Helper()
	a, err := l.try(tool, args)
	if err != nil {
		l.t.Fatalf("%s: %v", tool, err)
	}
	return a
}

// try is call for a goroutine: it reports the error instead of failing.
func (l *line) try(tool, args string) (answer, error) {
	r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: maps.Clone(l.meta)})
	if err != nil {
		return answer{}, err
	}
	var a answer
	b, _ := json.Marshal(r.StructuredContent)
	_ = json.Unmarshal(b, &a)
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			a.text += tc.Text
		}
	}
	return a, nil
}

// outcome reads a verification's result.
func (a answer) outcome() activitiesOutcome {
	var o activitiesOutcome
	_ = json.Unmarshal(a.Result, &o)
	return o
}

type activitiesOutcome struct {
	Outcome      string `json:"outcome"`
	HeldTier     string `json:"heldTier"`
	AttemptsLeft *int   `json:"attemptsLeft"`
	Handoff      bool   `json:"handoff"`
}

// refusal reads a step-up refusal's result.
type refusal struct {
	RequiredTier string `json:"requiredTier"`
	HeldTier     string `json:"heldTier"`
	Factor       string `json:"factor"`
	VerifyWith   string `json:"verifyWith"`
	Reason       string `json:"reason"`
	LockedOut    bool   `json:"lockedOut"`
}

func (a answer) refusal() refusal {
	var r refusal
	_ = json.Unmarshal(a.Result, &r)
	return r
}

func (l *line) passphrase(said string) answer {
	l.t.Helper()
	b, _ := json.Marshal(map[string]string{"passphrase": said})
	return l.call(northgate.ToolVerifyPassphrase, string(b))
}

func (l *line) code(said string) answer {
	l.t.Helper()
	b, _ := json.Marshal(map[string]string{"code": said})
	return l.call(northgate.ToolVerifyOneTimeCode, string(b))
}

// danaCode is the one-time code dana's app shows now.
func (d *desk) danaCode(t *testing.T) string {
	t.Helper()
	c, err := d.bank.Code(upstream.Dana, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stepUpTo raises the line's caller to tier with their right factors.
func (d *desk) stepUpTo(t *testing.T, l *line, tier string) {
	t.Helper()
	if tier == northgate.TierMedium || tier == northgate.TierHigh {
		if a := l.passphrase(upstream.DanaPassphrase); a.outcome().Outcome != "passed" {
			t.Fatalf("the right passphrase: %+v", a)
		}
	}
	if tier == northgate.TierHigh {
		if a := l.code(d.danaCode(t)); a.outcome().Outcome != "passed" || a.outcome().HeldTier != northgate.TierHigh {
			t.Fatalf("the right one-time code: %+v", a)
		}
	}
}

// refusedFor asserts a call was refused for its tier, telling the model
// the tiers, the factor and the reason, and nothing of the action.
func refusedFor(t *testing.T, what string, a answer, need, held string) {
	t.Helper()
	r := a.refusal()
	if a.Status != "denied" || a.Code != string(policy.CodeStepUpRequired) || r.RequiredTier != need || r.HeldTier != held || r.LockedOut {
		t.Fatalf("%s: want step_up_required needing %s holding %s, got %+v %s", what, need, held, a, a.Result)
	}
	if r.Factor == "" || r.VerifyWith == "" || r.Reason == "" || !strings.Contains(a.Message, r.Factor) {
		t.Fatalf("%s: the refusal must name the factor, the tool and the reason: %+v", what, a)
	}
	noAction(t, what, a)
}

// noAction asserts nothing of the action came back: no reference,
// dispatch flag, delivery estimate, address, balance or bill.
func noAction(t *testing.T, what string, a answer) {
	t.Helper()
	all := string(a.Result) + a.Message + a.text + a.Card
	for _, leak := range []string{"reference", "dispatched", "deliveryEstimate", "postedTo", "RC-", upstream.DanaAddress, "Harbour", "balancePence", "bill", "amountPence", "4471"} {
		if strings.Contains(all, leak) {
			t.Fatalf("%s: the refusal carries %q: %s", what, leak, all)
		}
	}
}

// args is a register row's example call.
func args(t *testing.T, tool string) string {
	t.Helper()
	for _, s := range northgate.Tools() {
		if s.Name == tool {
			return s.Example
		}
	}
	t.Fatalf("no tool %s", tool)
	return ""
}

// TestEveryRowRefusesBelowItsTier is the text's generated test: every
// row of the register, read from the table, is called by a caller holding
// each tier below its own (signed in, then with the passphrase) and must
// refuse without doing anything; a new row joins the day it is added. The
// verification tools themselves are the rows that raise the tier, and are
// driven in the probes below.
func TestEveryRowRefusesBelowItsTier(t *testing.T) {
	d := newDesk(t)
	rank := northgate.Policy().Verification.Rank
	high := 0
	for _, r := range northgate.Register {
		if r.Verified == northgate.TierHigh {
			high++
		}
	}
	if high == 0 {
		t.Fatal("no HIGH actions declared: the table is wrong")
	}
	for _, held := range []string{northgate.TierLow, northgate.TierMedium} {
		l := d.dial(t, upstream.Dana)
		d.stepUpTo(t, l, held)
		for _, r := range northgate.Register {
			if rank(r.Verified) <= rank(held) || r.Tool == northgate.ToolVerifyOneTimeCode {
				continue
			}
			asked := d.bank.Asked.Load()
			a := l.call(r.Tool, args(t, r.Tool))
			refusedFor(t, r.Tool+" at "+held, a, r.Verified, held)
			// The factor asked for is one the caller may give now.
			if want := map[string]string{northgate.TierLow: northgate.FactorPassphrase, northgate.TierMedium: northgate.FactorOneTimeCode}[held]; a.refusal().Factor != want {
				t.Fatalf("%s at %s asks for %q, want %q", r.Tool, held, a.refusal().Factor, want)
			}
			if d.bank.Asked.Load() != asked {
				t.Fatalf("%s at %s reached the bank", r.Tool, held)
			}
		}
	}
	// At its tier, each row does what it does.
	l := d.dial(t, upstream.Dana)
	d.stepUpTo(t, l, northgate.TierHigh)
	for _, r := range northgate.Register {
		if r.Tool == northgate.ToolVerifyPassphrase || r.Tool == northgate.ToolVerifyOneTimeCode {
			continue
		}
		a := l.call(r.Tool, args(t, r.Tool))
		want := "executed"
		if r.Decision == policy.DecisionApprove {
			want = "pending_approval"
		}
		if a.Status != want {
			t.Fatalf("%s at high: want %s, got %+v", r.Tool, want, a)
		}
	}
}

// TestASignedOutCallerIsAskedToSignIn: at none (no sign-in), a row that
// needs the caller is not run; the call waits for a sign-in and discloses
// nothing. A call with no context at all is refused before any tier.
func TestASignedOutCallerIsAskedToSignIn(t *testing.T) {
	d := newDesk(t)
	out := policy.Session{UserID: upstream.Dana, Role: northgate.RoleCaller, SessionID: "s-out", ConversationID: "ng-out"}
	for i, r := range northgate.Register {
		if r.Verified == northgate.TierNone {
			continue
		}
		first := d.First(t, workflows.ToolCallInput{Tool: r.Tool, ToolCallID: "out" + string(rune('a'+i)), Args: json.RawMessage(args(t, r.Tool)), Session: out})
		if first.Status != workflows.StatusAwaitingSignIn || first.Code != policy.CodeCredentialUnavailable {
			t.Fatalf("%s signed out: %+v", r.Tool, first)
		}
	}
	for i, s := range []policy.Session{{SessionID: "s", ConversationID: "ng-none"}, {UserID: upstream.Dana, SessionID: "s", ConversationID: "ng-norole"}} {
		r := d.Run(t, workflows.ToolCallInput{Tool: northgate.ToolReissueCard, ToolCallID: "ctx" + string(rune('a'+i)), Args: json.RawMessage(`{"reason":"lost"}`), Session: s})
		if r.Status == workflows.StatusExecuted || r.Status == workflows.StatusPendingApproval {
			t.Fatalf("a call with no context: %+v", r)
		}
	}
	for _, action := range []string{"close_account", ""} {
		r := d.Run(t, workflows.ToolCallInput{Tool: action, ToolCallID: "unknown", Args: json.RawMessage(`{}`),
			Session: policy.Session{UserID: upstream.Dana, Role: northgate.RoleCaller, SessionID: "s", ConversationID: "ng-unknown" + action}})
		if r.Code != policy.CodeUnknownTool {
			t.Fatalf("action %q: %+v", action, r)
		}
	}
	if n := d.bank.Asked.Load(); n != 0 {
		t.Fatalf("the bank was asked %d times", n)
	}
}

// lockedOut asserts a call was refused for a lockout: nothing to ask the
// caller for, a person to hand them to, and nothing of the action.
func lockedOut(t *testing.T, what string, a answer) {
	t.Helper()
	r := a.refusal()
	if a.Status != "denied" || a.Code != string(policy.CodeStepUpRequired) || !r.LockedOut || r.HeldTier != northgate.TierNone || r.Factor != "" || !strings.Contains(a.Message, "hands them back") {
		t.Fatalf("%s: want a lockout refusal, got %+v %s", what, a, a.Result)
	}
	noAction(t, what, a)
}

// handBack is a person ending dana's lockout (hand_back_caller).
func (d *desk) handBack(t *testing.T, by string) {
	t.Helper()
	var done bool
	if err := d.Owner.QueryRow(context.Background(), `SELECT hand_back_caller($1, issuer, subject, $2, 'verified in branch') FROM caller_verification WHERE pack = $1`,
		northgate.Name, by).Scan(&done); err != nil || !done {
		t.Fatalf("hand back: %v %v", done, err)
	}
}

// TestTheFirstProbe is the text's first probe through the real stack:
// dana gives her passphrase and hears her balance, fails the one-time code
// twice, and is locked out. Then the card and the balance refuse, and the
// correct passphrase and the correct code, on every path that could grant
// a tier, grant nothing and never reach the bank; a redial gets no fresh
// budget; only a person's hand-back lets her verify again.
func TestTheFirstProbe(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	d.stepUpTo(t, l, northgate.TierMedium)
	if a := l.call(northgate.ToolGetBalance, `{}`); a.Status != "executed" || !strings.Contains(string(a.Result), "balancePence") {
		t.Fatalf("get_balance at medium: %+v", a)
	}
	if a := l.code("000000"); a.outcome().Outcome != "retry" || a.outcome().AttemptsLeft == nil || *a.outcome().AttemptsLeft != 1 || a.outcome().HeldTier != northgate.TierMedium {
		t.Fatalf("the first wrong code: %+v %s", a, a.Result)
	}
	if a := l.code("444444"); a.outcome().Outcome != "locked_out" || !a.outcome().Handoff || a.outcome().HeldTier != northgate.TierNone {
		t.Fatalf("the second wrong code: %+v %s", a, a.Result)
	}
	lockedOut(t, "reissue_card after the lockout", l.call(northgate.ToolReissueCard, `{"reason":"captured"}`))
	lockedOut(t, "get_balance after the lockout", l.call(northgate.ToolGetBalance, `{}`))

	asked := len(d.bank.Factors())
	lockedOut(t, "the correct passphrase after the lockout", l.passphrase(upstream.DanaPassphrase))
	lockedOut(t, "get_balance after the correct passphrase", l.call(northgate.ToolGetBalance, `{}`))
	lockedOut(t, "reissue_card after the correct passphrase", l.call(northgate.ToolReissueCard, `{"reason":"captured"}`))
	lockedOut(t, "the correct code after the lockout", l.code(d.danaCode(t)))
	lockedOut(t, "freeze_card after the lockout", l.call(northgate.ToolFreezeCard, `{}`))

	// A redial is a new conversation for the same person: no fresh budget.
	again := d.dial(t, upstream.Dana)
	lockedOut(t, "the correct passphrase on a redial", again.passphrase(upstream.DanaPassphrase))
	lockedOut(t, "get_balance on a redial", again.call(northgate.ToolGetBalance, `{}`))
	if n := len(d.bank.Factors()); n != asked {
		t.Fatalf("a locked-out caller's factors reached the bank: %d after the lockout", n-asked)
	}
	// Public information stays public.
	if a := again.call(northgate.ToolGetBranchHours, `{"branch":"Leeds"}`); a.Status != "executed" {
		t.Fatalf("get_branch_hours while locked out: %+v", a)
	}

	d.handBack(t, "imogen")
	back := d.dial(t, upstream.Dana)
	d.stepUpTo(t, back, northgate.TierMedium)
	if a := back.call(northgate.ToolGetBalance, `{}`); a.Status != "executed" {
		t.Fatalf("get_balance after the hand-back: %+v", a)
	}
}

// TestTheSecondProbe is the text's second probe: the passphrase itself
// locked out, then wrong answers that change nothing, then the correct
// passphrase, which grants nothing: the balance still refuses.
func TestTheSecondProbe(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	if a := l.passphrase("harbour light"); a.outcome().Outcome != "retry" || a.outcome().HeldTier != northgate.TierLow {
		t.Fatalf("wrong passphrase 1: %+v %s", a, a.Result)
	}
	if a := l.passphrase("harbor lights!"); a.outcome().Outcome != "locked_out" || !a.outcome().Handoff {
		t.Fatalf("wrong passphrase 2: %+v %s", a, a.Result)
	}
	asked := len(d.bank.Factors())
	for i := 3; i <= 6; i++ {
		lockedOut(t, "wrong passphrase "+string(rune('0'+i)), l.passphrase("guess "+string(rune('0'+i))))
	}
	lockedOut(t, "the correct passphrase", l.passphrase(upstream.DanaPassphrase))
	lockedOut(t, "get_balance", l.call(northgate.ToolGetBalance, `{}`))
	lockedOut(t, "get_recent_bill", l.call(northgate.ToolGetRecentBill, `{}`))
	if n := len(d.bank.Factors()); n != asked {
		t.Fatalf("%d factors reached the bank after the lockout", n-asked)
	}
}

// records is everything the stack kept of the calls: each call's history
// (as stored, and each payload decrypted), every audit row and caller
// table row, the sealed factors still waiting, and the worker's and the
// MCP server's log lines.
func (d *desk) records(t *testing.T, callIDs []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, id := range callIDs {
		iter := d.Client.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := protojson.Marshal(ev)
			out = append(out, string(b))
			var payloads []*commonpb.Payload
			payloads = append(payloads, ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()...)
			payloads = append(payloads, ev.GetActivityTaskScheduledEventAttributes().GetInput().GetPayloads()...)
			payloads = append(payloads, ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()...)
			payloads = append(payloads, ev.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()...)
			payloads = append(payloads, ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetArgs().GetPayloads()...)
			payloads = append(payloads, ev.GetWorkflowExecutionUpdateCompletedEventAttributes().GetOutcome().GetSuccess().GetPayloads()...)
			for _, m := range ev.GetMarkerRecordedEventAttributes().GetDetails() {
				payloads = append(payloads, m.GetPayloads()...)
			}
			plain, err := testenv.Codec.Decode(payloads)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range plain {
				out = append(out, string(p.Data))
			}
		}
	}
	for _, q := range []string{`SELECT a::text FROM audit_log a`, `SELECT c::text FROM caller_verification c`, `SELECT c::text FROM caller_tiers c`, `SELECT f::text FROM vault.sealed_factors f`} {
		rows, err := d.Owner.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, texts...)
	}
	for _, e := range append(d.Logs.All(), d.mcpLogs.All()...) {
		b, _ := json.Marshal(e.ContextMap())
		out = append(out, e.Message+string(b))
	}
	return out
}

// TestAFactorReachesNoRecord is the text's payload test, on the tools
// that receive the spoken factor, across pass, retry and lockout: the
// bank gets each factor as said, and no history, log line, audit row or
// result holds one in the clear; nothing sealed is left waiting.
func TestAFactorReachesNoRecord(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	code := d.danaCode(t)
	said := []string{"pelican sunrise", upstream.DanaPassphrase, "918273", "564738"}
	var answers []answer
	for i, a := range []answer{l.passphrase(said[0]), l.passphrase(said[1]), l.code(said[2]), l.code(said[3]), l.passphrase(said[1]), l.code(code)} {
		want := []string{"retry", "passed", "retry", "locked_out", "", ""}[i]
		if want != "" && a.outcome().Outcome != want {
			t.Fatalf("verification %d: want %s, got %+v %s", i, want, a, a.Result)
		}
		answers = append(answers, a)
	}
	// Any other shape is refused at the MCP server, before anything
	// records it: another spelling, another key beside it, not a string.
	other := "marram grass"
	for _, args := range []string{`{"Passphrase":"` + other + `"}`, `{"passphrase":"` + other + `","note":"` + other + `"}`, `{"one_time_code":"` + other + `"}`, `["` + other + `"]`} {
		r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: northgate.ToolVerifyPassphrase, Arguments: json.RawMessage(args), Meta: maps.Clone(l.meta)})
		if err != nil || !r.IsError || r.StructuredContent != nil || len(r.Content) != 1 {
			t.Fatalf("verify_passphrase %s: %v %+v", args, err, r)
		}
		if text, _ := r.Content[0].(*mcp.TextContent); text == nil || !strings.Contains(text.Text, `takes one field, "passphrase"`) {
			t.Fatalf("verify_passphrase %s is refused for another reason: %+v", args, r.Content[0])
		}
	}
	var ids []string
	for _, a := range answers {
		ids = append(ids, a.CallID)
	}
	var started int
	if err := d.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE NOT workflow_id = ANY($1)`, ids).Scan(&started); err != nil || started != 0 {
		t.Fatalf("the refused shapes wrote %d audit rows (%v): the MCP server let them start a call", started, err)
	}
	said = append(said, other)
	if got := d.bank.Factors(); len(got) != 4 || got[0] != said[0] || got[1] != said[1] || got[2] != said[2] || got[3] != said[3] {
		t.Fatalf("the bank was asked %q, want %q", got, said)
	}
	for _, a := range answers {
		for _, s := range append(said, code) {
			if strings.Contains(string(a.Result)+a.Message+a.text, s) {
				t.Fatalf("a result holds the factor %q: %+v", s, a)
			}
		}
	}
	records := d.records(t, ids)
	if len(records) < 50 {
		t.Fatalf("only %d records read: the payload test reads nothing", len(records))
	}
	for _, r := range records {
		for _, s := range append(said, code) {
			if strings.Contains(r, s) {
				t.Fatalf("a record holds the factor %q: %.400s", s, r)
			}
		}
		if strings.Contains(r, `"sf_`) && strings.Contains(r, "vault") {
			t.Fatalf("a sealed factor is left waiting: %.200s", r)
		}
	}
}

// decide signs imogen's (card operations) decision on a card.
func (d *desk) decide(t *testing.T, a answer, decision string) workflows.ToolCallResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var st workflows.Status
	v, err := d.Client.QueryWorkflow(ctx, a.CallID, "", workflows.StatusQuery)
	if err != nil || v.Get(&st) != nil {
		t.Fatalf("status of %s: %v", a.CallID, err)
	}
	imogen := policy.Identity{UserID: "imogen", Role: northgate.RoleCardOps, Resources: policy.Resources{northgate.KindAccount: {upstream.DanaAccount, upstream.LewisAccount}}}
	if err := workflows.SendDecision(ctx, d.Client, a.CallID, signoff.Approval{Decision: decision, ArgsHash: st.ArgsHash, Approver: imogen, Evidence: testenv.Evidence("imogen", time.Now())}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	var res workflows.ToolCallResult
	if err := d.Client.GetWorkflow(ctx, a.CallID, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// keyed is a call with an idempotency key: its conversation is the
// person's, whichever session makes it.
func (l *line) keyed(tool, args, key string) answer {
	l.t.Helper()
	meta := mcp.Meta{mcpgate.IdempotencyKeyMeta: key}
	maps.Copy(meta, l.meta)
	r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
	if err != nil {
		l.t.Fatalf("%s: %v", tool, err)
	}
	var a answer
	b, _ := json.Marshal(r.StructuredContent)
	_ = json.Unmarshal(b, &a)
	return a
}

// TestASessionlessLineNamesItsConversation: on 2026-07-28 there are no
// MCP sessions, so a tier is held by the conversation the client names in
// _meta, on the sign-in that earned it. A verification that names none is
// refused before the factor is sealed; another
// conversation of the same sign-in holds low; two people naming the same
// conversation and key make two calls.
func TestASessionlessLineNamesItsConversation(t *testing.T) {
	d := newDesk(t)
	unnamed := d.sessionless(t, upstream.Dana, "")
	if a := unnamed.passphrase(upstream.DanaPassphrase); a.Status != "" || !strings.Contains(a.text, mcpgate.ConversationMeta) {
		t.Fatalf("a sessionless passphrase naming no conversation: %+v", a)
	}
	line := unnamed.named("call.7781")
	if a := line.passphrase(upstream.DanaPassphrase); a.outcome().Outcome != "passed" {
		t.Fatalf("the passphrase on a named conversation: %+v %s", a, a.Result)
	}
	if a := line.call(northgate.ToolGetBalance, `{}`); a.Status != "executed" {
		t.Fatalf("the balance in the conversation that earned medium: %+v", a)
	}
	refusedFor(t, "the balance in another conversation", unnamed.named("call.7782").call(northgate.ToolGetBalance, `{}`), northgate.TierMedium, northgate.TierLow)
	refusedFor(t, "the balance naming none", unnamed.call(northgate.ToolGetBalance, `{}`), northgate.TierMedium, northgate.TierLow)
	lewis := d.sessionless(t, upstream.Lewis, "call.7781")
	danas, lewiss := line.keyed(northgate.ToolGetBranchHours, `{"branch":"Leeds"}`, "hours.1"), lewis.keyed(northgate.ToolGetBranchHours, `{"branch":"York"}`, "hours.1")
	if danas.Status != "executed" || lewiss.Status != "executed" || danas.CallID == lewiss.CallID || !strings.Contains(string(lewiss.Result), "York") {
		t.Fatalf("two people naming one conversation and key: %+v and %+v", danas, lewiss)
	}
	refusedFor(t, "lewis's balance in a conversation of the same name", lewis.call(northgate.ToolGetBalance, `{}`), northgate.TierMedium, northgate.TierLow)
}

// TestATierIsOneSignInsOnKeyedCalls: calls with idempotency keys share the
// person's conversation across sessions, but a tier earned there is held
// by the sign-in that earned it alone: a second sign-in (a redial, or a
// stolen token's new session) holds low.
func TestATierIsOneSignInsOnKeyedCalls(t *testing.T) {
	d := newDesk(t)
	// Keyed calls naming no conversation share the person's one; calls
	// naming the same conversation share it too: either way only the
	// sign-in tells the two lines apart.
	for _, conversation := range []string{"", "call.4410"} {
		first := d.sessionless(t, upstream.Dana, conversation)
		if a := first.keyed(northgate.ToolVerifyPassphrase, `{"passphrase":"`+upstream.DanaPassphrase+`"}`, "v.1"+conversation); a.outcome().Outcome != "passed" {
			t.Fatalf("a keyed passphrase in %q: %+v", conversation, a)
		}
		if a := first.keyed(northgate.ToolGetBalance, `{}`, "b.1"+conversation); a.Status != "executed" {
			t.Fatalf("a keyed balance on the same sign-in in %q: %+v", conversation, a)
		}
		time.Sleep(1100 * time.Millisecond) // a sign-in of its own: another auth_time
		second := d.sessionless(t, upstream.Dana, conversation)
		refusedFor(t, "a keyed balance on another sign-in in "+conversation, second.keyed(northgate.ToolGetBalance, `{}`, "b.2"+conversation), northgate.TierMedium, northgate.TierLow)
	}
}

// TestAReissueGoesToCardOperations: at high, reissue_card puts a card up
// for card operations, built from the dry run: the card and the registered
// address, which no arg can name. It runs once when approved, and its
// reference comes back only then.
func TestAReissueGoesToCardOperations(t *testing.T) {
	d := newDesk(t)
	for _, s := range northgate.Policy().Tools {
		if s.Name == northgate.ToolReissueCard {
			for _, f := range []string{"address", "deliveryAddress", "delivery_address"} {
				if _, ok := s.Args.FieldByName(f); ok {
					t.Fatalf("reissue_card takes an address field %q", f)
				}
			}
		}
	}
	l := d.session(t, upstream.Dana)
	// An address from the model is no arg of the tool: refused, nothing up.
	if a := l.call(northgate.ToolReissueCard, `{"reason":"captured","deliveryAddress":"40 Somewhere Lane"}`); a.Code != string(policy.CodeInvalidArguments) {
		t.Fatalf("an address from the model: %+v", a)
	}
	d.stepUpTo(t, l, northgate.TierHigh)
	// A tier is earned in one conversation: a second line holds only low.
	refusedFor(t, "get_balance on another line", l.again().call(northgate.ToolGetBalance, `{}`), northgate.TierMedium, northgate.TierLow)
	a := l.call(northgate.ToolReissueCard, `{"reason":"captured"}`)
	if a.Status != "pending_approval" || !strings.Contains(a.Card, "ending 4471") || !strings.Contains(a.Card, upstream.DanaAddress) || strings.Contains(string(a.Result), "RC-") {
		t.Fatalf("the reissue's card: %+v", a)
	}
	var role string
	if err := d.Owner.QueryRow(context.Background(), `SELECT approver_role FROM pending_action WHERE workflow_id = $1`, a.CallID).Scan(&role); err != nil || role != string(northgate.RoleCardOps) {
		t.Fatalf("the card goes to %q (%v), want card operations", role, err)
	}
	res := d.decide(t, a, signoff.Approve)
	if res.Status != workflows.StatusExecuted || !strings.Contains(string(res.Result), "RC-") {
		t.Fatalf("the approved reissue: %+v", res)
	}
	if got := d.bank.Reissues(); len(got) != 1 || got[a.CallID] == "" {
		t.Fatalf("the bank posted %v, want one card under the call's key", got)
	}
}

// TestALockoutAfterTheCardRefusesTheRun: a card that went up at high is
// approved after the caller locked themselves out; the run is refused on
// the line before the side effect, and no card is posted.
func TestALockoutAfterTheCardRefusesTheRun(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	d.stepUpTo(t, l, northgate.TierHigh)
	a := l.call(northgate.ToolReissueCard, `{"reason":"stolen"}`)
	if a.Status != "pending_approval" {
		t.Fatalf("the reissue: %+v", a)
	}
	other := d.dial(t, upstream.Dana)
	other.passphrase("wrong once")
	if o := other.passphrase("wrong twice"); o.outcome().Outcome != "locked_out" {
		t.Fatalf("the lockout: %+v", o)
	}
	res := d.decide(t, a, signoff.Approve)
	if res.Status != workflows.StatusFailed || res.Code != policy.CodeStepUpRequired || strings.Contains(string(res.Result), "RC-") {
		t.Fatalf("the approved card of a locked-out caller: %+v", res)
	}
	if got := d.bank.Reissues(); len(got) != 0 {
		t.Fatalf("the bank posted %v", got)
	}
}

// TestGuessesAtOnceShareOneBudget: wrong passphrases sent together, each
// admitted before any is judged, still reach the bank at most the budget's
// number of times: each spends its attempt before the bank is asked.
func TestGuessesAtOnceShareOneBudget(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	// A slow bank: every guess is admitted and in flight before any is judged.
	d.bank.SetVerifyDelay(time.Second)
	const guesses = 6
	done := make(chan answer, guesses)
	for i := range guesses {
		go func() {
			b, _ := json.Marshal(map[string]string{"passphrase": "guess " + string(rune('a'+i))})
			a, _ := l.try(northgate.ToolVerifyPassphrase, string(b))
			done <- a
		}()
	}
	for range guesses {
		<-done
	}
	if n := len(d.bank.Factors()); n > policy.DefaultVerificationBudget {
		t.Fatalf("%d guesses at once reached the bank; the budget is %d", n, policy.DefaultVerificationBudget)
	}
	d.bank.SetVerifyDelay(0)
	lockedOut(t, "the right passphrase after the guesses", l.passphrase(upstream.DanaPassphrase))

	// One miss, then the right answer sent twice at once: one is checked,
	// the other waits its turn; nobody is locked out.
	lewis := d.dial(t, upstream.Lewis)
	if a := lewis.passphrase("copper kettles"); a.outcome().Outcome != "retry" {
		t.Fatalf("lewis's miss: %+v", a)
	}
	twice := make(chan answer, 2)
	for range 2 {
		go func() {
			a, _ := lewis.try(northgate.ToolVerifyPassphrase, `{"passphrase":"`+upstream.LewisPassphrase+`"}`)
			twice <- a
		}()
	}
	passed := 0
	for range 2 {
		switch o := (<-twice).outcome().Outcome; o {
		case "passed":
			passed++
		case "busy":
		default:
			t.Fatalf("the right passphrase sent twice: %s", o)
		}
	}
	if passed == 0 || lewis.call(northgate.ToolGetBalance, `{}`).Status != "executed" {
		t.Fatalf("lewis, right twice after a miss: %d passed", passed)
	}
}

// TestOnlyAPersonEndsALockout: the worker's own connection can neither
// end a lockout nor grant a locked-out person a tier; the database refuses
// both, whatever the code asks.
func TestOnlyAPersonEndsALockout(t *testing.T) {
	d := newDesk(t)
	l := d.dial(t, upstream.Dana)
	l.passphrase("wrong once")
	if a := l.passphrase("wrong twice"); a.outcome().Outcome != "locked_out" {
		t.Fatalf("the lockout: %+v", a)
	}
	worker := testenv.ServicePool(t, d.DatabaseURL, "worker")
	ctx := context.Background()
	if _, err := worker.Exec(ctx, `UPDATE caller_verification SET locked_at = NULL, failures = '{}' WHERE pack = $1`, northgate.Name); err == nil {
		t.Fatal("the worker's role ended a lockout")
	}
	if _, err := worker.Exec(ctx, `INSERT INTO caller_tiers (pack, issuer, subject, conversation_id, credential_ref, factor, tier, workflow_id, expires_at)
		SELECT pack, issuer, subject, 'c', 'cr', 'passphrase', 'medium', 'w', now() + interval '1 hour' FROM caller_verification WHERE pack = $1`, northgate.Name); err == nil {
		t.Fatal("the worker's role granted a locked-out person a tier")
	}
	lockedOut(t, "get_balance", l.call(northgate.ToolGetBalance, `{}`))
}

// TestAFactorSentInTheClearIsRefusedAndWithheld: a client that starts a
// verification call itself, past the MCP server, with the factor in the
// clear, is refused before anything runs, and the audit row keeps the
// factor withheld.
func TestAFactorSentInTheClearIsRefusedAndWithheld(t *testing.T) {
	d := newDesk(t)
	s := policy.Session{UserID: upstream.Dana, Role: northgate.RoleCaller, Resources: policy.Resources{northgate.KindAccount: {upstream.DanaAccount}},
		SessionID: "s-raw", ConversationID: "ng-raw", CredentialRef: "cr_nobody"}
	for _, c := range []struct{ tool, args, factor string }{
		{northgate.ToolVerifyPassphrase, `{"passphrase":"` + upstream.DanaPassphrase + `"}`, upstream.DanaPassphrase},
		{northgate.ToolVerifyOneTimeCode, `{"code":"918273"}`, "918273"},
		{northgate.ToolVerifyOneTimeCode, `{"code":"sealed:sf_00000000000000000000000000000000","Code":"564738"}`, "564738"},
		{northgate.ToolVerifyOneTimeCode, `{"code":"273645"}`, "273645"},
	} {
		who := s
		if c.factor == "273645" {
			who.Role = northgate.RoleCardOps // refused at the role, before the args are read
		}
		r := d.Run(t, workflows.ToolCallInput{Tool: c.tool, ToolCallID: "raw" + c.factor[:4], Args: json.RawMessage(c.args), Session: who})
		if r.Status != workflows.StatusDenied || strings.Contains(r.Message, c.factor) {
			t.Fatalf("%s with the factor in the clear: %+v", c.tool, r)
		}
		var rows []string
		q, err := d.Owner.Query(context.Background(), `SELECT a::text FROM audit_log a WHERE tool = $1`, c.tool)
		if err == nil {
			rows, err = pgx.CollectRows(q, pgx.RowTo[string])
		}
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s: no audit row: %v", c.tool, err)
		}
		for _, row := range rows {
			if strings.Contains(row, c.factor) {
				t.Fatalf("%s: the audit row holds the factor: %s", c.tool, row)
			}
		}
	}
	if len(d.bank.Factors()) != 0 {
		t.Fatal("the factor reached the bank")
	}
}
