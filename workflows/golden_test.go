package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/packs/northgate"
	"github.com/toolgate/toolgate/packs/plancover"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/cost"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
)

const goldenDir = "testdata/golden"

// goldenGeneration names the histories recorded by today's code. Bump it
// with each versioned change to the workflow, so make golden records every
// path again beside the older generations, which keep replaying.
const goldenGeneration = "g14"

// goldenPaths are the paths whose histories are kept: every one must keep
// replaying after any code change, or calls in flight would break.
var goldenPaths = []struct {
	name string
	in   workflows.ToolCallInput
	// decisions are sent once the card is up (their hash filled from it).
	decisions []signoff.Approval
}{
	{"allowed_read", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211}`)}, nil},
	{"executed_task", workflows.ToolCallInput{Tool: "create_task", Args: json.RawMessage(`{"kind":"recount","articleId":40211,"dueBy":"today"}`)}, nil},
	{"denied_unknown_tool", workflows.ToolCallInput{Tool: "constructor", Args: json.RawMessage(`{}`)}, nil},
	{"denied_tool_denied", workflows.ToolCallInput{Tool: "change_price", Args: json.RawMessage(`{"articleId":40211,"newPriceCents":1}`)}, nil},
	{"denied_invalid_arguments", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211,"userId":"kofi"}`)}, nil},
	{"denied_store_scope", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`)}, nil},
	{"failed_upstream_error", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":99999}`)}, nil},
	{"transfer_step_up_refused_then_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":35,"reason":"festival_peak"}`)},
		[]signoff.Approval{{Decision: signoff.Approve, Approver: kofiID, Evidence: &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "kofi", ACR: policy.ACRPassword,
			AuthTime: time.Now().UTC().Format(time.RFC3339)}}, approve(kofiID)}},
	{"transfer_approved_executed", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)}, []signoff.Approval{approve(amaID)}},
	{"transfer_refused_then_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)},
		[]signoff.Approval{approve(kofiID), approve(efuaID), approve(amaID), approve(amaID)}},
	{"transfer_other_store_refused_then_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)},
		[]signoff.Approval{approve(efuaID), approve(storeManager(121))}},
	{"transfer_rejected", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)},
		[]signoff.Approval{{Decision: signoff.Reject, Approver: amaID, Reason: "delivery due"}}},
	{"transfer_expired", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)}, []signoff.Approval{}},
	{"transfer_over_limit", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40211,"quantity":250,"reason":"festival_peak"}`)}, nil},
	{"transfer_signed_approved_executed", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)}, []signoff.Approval{approve(amaID)}},
	{"transfer_forged_then_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)},
		[]signoff.Approval{{Decision: signoff.Approve, Approver: amaID, Signature: "unsigned"}, approve(amaID)}},
	{"transfer_unsigned_then_rejected", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)}, unsignedThenRejected()},
	{"transfer_locked", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)}, lockingDecisions()},
	{"transfer_repeated_then_rejected", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(fortyCases)},
		[]signoff.Approval{approve(kofiID), {Signature: goldenRepeat}, {Signature: goldenRepeat}, {Decision: signoff.Reject, Approver: storeManager(114), Reason: "not after all"}}},
	{"transfer_edited_stale_then_rejected", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":20,"reason":"stockout_risk"}`)},
		[]signoff.Approval{edit(storeManager(115), `{"quantity":35}`), {Decision: signoff.Approve, Approver: kofiID, Signature: goldenFirstVersion},
			{Decision: signoff.Reject, Approver: kofiID, Reason: "not after all"}}},
	{"transfer_escalated_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":50110,"quantity":12,"reason":"stockout_risk"}`)},
		[]signoff.Approval{approve(kofiID)}},
	{"transfer_already_pending", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":50110,"quantity":10,"reason":"stockout_risk"}`)}, nil},
	{"transfer_shortfall", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40211,"quantity":201,"reason":"festival_peak"}`)}, nil},
	{"transfer_two_person_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(twoHundredCases)},
		[]signoff.Approval{approve(kofiID), approve(adwoaID), approve(yoofiID)}},
	{"transfer_edited_approved", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":20,"reason":"stockout_risk"}`)},
		[]signoff.Approval{edit(storeManager(117), `{"quantity":35}`), approve(kofiID)}},
	{"transfer_edited_expired", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":20,"reason":"stockout_risk"}`)},
		[]signoff.Approval{edit(storeManager(120), `{"quantity":35}`)}},
	{"transfer_webhook_rejected", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":12,"reason":"stockout_risk"}`)},
		[]signoff.Approval{{Decision: signoff.Reject, Approver: kofiID, Reason: "not this week"}}},
	{"transfer_rejected_by_password", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40211,"quantity":100,"reason":"festival_peak"}`)},
		[]signoff.Approval{{Decision: signoff.Reject, Approver: adwoaID, Reason: "not this week", Evidence: &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "adwoa",
			ACR: policy.ACRPassword, AuthTime: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}}},
	{"transfer_two_person_one_person", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(twoHundredCases)},
		[]signoff.Approval{approve(adwoaID), {Decision: signoff.Approve, Approver: policy.Identity{UserID: "adwoa.mensah", Role: mangrove.RoleAreaManager, Resources: kofiID.Resources},
			Evidence: &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "adwoa", ACR: policy.ACRMFA}}, approve(yoofiID)}},
	{"transfer_withdrawn", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40388,"quantity":12,"reason":"stockout_risk"}`)},
		[]signoff.Approval{withdraw(efuaID), withdraw(kofiID)}},
	// The requester decides her own card from its confirmation link (an MCP
	// client's URL elicitation, /cards/<id>/confirm), signed in as herself.
	{"transfer_confirmed_by_url", workflows.ToolCallInput{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40211,"quantity":10,"reason":"stockout_risk"}`)},
		[]signoff.Approval{{Decision: signoff.Approve, Approver: efuaID, Evidence: &signoff.AuthEvidence{Issuer: testenv.Issuer, Subject: "efua", ACR: policy.ACRPassword}}}},
	{"signed_out_resumed_read", workflows.ToolCallInput{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211}`)}, nil},
	{"signed_out_expired", workflows.ToolCallInput{Tool: "create_task", Args: json.RawMessage(`{"kind":"recount","articleId":40211,"dueBy":"today"}`)}, nil},
	// PlanCover (packs/plancover): a read that runs as no one, a portal
	// not held, a hospital search with neither field, a dead index, and a
	// signed-out portal read whose sign-in never comes.
	{"plancover_knowledge_read", workflows.ToolCallInput{Tool: plancover.ToolSearchPolicyKnowledge, Args: json.RawMessage(`{"query":"cataract waiting period"}`)}, nil},
	{"plancover_portal_not_found", workflows.ToolCallInput{Tool: plancover.ToolGetPlanDetails, Args: json.RawMessage(`{"portal_ref":"PRT-50017"}`)}, nil},
	{"plancover_hospitals_invalid", workflows.ToolCallInput{Tool: plancover.ToolFindNetworkHospitals, Args: json.RawMessage(`{}`)}, nil},
	{"plancover_index_down", workflows.ToolCallInput{Tool: plancover.ToolSearchPolicyKnowledge, Args: json.RawMessage(`{"query":"maternity"}`)}, nil},
	{"plancover_signed_out_expired", workflows.ToolCallInput{Tool: plancover.ToolGetPlanDetails, Args: json.RawMessage(`{"portal_ref":"PRT-40122"}`)}, nil},
	// Northgate (packs/northgate): a public read, a balance refused for
	// the caller's tier, a signed-out read whose sign-in never comes, a
	// locked-out caller's passphrase, and a reissue at high that card
	// operations approve.
	{"northgate_branch_hours", workflows.ToolCallInput{Tool: northgate.ToolGetBranchHours, Args: json.RawMessage(`{"branch":"Leeds"}`)}, nil},
	{"northgate_balance_step_up", workflows.ToolCallInput{Tool: northgate.ToolGetBalance, Args: json.RawMessage(`{}`)}, nil},
	{"northgate_signed_out_expired", workflows.ToolCallInput{Tool: northgate.ToolGetBalance, Args: json.RawMessage(`{}`)}, nil},
	{"northgate_locked_out", workflows.ToolCallInput{Tool: northgate.ToolVerifyPassphrase, Args: json.RawMessage(`{"passphrase":"sealed:sf_00000000000000000000000000000000"}`)}, nil},
	{"northgate_reissue_approved", workflows.ToolCallInput{Tool: northgate.ToolReissueCard, Args: json.RawMessage(`{"reason":"captured"}`)}, []signoff.Approval{approve(imogenID)}},
}

