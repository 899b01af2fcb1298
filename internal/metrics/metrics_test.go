package metrics_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestMetricsAfterACall: /metrics shows the SDK's metrics and toolgate's
// decision counter, labelled by tool, decision and code, the pending
// approvals gauge, and admission's timings of a call with a limit.
func TestMetricsAfterACall(t *testing.T) {
	db := testenv.Database(t)
	m, err := metrics.New(testenv.AppPool(t, db), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	s := testenv.NewStackWith(t, testenv.StackOptions{Metrics: m.SDK})
	sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "m", CredentialRef: "cred-ama"}
	s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "1", Args: json.RawMessage(`{"articleId":40211}`), Session: sess})
	s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "2", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`), Session: sess})
	search, _ := s.Policy.Spec("search_procedures") // a limit per user: admission locks and counts its bucket
	s.Run(t, workflows.ToolCallInput{Tool: "search_procedures", ToolCallID: "3", Args: json.RawMessage(search.Example), Session: sess})
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`(?m)^toolgate_decisions\{[^}]*code="ok",decision="allow",[^}]*tool="get_stock"[^}]*\} 1$`,
		`(?m)^toolgate_decisions\{[^}]*code="resource_scope",decision="deny",[^}]*tool="get_stock"[^}]*\} 1$`,
		`(?m)^toolgate_pending_approvals 0$`,
		`(?m)^toolgate_admission_lock_wait[a-z_]*_count\{[^}]*tool="search_procedures"[^}]*\} 1$`,
		`(?m)^toolgate_admission_count[a-z_]*_count\{[^}]*tool="search_procedures"[^}]*\} 1$`,
		`temporal_workflow_completed`,
		`temporal_activity_execution_latency`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grep(text, "toolgate_", "temporal_workflow"))
	}
}

func grep(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
