package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/northgate"
	"github.com/toolgate/toolgate/packs/plancover"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestExportEvalsCoversEveryPack: the evals export of a deployment gating
// make dev's packs holds each pack's decisions, every line valid
// against docs/evals.schema.json: PlanCover's knowledge read, its
// concealed portal and its hospital search with neither field, and the
// card desk's concealed account, Northgate's public read, its balance
// refused for the caller's tier and a passphrase sent in the clear,
// beside Mangrove's read. The mobile
// number typed into the knowledge query is in none of them.
func TestExportEvalsCoversEveryPack(t *testing.T) {
	set := packs.MustLoad("mangrove,plancover,northgate,../examples/packs/carddesk.yaml")
	id := testenv.NewIdP(t, "http://127.0.0.1:9")
	_, pcURL := testenv.PlanCover(t, id.URL)
	_, bankURL := testenv.Northgate(t, id.URL)
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, Shapers: set.Shapers, Previewers: set.Previewers,
		Upstreams: map[string]string{plancover.Name: pcURL, northgate.Name: bankURL}})
	dana := policy.Session{UserID: "dana", Role: northgate.RoleCaller, Resources: policy.Resources{northgate.KindAccount: {"ACC-20417"}},
		SessionID: "s-evals-d", ConversationID: "evals", CredentialRef: "cr_dana_evals"}
	meera := policy.Session{UserID: "meera", Role: plancover.RoleMember, Resources: policy.Resources{plancover.KindPortal: {"PRT-40122"}},
		SessionID: "s-evals", ConversationID: "evals", CredentialRef: "cr_meera_evals"}
	cara := policy.Session{UserID: "cara", Role: "card_agent", Resources: policy.Resources{"account": {"ACC-4471"}}, SessionID: "s-evals-c", ConversationID: "evals", CredentialRef: "cr_cara_evals"}
	ama := policy.Session{UserID: "ama", Role: "store_manager", Resources: policy.Resources{"store": {"112"}}, SessionID: "s-evals-a", ConversationID: "evals", CredentialRef: "cred-ama"}
	for i, c := range []struct {
		tool, args string
		who        policy.Session
		want       workflows.CallStatus
	}{
		{plancover.ToolSearchPolicyKnowledge, `{"query":"cataract waiting period, ring +91 98450 77123"}`, meera, workflows.StatusExecuted},
		{plancover.ToolGetPlanDetails, `{"portal_ref":"PRT-50017"}`, meera, workflows.StatusDenied},
		{plancover.ToolFindNetworkHospitals, `{}`, meera, workflows.StatusDenied},
		{"get_card", `{"accountRef":"ACC-9999"}`, cara, workflows.StatusDenied},
		{"get_stock", `{"articleId":40211}`, ama, workflows.StatusExecuted},
		{northgate.ToolGetBranchHours, `{"branch":"Leeds"}`, dana, workflows.StatusExecuted},
		{northgate.ToolGetBalance, `{}`, dana, workflows.StatusDenied},
		{northgate.ToolVerifyPassphrase, `{"passphrase":"harbour lights"}`, dana, workflows.StatusDenied},
	} {
		if r := s.Run(t, workflows.ToolCallInput{Tool: c.tool, ToolCallID: string(rune('a' + i)), Args: json.RawMessage(c.args), Session: c.who}); r.Status != c.want {
			t.Fatalf("%s: %+v", c.tool, r)
		}
	}
	asStarter(t, s)
	t.Setenv("TOOLGATE_PACKS", "mangrove,plancover,northgate,../examples/packs/carddesk.yaml")
	raw, err := os.ReadFile("../docs/evals.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"export-evals", "--since", "1h"}, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var inst any
		if err := json.Unmarshal(sc.Bytes(), &inst); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		if err := resolved.Validate(inst); err != nil {
			t.Errorf("%s\ndoes not match docs/evals.schema.json: %v", sc.Text(), err)
		}
		var r insights.EvalRecord
		_ = json.Unmarshal(sc.Bytes(), &r)
		got[r.Tool+" "+r.Decision+" "+r.Code+" "+r.Outcome] = true
	}
	for _, want := range []string{
		"search_policy_knowledge allow ok executed",
		"get_plan_details deny resource_scope denied",
		"find_network_hospitals deny invalid_arguments denied",
		"get_card deny resource_scope denied",
		"get_stock allow ok executed",
		"get_branch_hours allow ok executed",
		"get_balance deny step_up_required denied",
		"verify_passphrase deny invalid_arguments denied",
	} {
		if !got[want] {
			t.Errorf("the export lacks %q: %v", want, got)
		}
	}
	for _, leak := range []string{"98450", "77123", "cr_meera_evals", "s-evals", "cr_dana_evals", "harbour lights"} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("the export carries %q", leak)
		}
	}
}