// signInAt names issuer as the provider of the sign-in behind credential
// ref, and returns the one it named before.
func signInAt(t *testing.T, s *testenv.Stack, ref, issuer string) string {
	t.Helper()
	var before string
	err := s.Owner.QueryRow(context.Background(), `WITH old AS (SELECT issuer FROM vault.credentials WHERE ref = $1)
		UPDATE vault.credentials c SET issuer = $2 FROM old WHERE c.ref = $1 RETURNING old.issuer`, ref, issuer).Scan(&before)
	if err != nil {
		t.Fatalf("sign %s in at %s: %v", ref, issuer, err)
	}
	return before
}

// imogenID is Northgate's card operations on the golden paths.
var imogenID = policy.Identity{UserID: "imogen", Role: northgate.RoleCardOps, Resources: policy.Resources{northgate.KindAccount: {"ACC-20417", "ACC-31108"}}}

// goldenPacks are the packs the golden paths are recorded and replayed on.
var goldenPacks = packs.MustLoad("mangrove,plancover,northgate")

// meera is PlanCover's member on the golden paths.
var meera = policy.Session{UserID: "meera", Role: plancover.RoleMember, Resources: policy.Resources{plancover.KindPortal: {"PRT-40122", "PRT-40123"}},
	SessionID: "s-meera", ConversationID: "golden", CredentialRef: "cr_meera_golden"}

