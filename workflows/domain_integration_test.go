package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestMangroveToolsAsTheDomainDesignedThem runs the domain's parameter sets
// through the real stack: a recount task from a kind, an article and a day
// (one task for a repeated tool-call ID, titled by the system), enums that
// name their members, a festival transfer routed by value, and a note whose
// phone number and e-mail reach neither the audit log, the history (its
// input included) nor the upstream.
func TestMangroveToolsAsTheDomainDesignedThem(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	recount := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "recount", Args: json.RawMessage(`{"kind":"recount","articleId":40211,"dueBy":"today"}`), Session: ama("domain")}
	first := s.Run(t, recount)
	again := s.Run(t, recount)
	if first.Status != workflows.StatusExecuted || string(first.Result) != string(again.Result) ||
		!strings.Contains(string(first.Result), `"title":"Recount UHT milk 1 L, case of 12"`) {
		t.Fatalf("recount: %+v / %s", first, again.Result)
	}
	var tasks int
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.tasks WHERE kind = 'recount' AND article_id = 40211 AND due_by = 'today' AND due_date = current_date`).Scan(&tasks)
	if tasks != 1 {
		t.Fatalf("%d recount tasks for one tool-call ID", tasks)
	}
	for i, c := range []struct{ tool, args, names string }{
		{"create_task", `{"kind":"clean","dueBy":"today"}`, "recount, shelf_check, expiry_check, call_supplier, pricing_desk"},
		{"get_deliveries", `{"day":"someday"}`, "yesterday, today, tomorrow"},
		{"request_stock_transfer", `{"articleId":40211,"quantity":40,"reason":"promotion"}`, "stockout_risk, festival_peak, damaged_delivery"},
		{"request_stock_transfer", `{"articleId":40211,"quantity":600,"reason":"festival_peak"}`, "at most 500"},
	} {
		res := s.Run(t, workflows.ToolCallInput{Tool: c.tool, ToolCallID: fmt.Sprint("bad", i), Args: json.RawMessage(c.args), Session: ama("domain")})
		if res.Code != policy.CodeInvalidArguments || !strings.Contains(res.Message, c.names) {
			t.Errorf("%s %s: %s %q", c.tool, c.args, res.Code, res.Message)
		}
	}
	out, _, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, transferIn("domain", "festival", `{"articleId":40211,"quantity":100,"reason":"festival_peak"}`, ama("")))
	if err != nil || out.Status != workflows.StatusPendingApproval || out.ApproverRole != mangrove.RoleAreaManager || out.ValueCents != 96000 ||
		!strings.Contains(out.Card, "($960.00 at cost)") {
		t.Fatalf("festival transfer: %v %+v", err, out)
	}
	_ = s.Client.TerminateWorkflow(ctx, out.IdempotencyKey, out.RunID, "test over")

	note := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "note", Session: ama("domain"),
		Args: json.RawMessage(`{"kind":"call_supplier","dueBy":"tomorrow","note":"ring Kwame on +233 24 555 0123 or kwame@volta.example"}`)}
	if res := s.Run(t, note); res.Status != workflows.StatusExecuted {
		t.Fatalf("note: %+v", res)
	}
	_, places := logAndAuditTexts(t, s, "workflow_id = $1", workflows.WorkflowID("domain", "note"))
	var stored string
	_ = s.Owner.QueryRow(ctx, `SELECT note FROM mangrove.tasks WHERE kind = 'call_supplier'`).Scan(&stored)
	places = append(places, stored)
	// The input too: the client helpers redact the note before they start the call.
	places = append(places, historyTexts(t, s, workflows.WorkflowID("domain", "note"), true)...)
	// A bare client sends the note unredacted; the chain redacts it at decode,
	// so the audit row and the task still hold none of it.
	bare := workflows.ToolCallInput{Tool: "create_task", ToolCallID: "bare", Session: ama("domain"),
		Args: json.RawMessage(`{"kind":"shelf_check","dueBy":"today","note":"ask for Esi on +233 24 555 0123"}`)}
	if res := bareStart(t, s, bare); res.Status != workflows.StatusExecuted {
		t.Fatalf("bare note: %+v", res)
	}
	_, bareRows := logAndAuditTexts(t, s, "workflow_id = $1", workflows.WorkflowID("domain", "bare"))
	var bareStored string
	_ = s.Owner.QueryRow(ctx, `SELECT note FROM mangrove.tasks WHERE kind = 'shelf_check'`).Scan(&bareStored)
	places = append(append(places, bareRows...), bareStored)
	if len(places) < 10 || !strings.Contains(stored, "[phone]") || !strings.Contains(bareStored, "[phone]") {
		t.Fatalf("only %d places, stored note %q", len(places), stored)
	}
	for _, p := range places {
		for _, leak := range []string{"555 0123", "kwame@volta"} {
			if strings.Contains(p, leak) {
				t.Errorf("%q in clear in %.200s", leak, p)
			}
		}
	}
}
