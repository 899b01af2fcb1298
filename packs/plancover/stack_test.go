package plancover_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/plancover"
	"github.com/toolgate/toolgate/packs/plancover/upstream"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// portal is PlanCover's stand-in and the stack in front of it, with
// Mangrove beside it as make dev runs them.
type portal struct {
	*testenv.Stack
	idp *testenv.IdP
	pc  *upstream.Server
}

func newPortal(t *testing.T) *portal {
	t.Helper()
	set := packs.MustLoad("mangrove,plancover")
	id := testenv.NewIdP(t, "http://127.0.0.1:9")
	pc, pcURL := testenv.PlanCover(t, id.URL)
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, Shapers: set.Shapers, Upstreams: map[string]string{plancover.Name: pcURL},
		Exchange: id.Exchange(), Audiences: map[string]string{plancover.Name: testenv.PlanCoverAudience}})
	return &portal{Stack: s, idp: id, pc: pc}
}

// signIn is a member's sign-in as the MCP server takes it: her client's
// access token verified, exchanged at the provider for a grant, and a
// credential issued by the vault.
func (p *portal) signIn(t *testing.T, user, conversation string) policy.Session {
	t.Helper()
	who, ref, _ := testenv.MCPSignIn(t, p.idp, p.Policy, p.DatabaseURL, user)
	return policy.Session{UserID: who.UserID, Role: who.Role, Resources: who.Resources, SessionID: "s-" + user, ConversationID: conversation, CredentialRef: ref}
}

func (p *portal) call(t *testing.T, id, tool, args string, s policy.Session) workflows.ToolCallResult {
	t.Helper()
	return p.Run(t, workflows.ToolCallInput{Tool: tool, ToolCallID: id, Args: json.RawMessage(args), Session: s})
}

