package workflows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// keeperID approves the reference pack's cards.
var keeperID = policy.Identity{UserID: "kofi", Role: "keeper"}

// referenceStack runs the reference pack (examples/packs/reference.yaml,
// loaded from packFile) in front of the official filesystem and memory
// servers from npm, on a scratch folder of its own.
func referenceStack(t *testing.T, packFile string) (*testenv.Stack, string, policy.Session) {
	t.Helper()
	testenv.ReferenceServer(t, "mcp-server-filesystem")
	scratch, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_SCRATCH", scratch)
	set, err := packs.Load(packFile)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, MCPServers: set.Servers})
	writer := policy.Session{UserID: "ama", Role: "writer", SessionID: "s-ref", ConversationID: "reference",
		CredentialRef: issueCredential(t, s, "ama", "writer", nil, policy.ACRPassword)}
	return s, scratch, writer
}

// decideCard sends one signed decision on a pending card and returns the
// call's final result.
func decideCard(t *testing.T, s *testenv.Stack, first workflows.Outcome, a policy.Approval) workflows.ToolCallResult {
	t.Helper()
	a.ArgsHash = first.ArgsHash
	a = testenv.Sign(a, first.CardRef())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client.SignalWorkflow(ctx, first.IdempotencyKey, "", workflows.ApprovalSignal, a); err != nil {
		t.Fatal(err)
	}
	var res workflows.ToolCallResult
	if err := s.Client.GetWorkflow(ctx, first.IdempotencyKey, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTheReferenceServersBehindTheChain: toolgate in front of two MCP
// servers nobody here wrote. A read runs at once and is audited; a path
// outside the row's prefix is refused before any card; a write waits for a
// keeper and, approved, writes the file once with exactly the args asked,
// and rejected, leaves the folder untouched; the memory server's delete
// waits for a keeper too.
func TestTheReferenceServersBehindTheChain(t *testing.T) {
	s, scratch, writer := referenceStack(t, "../examples/packs/reference.yaml")
	if err := os.WriteFile(filepath.Join(scratch, "notes.txt"), []byte("cold chain: check at 06:00"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := s.Run(t, workflows.ToolCallInput{Tool: "files__read_text_file", ToolCallID: "r1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(filepath.Join(scratch, "notes.txt")) + `}`)})
	if read.Status != workflows.StatusExecuted || !strings.Contains(string(read.Result), "check at 06:00") {
		t.Fatalf("a read: %s/%s %q %s", read.Status, read.Code, read.Message, read.Result)
	}
	var audited int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE tool = 'files__read_text_file' AND event = 'allowed'`).Scan(&audited)
	if audited != 1 {
		t.Fatalf("%d audit rows for the read, want 1", audited)
	}

	for i, path := range []string{"/etc/passwd", scratch + "/../escape.txt", scratch + "x/notes.txt"} {
		out := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "out" + string(rune('a'+i)), Session: writer,
			Args: json.RawMessage(`{"path":` + quoteJSON(path) + `,"content":"x"}`)})
		if out.Status != workflows.StatusDenied || out.Code != policy.CodeInvalidArguments || out.Card != "" {
			t.Fatalf("a write to %s: %s/%s %q", path, out.Status, out.Code, out.Message)
		}
	}

	target := filepath.Join(scratch, "plan.txt")
	args := `{"path":` + quoteJSON(target) + `,"content":"Order 40 cases."}`
	first := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w1", Session: writer, Args: json.RawMessage(args)})
	if first.Status != workflows.StatusPendingApproval || first.ApproverRole != "keeper" {
		t.Fatalf("a write: %+v", first)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the file exists before anyone approved: %v", err)
	}
	res := decideCard(t, s, first, approve(keeperID))
	if res.Status != workflows.StatusExecuted {
		t.Fatalf("the approved write: %s/%s %q", res.Status, res.Code, res.Message)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "Order 40 cases." {
		t.Fatalf("the file after the approved write: %q %v", b, err)
	}

	rejected := filepath.Join(scratch, "rejected.txt")
	first = s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w2", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(rejected) + `,"content":"no"}`)})
	res = decideCard(t, s, first, policy.Approval{Decision: policy.Reject, Approver: keeperID, Reason: "not today"})
	if res.Status != workflows.StatusRejected {
		t.Fatalf("the rejected write: %s/%s", res.Status, res.Code)
	}
	if _, err := os.Stat(rejected); !os.IsNotExist(err) {
		t.Fatalf("a rejected write left a file: %v", err)
	}

	del := s.First(t, workflows.ToolCallInput{Tool: "memory__delete_entities", ToolCallID: "d1", Session: writer, Args: json.RawMessage(`{"entityNames":["Ama"]}`)})
	if del.Status != workflows.StatusPendingApproval || del.ApproverRole != "keeper" {
		t.Fatalf("a delete: %+v", del)
	}
	graph := s.Run(t, workflows.ToolCallInput{Tool: "memory__read_graph", ToolCallID: "g1", Session: writer, Args: json.RawMessage(`{}`)})
	if graph.Status != workflows.StatusExecuted || !strings.Contains(string(graph.Result), `"entities"`) {
		t.Fatalf("the graph: %s/%s %q %s", graph.Status, graph.Code, graph.Message, graph.Result)
	}
}

// TestADefinitionChangedSinceAcceptanceIsNotRun: the pins file accepted
// write_file with other words than the server now gives it (a server
// update, or a rug pull rewriting a description to steer the model): the
// model is offered only the accepted text, and an approved call is
// refused unsent, the folder untouched.
func TestADefinitionChangedSinceAcceptanceIsNotRun(t *testing.T) {
	dir := t.TempDir()
	body, err := os.ReadFile("../examples/packs/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	npm, _ := filepath.Abs("../examples/mcp")
	file := filepath.Join(dir, "reference.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(body), "../mcp/", npm+"/")), 0o644); err != nil {
		t.Fatal(err)
	}
	pins, err := packs.ReadPins("../examples/packs/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	was := pins["files"]["write_file"]
	was.Definition.Description = "Write a file. Accepted before the server's update."
	was.Pin = was.Definition.Pin()
	pins["files"]["write_file"] = was
	b, _ := json.Marshal(pins)
	if err := os.WriteFile(packs.PinsFile(file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, scratch, writer := referenceStack(t, file)
	for _, d := range s.Policy.DefinitionsFor("writer") {
		if d.Name == "files__write_file" && d.Description != was.Definition.Description {
			t.Fatalf("the model was offered %q, not the accepted text", d.Description)
		}
	}
	target := filepath.Join(scratch, "plan.txt")
	first := s.First(t, workflows.ToolCallInput{Tool: "files__write_file", ToolCallID: "w1", Session: writer,
		Args: json.RawMessage(`{"path":` + quoteJSON(target) + `,"content":"x"}`)})
	if first.Status != workflows.StatusPendingApproval {
		t.Fatalf("a write: %+v", first)
	}
	res := decideCard(t, s, first, approve(keeperID))
	if res.Status != workflows.StatusFailed || res.Code != policy.CodeDefinitionChanged || !strings.Contains(res.Message, "otherwise than a person accepted") {
		t.Fatalf("a write whose definition changed: %s/%s %q", res.Status, res.Code, res.Message)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a write whose definition changed left a file: %v", err)
	}
	// The auditor's insights page flags the tool until it is accepted again.
	r := insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}
	p, err := r.Page(context.Background(), insights.Filter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Chart("changed"); c == nil || c.Empty || !strings.Contains(string(c.SVG), ">files__write_file<") {
		t.Fatalf("the insights page's changed definitions: %+v", c)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
