package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

var amaID = policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}

// friday plays the incident: ama asks for 40 cases of milk for store 112
// and approves; later the assistant asks again, for 30 more, under a new
// tool-call ID, and she approves that too: two transfers. A third card she
// rejects with a note carrying a phone number; two calls are refused.
func friday(t *testing.T, s *testenv.Stack) (milk1, milk2, milk3 string) {
	t.Helper()
	ctx := context.Background()
	sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s-fri", ConversationID: "friday", CredentialRef: "cred-ama"}
	card := func(call string, quantity string, decision, note string) string {
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: call,
			Args: json.RawMessage(`{"articleId":40211,"quantity":` + quantity + `,"reason":"stockout_risk"}`), Session: sess})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %s: %v %+v", call, err, first)
		}
		a := signoff.Approval{Decision: decision, ArgsHash: first.ArgsHash, Approver: amaID, Reason: note, Evidence: testenv.Evidence("ama", time.Now())}
		if err := workflows.SendDecision(ctx, s.Client, run.GetID(), a, testenv.ApprovalSigner); err != nil {
			t.Fatal(err)
		}
		var res workflows.ToolCallResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		return run.GetID()
	}
	milk1 = card("milk1", "40", signoff.Approve, "")
	milk2 = card("milk2", "30", signoff.Approve, "flooding again")
	milk3 = card("milk3", "20", signoff.Reject, "enough already, ring me on 0244 123 456")
	s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "read", Args: json.RawMessage(`{"articleId":40211}`), Session: sess})
	s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "scope", Args: json.RawMessage(`{"articleId":40211,"storeId":118}`), Session: sess})
	s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: "kind", Args: json.RawMessage(`{"kind":"clean","dueBy":"today"}`), Session: sess})
	return milk1, milk2, milk3
}

// recordedBefore copies a call's rows under workflow ID id, with reason
// store_scope where they say resource_scope: the rows of a call refused
// before the code was renamed.
func recordedBefore(t *testing.T, s *testenv.Stack, from, id string) {
	t.Helper()
	ctx := context.Background()
	pool := testenv.OwnerPool(t, s.DatabaseURL)
	var cols []string
	rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'audit_log' AND is_generated = 'NEVER'
  AND column_name NOT IN ('id', 'at', 'seconds', 'version_by') ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if rows.Err() != nil || len(cols) < 10 {
		t.Fatalf("audit_log's columns: %v %v", cols, rows.Err())
	}
	sel := slices.Clone(cols)
	for i, c := range sel {
		switch c {
		case "workflow_id":
			sel[i] = "$2"
		case "reason":
			sel[i] = fmt.Sprintf("CASE reason WHEN '%s' THEN '%s' ELSE reason END", policy.CodeResourceScope, policy.CodeStoreScope)
		}
	}
	tag, err := pool.Exec(ctx, "INSERT INTO audit_log ("+strings.Join(cols, ", ")+") SELECT "+strings.Join(sel, ", ")+" FROM audit_log WHERE workflow_id = $1", from, id)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("copy %s's rows: %v (%d rows)", from, err, tag.RowsAffected())
	}
}

func asStarter(t *testing.T, s *testenv.Stack) {
	t.Setenv("DATABASE_URL", s.DatabaseURL)
	t.Setenv("TEMPORAL_ADDRESS", testenv.TemporalAddress(t))
	t.Setenv("TOOLGATE_CODEC_KEYS", testenv.CodecKeys)
	t.Setenv("TOOLGATE_CODEC_KEY_ID", "test")
}