// TestAMembersReadsThroughTheStack: meera, signed in through the MCP path
// with no seeded credential, reads through the worker, the exchanged token
// and PlanCover's stand-in. Each case names the text's rule it holds.
func TestAMembersReadsThroughTheStack(t *testing.T) {
	p := newPortal(t)
	meera := p.signIn(t, "meera", "pc-reads")
	if meera.Role != plancover.RoleMember || !meera.Resources.Holds(plancover.KindPortal, upstream.MeeraFamily) {
		t.Fatalf("meera's sign-in: %+v", meera)
	}

	// "list_my_policies is the entry point ... the only place one comes from."
	r := p.call(t, "1", plancover.ToolListMyPolicies, `{}`, meera)
	if r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), upstream.MeeraFamily) || !strings.Contains(string(r.Result), upstream.MeeraParents) || strings.Contains(string(r.Result), upstream.RaviOwn) {
		t.Fatalf("list_my_policies: %+v", r)
	}
	// A portal_ref left out is the member's first.
	if r := p.call(t, "2", plancover.ToolGetPlanDetails, `{}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "Family Floater Gold") {
		t.Fatalf("get_plan_details of her first portal: %+v", r)
	}
	if r := p.call(t, "3", plancover.ToolGetCoveredBenefits, `{"portal_ref":"`+upstream.MeeraParents+`"}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "Cataract surgery") {
		t.Fatalf("get_covered_benefits of her parents' portal: %+v", r)
	}
	if r := p.call(t, "4", plancover.ToolListPolicyDocuments, `{}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "Section 80D certificate") {
		t.Fatalf("list_policy_documents: %+v", r)
	}

	// "a portal the caller does not hold reports not_found": nothing about
	// whether it exists or whose it is, and PlanCover is never asked.
	reads := p.pc.Reads.Load()
	for i, ref := range []string{upstream.RaviOwn, "PRT-99999"} {
		r := p.call(t, "5"+string(rune('a'+i)), plancover.ToolGetPlanDetails, `{"portal_ref":"`+ref+`"}`, meera)
		if r.Code != policy.CodeResourceScope || !strings.Contains(r.Message, `No portal "`+ref+`" was found`) || strings.Contains(r.Message, upstream.MeeraFamily) {
			t.Fatalf("another's portal %s: %+v", ref, r)
		}
	}
	if p.pc.Reads.Load() != reads {
		t.Fatalf("a portal meera does not hold reached PlanCover")
	}

	// "Either a claim number or an id works for both lookups."
	for i, ref := range []string{"CLM-2026-0042", "88123"} {
		if r := p.call(t, "6"+string(rune('a'+i)), plancover.ToolGetClaimStatus, `{"claim_ref":"`+ref+`"}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "under_review") {
			t.Fatalf("get_claim_status by %s: %+v", ref, r)
		}
		if r := p.call(t, "7"+string(rune('a'+i)), plancover.ToolGetClaimSettlement, `{"claim_ref":"`+ref+`"}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), `"claim_id":88123`) {
			t.Fatalf("get_claim_settlement by %s: %+v", ref, r)
		}
	}
	// "PlanCover scopes claims to the member's own token upstream": ravi's
	// claim, by number, is not found for meera.
	if r := p.call(t, "8", plancover.ToolGetClaimStatus, `{"claim_ref":"CLM-2026-0107"}`, meera); r.Code != policy.CodeUpstreamError || !strings.Contains(r.Message, "no such claim") {
		t.Fatalf("ravi's claim, asked by meera: %+v", r)
	}
	if r := p.call(t, "9", plancover.ToolListMyClaims, `{}`, meera); r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "CLM-2025-1977") || strings.Contains(string(r.Result), "CLM-2026-0107") {
		t.Fatalf("list_my_claims: %+v", r)
	}
}

// TestASignedOutMemberIsAskedToSignInFirst (the text's "The order is
// load-bearing"): a caller with no sign-in asking about a portal, her own
// or anyone's, is told to sign in and the call waits for it, never told
// "not found": the credential check comes before ownership.
func TestASignedOutMemberIsAskedToSignInFirst(t *testing.T) {
	p := newPortal(t)
	out := policy.Session{UserID: "meera", Role: plancover.RoleMember, SessionID: "s-out", ConversationID: "pc-out"}
	for i, ref := range []string{upstream.RaviOwn, upstream.MeeraFamily, "PRT-99999"} {
		first := p.First(t, workflows.ToolCallInput{Tool: plancover.ToolGetPlanDetails, ToolCallID: string(rune('a' + i)), Args: json.RawMessage(`{"portal_ref":"` + ref + `"}`), Session: out})
		if first.Status != workflows.StatusAwaitingSignIn || first.Code != policy.CodeCredentialUnavailable || strings.Contains(first.Message, "not found") || strings.Contains(first.Message, "was found") {
			t.Fatalf("signed out, portal %s: %+v", ref, first)
		}
	}
}

// TestTheHospitalSearchThroughTheStack (the text's "re-ranks — exact pin,
// then city, then district — and cuts to ten", "never truncated
// mid-record" and "a regional list rather than an exhaustive one"):
// PlanCover answers 250 records whatever it is asked; the model gets the
// ten nearest, the exact pin code's first, whole, under the cap, with no
// desk's mobile number; and neither a pin code nor a city is
// invalid_arguments before any search.
func TestTheHospitalSearchThroughTheStack(t *testing.T) {
	p := newPortal(t)
	meera := p.signIn(t, "meera", "pc-hospitals")
	r := p.call(t, "1", plancover.ToolFindNetworkHospitals, `{"pin_code":"`+upstream.NearPin+`"}`, meera)
	if r.Status != workflows.StatusExecuted {
		t.Fatalf("find_network_hospitals: %+v", r)
	}
	var got plancover.Hospitals
	if err := json.Unmarshal(r.Result, &got); err != nil {
		t.Fatalf("the result does not read whole: %v\n%s", err, r.Result)
	}
	if len(got.Hospitals) != plancover.MaxHospitals || got.Hospitals[0].Name != "Sakra Hospital" || got.Hospitals[2].PinCode != upstream.NearPin ||
		got.Hospitals[3].City != "Bengaluru" || !strings.Contains(got.Note, "not exhaustive") || len([]rune(string(r.Result))) > 4000 {
		t.Fatalf("the hospitals near %s: %s", upstream.NearPin, r.Result)
	}
	for _, h := range got.Hospitals {
		if h.Name == "" || h.Address == "" || h.PinCode == "" {
			t.Fatalf("a record cut apart: %s", r.Result)
		}
	}
	city := p.call(t, "2", plancover.ToolFindNetworkHospitals, `{"city":"`+upstream.NearCity+`"}`, meera)
	if !strings.Contains(string(city.Result), `"city":"`+upstream.NearCity+`"`) || strings.Contains(string(city.Result), "Hubballi") {
		t.Fatalf("the hospitals in %s: %s", upstream.NearCity, city.Result)
	}
	reads := p.pc.Reads.Load()
	if r := p.call(t, "3", plancover.ToolFindNetworkHospitals, `{}`, meera); r.Code != policy.CodeInvalidArguments || p.pc.Reads.Load() != reads {
		t.Fatalf("neither a pin code nor a city: %+v", r)
	}
	noMobile(t, p, "pc-hospitals")
}

// TestTheKnowledgeSearch (the text's "It needs no credential", "It takes
// no filters either ... the caller's company scope is built from
// AuthContext, never from the model", "A dead
// index is reported as upstream_unavailable with an explicit instruction
// not to answer from memory", and "a member who typed their mobile number
// into a free-text field put one there, and this is where it stops"): it
// runs signed out; a mobile number in the query reaches neither PlanCover,
// the result nor the audit log; a dead index says not to answer from memory.
func TestTheKnowledgeSearch(t *testing.T) {
	p := newPortal(t)
	out := policy.Session{UserID: "meera", Role: plancover.RoleMember, SessionID: "s-k", ConversationID: "pc-knowledge"}
	r := p.call(t, "1", plancover.ToolSearchPolicyKnowledge, `{"query":"cataract waiting period, call me on +91 98450 77123"}`, out)
	if r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), "24 months") {
		t.Fatalf("the knowledge search, signed out: %+v", r)
	}
	if q, _ := p.pc.Queries(); len(q) != 1 || strings.Contains(q[0], "77123") || !strings.Contains(q[0], "cataract") {
		t.Fatalf("what PlanCover was asked: %q", q)
	}
	// Signed in, the search still runs as no one: meera's token is not
	// exchanged for it, and none is sent.
	meera := p.signIn(t, "meera", "pc-knowledge")
	if r := p.call(t, "1b", plancover.ToolSearchPolicyKnowledge, `{"query":"cashless treatment"}`, meera); r.Status != workflows.StatusExecuted {
		t.Fatalf("the knowledge search, signed in: %+v", r)
	}
	if q, bearers := p.pc.Queries(); len(q) != 2 || bearers != 0 {
		t.Fatalf("PlanCover got %d knowledge searches, %d of them with a token", len(q), bearers)
	}
	// "the caller's company scope is built from AuthContext, never from the
	// model": meera's sign-in names her employer, whose group wording the
	// search then finds; a session naming none finds the common wordings
	// alone; and the model cannot name a company.
	if !meera.Resources.Holds(plancover.KindCompany, upstream.GroupCompany) {
		t.Fatalf("meera's sign-in names no company: %+v", meera.Resources)
	}
	if r := p.call(t, "1c", plancover.ToolSearchPolicyKnowledge, `{"query":"waiting period"}`, meera); !strings.Contains(string(r.Result), "ACME group wording") {
		t.Fatalf("meera's search, scoped to her company: %+v", r)
	}
	if r := p.call(t, "1d", plancover.ToolSearchPolicyKnowledge, `{"query":"waiting period"}`, out); r.Status != workflows.StatusExecuted || strings.Contains(string(r.Result), "ACME") {
		t.Fatalf("a search with no company: %+v", r)
	}
	if r := p.call(t, "1e", plancover.ToolSearchPolicyKnowledge, `{"query":"waiting period","company":"ACME"}`, out); r.Code != policy.CodeInvalidArguments {
		t.Fatalf("a company named by the model: %+v", r)
	}
	p.pc.SetIndexDown(true)
	r = p.call(t, "2", plancover.ToolSearchPolicyKnowledge, `{"query":"maternity"}`, out)
	if r.Code != policy.CodeUpstreamUnavailable || !strings.Contains(r.Message, "Do not answer from memory") || strings.Contains(r.Message, "Call again in a minute") {
		t.Fatalf("a dead index: %+v", r)
	}
	noMobile(t, p, "pc-knowledge")
}

// noMobile: no audit row of the conversation holds a mobile number's
// digits, in its args, message or result.
func noMobile(t *testing.T, p *portal, conversation string) {
	t.Helper()
	rows, err := p.Owner.Query(context.Background(), `SELECT coalesce(args::text, '') || ' ' || coalesce(message, '') || ' ' || coalesce(result::text, '') FROM audit_log WHERE conversation_id = $1`, conversation)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(texts) == 0 {
		t.Fatalf("the audit rows: %v, %d", err, len(texts))
	}
	for _, s := range texts {
		if strings.Contains(s, "98450") || strings.Contains(s, "99860") || strings.Contains(s, "77123") {
			t.Fatalf("a mobile number in the audit log: %s", s)
		}
	}
}