// goldenIndexDown are paths recorded with PlanCover's knowledge index down.
var goldenIndexDown = map[string]bool{"plancover_index_down": true}

// goldenHooks are paths recorded on a worker with a webhook in force.
var goldenHooks = map[string]bool{"transfer_webhook_rejected": true}

// goldenSignIns are paths whose person is signed out: the call waits for a
// sign-in, and is resumed with the credential named here ("" never is).
var goldenSignIns = map[string]string{"signed_out_resumed_read": "cred-ama", "signed_out_expired": "", "plancover_signed_out_expired": "", "northgate_signed_out_expired": ""}

// goldenRequesters ask instead of ama on their paths (her store's daily
// budget goes to the other transfers).
var goldenRequesters = map[string]policy.Session{
	"transfer_step_up_refused_then_approved":     {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(110), SessionID: "s2", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_escalated_approved":                {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(113), SessionID: "s4", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_already_pending":                   {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(111), SessionID: "s3", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_edited_approved":                   {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(117), SessionID: "s6", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_edited_expired":                    {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(120), SessionID: "s8", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_webhook_rejected":                  {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(119), SessionID: "s7", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_two_person_approved":               {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(116), SessionID: "s5", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_rejected_by_password":              {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(114), SessionID: "s9", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_two_person_one_person":             {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(115), SessionID: "s10", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_repeated_then_rejected":            {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(114), SessionID: "s11", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_edited_stale_then_rejected":        {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(115), SessionID: "s12", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_other_store_refused_then_approved": {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(121), SessionID: "s13", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_withdrawn":                         {UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(110), SessionID: "s14", ConversationID: "golden", CredentialRef: "cred-kofi"},
	"transfer_confirmed_by_url":                  {UserID: "efua", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(118), SessionID: "s15", ConversationID: "golden", CredentialRef: "cred-efua"},
	"plancover_knowledge_read":                   meera,
	"plancover_portal_not_found":                 meera,
	"plancover_hospitals_invalid":                meera,
	"plancover_index_down":                       meera,
	"plancover_signed_out_expired":               meera,
}

// goldenSignedIn are paths whose requester's credential names a sign-in
// at the identity provider the stack trusts (testenv.Issuer) while the
// path runs, as one through the MCP server would, so their own decisions
// (a withdrawal) come from the person who asked.
var goldenSignedIn = map[string]string{"transfer_withdrawn": "cred-kofi", "transfer_confirmed_by_url": "cred-efua"}

// goldenWaits are paths whose decisions wait: an escalation needs the card
// unanswered past half its TTL (the recording stack's is 2 s).
var goldenWaits = map[string]time.Duration{"transfer_escalated_approved": 1300 * time.Millisecond}

// goldenHolders are paths that need an equivalent card already up: an
// identical call (ID <path>_holder) puts it up first and is rejected after.
var goldenHolders = map[string]bool{"transfer_already_pending": true}

// unsignedThenRejected are more unsigned decisions than a card audits one
// by one, and than it takes before it locks, then ama's rejection, which
// ends it (a rejection, so the store's transfers left for the day stay as
// the later paths need them).
func unsignedThenRejected() []signoff.Approval {
	var out []signoff.Approval
	for range workflows.MaxRefusedDecisions + 5 {
		out = append(out, signoff.Approval{Decision: signoff.Approve, Approver: amaID, Signature: "unsigned"})
	}
	return append(out, signoff.Approval{Decision: signoff.Reject, Approver: amaID, Reason: "not after all"})
}

// lockingDecisions are one more refused signed decision than a card takes
// (kofi's: not the card's role), then a valid approval that must not count.
// The recorded transfer_locked history is of an earlier judging, when
// unsigned decisions locked a card too; it replays as it was.
func lockingDecisions() []signoff.Approval {
	var out []signoff.Approval
	for i := range workflows.MaxRefusedDecisions + 1 {
		a := approve(kofiID)
		a.Reason = fmt.Sprintf("attempt %d", i) // each its own decision: a repeat never counts
		out = append(out, a)
	}
	return append(out, approve(amaID))
}

// A decision whose Signature is goldenRepeat is the one before it, sent
// again as it was; goldenFirstVersion is signed for the card's first
// version, whatever version is up.
const (
	goldenRepeat       = "repeat"
	goldenFirstVersion = "first version"
)

// TestGoldenHistoriesReplay replays every history under testdata/golden
// with today's code. A non-deterministic change fails here.
func TestGoldenHistoriesReplay(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if len(files) < len(goldenPaths) {
		t.Fatalf("%d golden histories, want at least %d: record them with make golden", len(files), len(goldenPaths))
	}
	for _, f := range files {
		if err := replayFile(f); err != nil {
			t.Errorf("%s no longer replays: %v", f, err)
		}
	}
}

// TestRecordGoldenHistories runs each golden path on the real stack and
// replays its fresh history. With TOOLGATE_RECORD_GOLDEN=1 (make golden) it
// writes the histories of paths that have none yet to testdata/golden;
// =overwrite replaces them too (only for a deliberate, versioned change).
func TestRecordGoldenHistories(t *testing.T) {
	id := testenv.NewIdP(t, "http://127.0.0.1:9")
	pc, pcURL := testenv.PlanCover(t, id.URL)
	_, bankURL := testenv.Northgate(t, id.URL)
	plain := testenv.NewStackWith(t, testenv.StackOptions{ApprovalTTL: 2 * time.Second, SignInTTL: 2 * time.Second,
		Policy: goldenPacks.Policy, Shapers: goldenPacks.Shapers, Previewers: goldenPacks.Previewers,
		Upstreams: map[string]string{plancover.Name: pcURL, northgate.Name: bankURL},
		Exchange:  id.Exchange(), Audiences: map[string]string{northgate.Name: testenv.NorthgateAudience}})
	dana, danaPerson := goldenCaller(t, plain, id)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	hooked := testenv.NewStackWith(t, testenv.StackOptions{ApprovalTTL: 2 * time.Second,
		Webhook: &activities.Webhook{URL: receiver.URL, Secret: []byte("golden webhook secret, 32 characters")}})
	record := os.Getenv("TOOLGATE_RECORD_GOLDEN") != ""
	// Each path plans from the seeded stock: how many earlier transfers
	// executed (a card's two-second TTL can beat its approval on a loaded
	// machine) must not decide whether a later one finds a source.
	for _, st := range []*testenv.Stack{plain, hooked} {
		if _, err := st.Owner.Exec(context.Background(), `CREATE TABLE public.golden_seeded_stock AS SELECT * FROM mangrove.stock`); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range goldenPaths {
		s := plain
		if goldenHooks[p.name] {
			s = hooked
		}
		if _, err := s.Owner.Exec(context.Background(), `UPDATE mangrove.stock st SET cases = g.cases FROM public.golden_seeded_stock g
			WHERE st.store_id = g.store_id AND st.article_id = g.article_id`); err != nil {
			t.Fatal(err)
		}
		in := p.in
		in.ToolCallID, in.Session = p.name, ama("golden")
		if who, ok := goldenRequesters[p.name]; ok {
			in.Session = who
		}
		pc.SetIndexDown(goldenIndexDown[p.name])
		if ref, ok := goldenSignedIn[p.name]; ok {
			restore := signInAt(t, s, ref, testenv.Issuer)
			defer signInAt(t, s, ref, restore)
		}
		if strings.HasPrefix(p.name, "northgate_") {
			in.Session = dana
			northgateStanding(t, plain, p.name, danaPerson, dana.CredentialRef)
		}
		if goldenHolders[p.name] {
			holder := in
			holder.ToolCallID = p.name + "_holder"
			first, _, err := workflows.Call(context.Background(), s.Client, s.Policy, s.TaskQueue, holder)
			if err != nil || first.Status != workflows.StatusPendingApproval {
				t.Fatalf("%s: the holder: %v %+v", p.name, err, first)
			}
			defer func() {
				_ = workflows.SendDecision(context.Background(), s.Client, first.IdempotencyKey, signoff.Approval{Decision: signoff.Reject, Approver: kofiID,
					Evidence: testenv.Evidence("kofi", time.Now())}, testenv.ApprovalSigner)
			}()
		}
		if ref, ok := goldenSignIns[p.name]; ok {
			in.Session.CredentialRef = ""
			first, run, err := workflows.Call(context.Background(), s.Client, s.Policy, s.TaskQueue, in)
			if err != nil || first.Status != workflows.StatusAwaitingSignIn {
				t.Fatalf("%s: %v %+v", p.name, err, first)
			}
			if ref != "" {
				if err := workflows.Resume(context.Background(), s.Client, run.GetID(), ref); err != nil {
					t.Fatal(err)
				}
			}
			if err := run.Get(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		} else if p.decisions == nil {
			s.Run(t, in)
		} else {
			first, run, err := workflows.Call(context.Background(), s.Client, s.Policy, s.TaskQueue, in)
			if err != nil || first.Status != workflows.StatusPendingApproval {
				t.Fatalf("%s: %v %+v", p.name, err, first)
			}
			time.Sleep(goldenWaits[p.name])
			hash, version, card := first.ArgsHash, 1, first.CardRef()
			var last signoff.Approval
			for _, a := range p.decisions {
				if a.Signature == goldenRepeat {
					a = last
				}
				a.ArgsHash = hash
				if a.Evidence != nil && a.Evidence.AuthTime == "" {
					// Evidence without a time is a sign-in as the decision goes.
					ev := *a.Evidence
					ev.AuthTime = time.Now().UTC().Format(time.RFC3339)
					a.Evidence = &ev
				}
				switch a.Signature {
				case "unsigned":
					a.Signature = ""
				case goldenFirstVersion:
					a = testenv.Sign(a, first.CardRef())
				case "":
					a = testenv.Sign(a, card)
				}
				last = a
				if err := s.Client.SignalWorkflow(context.Background(), run.GetID(), "", workflows.ApprovalSignal, a); err != nil && !strings.Contains(err.Error(), "already completed") {
					t.Fatal(err)
				}
				if a.Decision == signoff.Edit {
					// The next decision is for the new version.
					version++
					st := awaitVersion(t, s, run.GetID(), version)
					hash, card = st.ArgsHash, st.CardRef(run.GetID())
				}
			}
			if err := run.Get(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		}
		iter := s.Client.GetWorkflowHistory(context.Background(), workflows.WorkflowID("golden", p.name), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h := &historypb.History{}
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		if err := replay(h, workflows.WorkflowID("golden", p.name)); err != nil {
			b, _ := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
			_ = os.WriteFile(filepath.Join(os.TempDir(), p.name+".failed.json"), b, 0o644)
			t.Fatalf("%s: a fresh history does not replay: %v", p.name, err)
		}
		if budget, ok := goldenBudgets[p.name]; ok {
			if got := cost.Count(h.Events); got.Events > budget.Events || got.Actions > budget.Actions {
				t.Errorf("%s: a fresh history costs %d events and %d actions, over its budget of %d and %d", p.name, got.Events, got.Actions, budget.Events, budget.Actions)
			}
		}
		// A fresh history carries its tool's facts in its verdict: a spec change must not touch it.
		if err := replayWithFlips(h, p.in.Tool, workflows.WorkflowID("golden", p.name)); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
		file := filepath.Join(goldenDir, p.name+"."+goldenGeneration+".json")
		if _, err := os.Stat(file); err == nil && os.Getenv("TOOLGATE_RECORD_GOLDEN") != "overwrite" {
			continue // a recorded history is kept: it stands for calls already in flight
		}
		if record && !sameShapeRecorded(p.name, h) {
			b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// goldenCaller signs dana in as the MCP server does (her token verified,
// exchanged for a grant, a credential issued) for Northgate's paths.
func goldenCaller(t *testing.T, s *testenv.Stack, id *testenv.IdP) (policy.Session, signoff.Person) {
	t.Helper()
	who, ref, _ := testenv.MCPSignIn(t, id, goldenPacks.Policy, s.DatabaseURL, "dana")
	return policy.Session{UserID: who.UserID, Role: who.Role, Resources: who.Resources, SessionID: "s-dana", ConversationID: "golden", CredentialRef: ref},
		signoff.Person{Issuer: who.Issuer, Subject: who.Subject}
}

// northgateStanding gives dana what a Northgate path needs of her: a
// lockout, or the high tier in the golden conversation; else nothing.
func northgateStanding(t *testing.T, s *testenv.Stack, path string, dana signoff.Person, credential string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Owner.Exec(ctx, `DELETE FROM caller_verification WHERE pack = 'northgate'; DELETE FROM caller_tiers WHERE pack = 'northgate'`); err != nil {
		t.Fatal(err)
	}
	switch path {
	case "northgate_locked_out":
		if _, err := s.Owner.Exec(ctx, `INSERT INTO caller_verification (pack, issuer, subject, failures, locked_at, locked_factor)
			VALUES ('northgate', $1, $2, '{"one_time_code": 2}', now(), 'one_time_code')`, dana.Issuer, dana.Subject); err != nil {
			t.Fatal(err)
		}
	case "northgate_reissue_approved":
		if _, err := s.Owner.Exec(ctx, `INSERT INTO caller_tiers (pack, issuer, subject, conversation_id, credential_ref, factor, tier, workflow_id, expires_at)
			VALUES ('northgate', $1, $2, 'golden', $3, 'one_time_code', 'high', 'golden', now() + interval '1 hour')`, dana.Issuer, dana.Subject, credential); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitVersion waits until a call's card is at version n and returns its status.
func awaitVersion(t *testing.T, s *testenv.Stack, workflowID string, n int) workflows.Status {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		v, err := s.Client.QueryWorkflow(context.Background(), workflowID, "", workflows.StatusQuery)
		var st workflows.Status
		if err == nil && v.Get(&st) == nil && st.Version >= n {
			return st
		}
	}
	t.Fatalf("%s never reached card version %d", workflowID, n)
	return workflows.Status{}
}

// replay replays a history as the execution it was recorded from: the
// workflow ID is part of what a decision's signature covers.
func replay(h *historypb.History, workflowID string) error {
	return replayWith(h, workflowID, goldenPacks.Policy)
}

// replayWith replays a history on a worker that gates p.
func replayWith(h *historypb.History, workflowID string, p *policy.Policy) error {
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: testenv.Codec.DataConverter()})
	if err != nil {
		return err
	}
	workflows.Register(r, workflows.Settings{Policy: p})
	// Decisions are signed for their run, so replay as the recorded run.
	runID := "replay"
	if len(h.Events) > 0 {
		if id := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId(); id != "" {
			runID = id
		}
	}
	return r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: workflowID, RunID: runID}})
}

// replayFile replays a golden file, <path>[.<generation>].json; every golden
// call ran as conversation "golden" with its path name as the tool-call ID.
func replayFile(file string) error { return replayFileWith(file, goldenPacks.Policy) }

// replayFileWith replays a golden file on a worker that gates p.
func replayFileWith(file string, p *policy.Policy) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return err
	}
	name, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(file), ".json"), ".")
	return replayWith(h, workflows.WorkflowID("golden", name), p)
}

// sameShapeRecorded reports whether an older generation of the path already
// holds a history with the same sequence of events: recording it again
// would add bytes, not coverage.
func sameShapeRecorded(name string, h *historypb.History) bool {
	files, _ := filepath.Glob(filepath.Join(goldenDir, name+".*json"))
	files = append(files, filepath.Join(goldenDir, name+".json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		old, err := client.HistoryFromJSON(strings.NewReader(string(b)), client.HistoryJSONOptions{})
		if err != nil || len(old.Events) != len(h.Events) {
			continue
		}
		same := true
		for i, ev := range old.Events {
			if ev.GetEventType() != h.Events[i].GetEventType() || changeVersions(ev) != changeVersions(h.Events[i]) {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// changeVersions is the GetVersion state an event records (the plaintext
// TemporalChangeVersion search attribute), "" for other events.
func changeVersions(ev *historypb.HistoryEvent) string {
	p := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()["TemporalChangeVersion"]
	if p == nil {
		return ""
	}
	return string(p.GetData())
}

// goldenBudgets are what a path of the current shape may cost at most:
// history events and Temporal Cloud actions. A change that
// adds a command to a budgeted path fails here, with the figures.
var goldenBudgets = map[string]cost.Cost{
	"allowed_read":               {Events: 9, Actions: 3},
	"executed_task":              {Events: 14, Actions: 4},
	"transfer_approved_executed": {Events: 30, Actions: 8},
	"transfer_rejected":          {Events: 30, Actions: 8},
	"transfer_expired":           {Events: 30, Actions: 9},
}

// TestGoldenCostsWithinBudget counts the newest recorded history of each
// path (the same shape costs the same).
func TestGoldenCostsWithinBudget(t *testing.T) {
	for name, budget := range goldenBudgets {
		f, err := os.Open(newestGolden(name))
		if err != nil {
			t.Fatalf("%s: %v (record it with make golden)", name, err)
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := cost.Count(h.Events); got.Events > budget.Events || got.Actions > budget.Actions {
			t.Errorf("%s costs %d events and %d actions, over its budget of %d and %d", name, got.Events, got.Actions, budget.Events, budget.Actions)
		}
	}
}

// newestGolden is the file of a path's newest recorded history: today's
// generation, or the latest before it when today's code records the same
// shape (make golden keeps one history per shape).
func newestGolden(name string) string {
	best, gen := filepath.Join(goldenDir, name+"."+goldenGeneration+".json"), -1
	files, _ := filepath.Glob(filepath.Join(goldenDir, name+".g*.json"))
	for _, f := range files {
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(filepath.Base(f), name+"."), "g%d.json", &n); err == nil && n > gen {
			best, gen = f, n
		}
	}
	return best
}