// TestExplainTellsTheTwoTransfersStory: "why did store 112 get two milk
// transfers on Friday?" in one command: two calls, two keys, each with
// who asked, the card, who approved with what sign-in, the key and the
// transfer it made, and the history; a rejected card ran nothing.
func TestExplainTellsTheTwoTransfersStory(t *testing.T) {
	s := testenv.NewStack(t)
	milk1, milk2, milk3 := friday(t, s)
	asStarter(t, s)
	var out strings.Builder
	today := time.Now().UTC().Format(time.DateOnly)
	if err := run([]string{"explain", "--store", "112", "--day", today, "--tool", "request_stock_transfer"}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"2 request_stock_transfer calls ran upstream for store 112", milk1 + ", " + milk2, "separate calls",
		milk1 + ": request_stock_transfer for store 112", "Asked by ama (store_manager), session s-fri, conversation friday",
		"needs_approval (ok) $384.00", `"fromStoreId":118`, "chain: every step passed (0 unknown_tool, 1 tool_denied, 2 role, 3 invalid_arguments, 4 credential_unavailable, 5 resource_scope, 6 over_limit, 7 rate_limit); the row says approve: a person decides", "approved (ok) $384.00 by ama (store_manager), signed in with mfa", testenv.Issuer,
		"Idempotency-Key sent upstream: " + milk1, "it ran once upstream, with Idempotency-Key " + milk1 + ": transfer TR-",
		"needs_approval (ok) $288.00", "approver's note: flooding again",
		"signal approval received", "activity CallTool", "completed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
	t.Logf("explain printed:\n%s", text)
	if strings.Contains(text, milk3) {
		t.Error("the rejected card is in the story of what ran")
	}
	if t.Failed() {
		t.Fatalf("explain printed:\n%s", text)
	}
	out.Reset()
	if err := run([]string{"explain", "--workflow-id", milk3}, &out); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "nothing ran upstream: the call ended rejected (rejected)") || !strings.Contains(text, `"note":"enough already, ring me on [phone]`) {
		t.Fatalf("the rejected card's story:\n%s", text)
	}
	out.Reset()
	if err := run([]string{"explain", "--workflow-id", "toolcall-friday-scope"}, &out); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "chain: passed 0 unknown_tool, 1 tool_denied, 2 role, 3 invalid_arguments, 4 credential_unavailable; step 5 resource_scope refused it") ||
		!strings.Contains(text, "nothing ran upstream: the call ended denied (resource_scope)") {
		t.Fatalf("a refused call's story:\n%s", text)
	}
	out.Reset()
	recordedBefore(t, s, "toolcall-friday-scope", "toolcall-friday-before")
	if err := run([]string{"explain", "--workflow-id", "toolcall-friday-before"}, &out); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "step 5 resource_scope refused it") || !strings.Contains(text, "the call ended denied (store_scope)") {
		t.Fatalf("a call refused store_scope before the rename:\n%s", text)
	}
	out.Reset()
	if err := run([]string{"explain", "--workflow-id", "toolcall-friday-read"}, &out); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "it was allowed and runs upstream with no idempotency key: its route sends none (a GET, not keyed); a read that succeeds writes no outcome row, and its history shows it completed") {
		t.Fatalf("a read's story:\n%s", text)
	}
	if err := run([]string{"explain", "--workflow-id", "toolcall-friday-nosuch"}, &out); err == nil || !strings.Contains(err.Error(), "no row of this call") {
		t.Fatalf("an unknown call: %v", err)
	}
	for _, bad := range [][]string{{"explain"}, {"explain", "--store", "112", "--day", "Friday"}, {"explain", "--store", "112", "--day", today, "--tool", "constructor"}} {
		if err := run(bad, &out); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}

// TestExportEvalsMatchesItsSchema: every line of the export validates
// against docs/evals.schema.json; there is one per call, the rejected
// card carries its note with the phone number redacted, refusals carry
// their codes, and nothing names a session or conversation.
func TestExportEvalsMatchesItsSchema(t *testing.T) {
	s := testenv.NewStack(t)
	_, _, _ = friday(t, s)
	recordedBefore(t, s, "toolcall-friday-scope", "toolcall-friday-before")
	asStarter(t, s)
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
	var recs []insights.EvalRecord
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
		recs = append(recs, r)
	}
	if len(recs) != 7 {
		t.Fatalf("%d lines, want 7 (three cards, a read, three refusals, one recorded before resource_scope):\n%s", len(recs), out.String())
	}
	got := map[string]int{}
	for _, r := range recs {
		key := r.Tool + " " + r.Decision + " " + r.Code + " " + r.Outcome
		if r.OutcomeInferred {
			key += " inferred"
		}
		if r.Card != nil {
			key += " card:" + r.Card.Decision
			if r.Card.Decision == "rejected" && (r.Card.Note != "enough already, ring me on [phone]" || r.Card.DecisionSeconds == nil) {
				t.Errorf("the rejected card: %+v", *r.Card)
			}
		}
		got[key]++
	}
	want := map[string]int{
		"request_stock_transfer approve ok executed card:approved": 2,
		"request_stock_transfer approve ok rejected card:rejected": 1,
		"get_stock deny resource_scope denied":                     2,
		"get_stock allow ok executed inferred":                     1,
		"create_task deny invalid_arguments denied":                1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%q: %d lines, want %d (all: %v)", k, got[k], n, got)
		}
	}
	now := time.Now().UTC()
	page, err := insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}.Page(context.Background(), insights.Filter{From: now.Add(-time.Hour), To: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if svg := string(page.Chart("refusals").SVG); !strings.Contains(svg, "<title>resource_scope · get_stock · denied: 2</title>") || strings.Contains(svg, "store_scope") {
		t.Errorf("the refusals chart does not count the two get_stock refusals as one code:\n%s", svg)
	}
	for _, leak := range []string{"s-fri", "friday", "0244 123", "123 456", "cred-ama"} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("the export carries %q", leak)
		}
	}
	for _, bad := range [][]string{{"export-evals"}, {"export-evals", "--since", "last week"}, {"export-evals", "--since", "1h", "--format", "csv"}} {
		if err := run(bad, &out); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}
