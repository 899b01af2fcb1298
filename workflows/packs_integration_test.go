package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestAPackNamesItsOwnSystem: a call of a second pack's tool runs through
// the same chain beside Mangrove's, and what the model is told about its
// upstream names that pack's system, never the store system.
func TestAPackNamesItsOwnSystem(t *testing.T) {
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: testenv.WithLibrary})
	member := policy.Session{UserID: "ama", Role: testenv.LibraryMember, SessionID: "s-lib", ConversationID: "library",
		CredentialRef: issueCredential(t, s, "ama", testenv.LibraryMember, nil, policy.ACRPassword)}
	// Mangrove's upstream stands in for the library's and knows no books.
	res := s.Run(t, workflows.ToolCallInput{Tool: testenv.LibraryTool, ToolCallID: "find", Args: json.RawMessage(`{"title":"Middlemarch"}`), Session: member})
	if res.Code != policy.CodeUpstreamError || !strings.HasPrefix(res.Message, "The library system refused the call: ") || strings.Contains(res.Message, "store") {
		t.Fatalf("a refused library read: %s/%s %q", res.Status, res.Code, res.Message)
	}
	// The chain is the same: a Mangrove role is not a library role.
	asManager := ama("library")
	res = s.Run(t, workflows.ToolCallInput{Tool: testenv.LibraryTool, ToolCallID: "find2", Args: json.RawMessage(`{"title":"Middlemarch"}`), Session: asManager})
	if res.Code != policy.CodeRole {
		t.Fatalf("a store manager calling the library: %s/%s %q", res.Status, res.Code, res.Message)
	}
	res = s.Run(t, workflows.ToolCallInput{Tool: testenv.LibraryRenew, ToolCallID: "bad", Args: json.RawMessage(`{"loanId":"L-1","weeks":2}`), Session: member})
	if res.Code != policy.CodeInvalidArguments || !strings.Contains(res.Message, `must be a loan id such as "LN-2041"`) {
		t.Fatalf("a malformed loan id: %s/%s %q", res.Status, res.Code, res.Message)
	}
}

// TestAFilePackRunsBesideMangrove: a pack declared in a file alone (the
// handbook of internal/packs/testdata) runs on the real stack beside
// Mangrove's tools: its read executes upstream as the person and is
// audited, its write waits on a card routed to the file's own role.
func TestAFilePackRunsBesideMangrove(t *testing.T) {
	set, err := packs.Load("mangrove,../examples/packs/handbook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy})
	reader := policy.Session{UserID: "ama", Role: "reader", SessionID: "s-hb", ConversationID: "handbook",
		CredentialRef: issueCredential(t, s, "ama", "reader", nil, policy.ACRPassword)}
	res := s.Run(t, workflows.ToolCallInput{Tool: "search_handbook", ToolCallID: "q", Args: json.RawMessage(`{"query":"cold chain breach"}`), Session: reader})
	if res.Status != workflows.StatusExecuted || !strings.Contains(strings.ToLower(string(res.Result)), "cold chain") {
		t.Fatalf("a handbook search: %s/%s %q %s", res.Status, res.Code, res.Message, res.Result)
	}
	var audited int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE tool = 'search_handbook' AND user_id = 'ama' AND event = 'allowed'`).Scan(&audited)
	if audited != 1 {
		t.Fatalf("%d audit rows for the search, want 1", audited)
	}
	first := s.First(t, workflows.ToolCallInput{Tool: "suggest_edit", ToolCallID: "e", Args: json.RawMessage(`{"page":"cold-chain","change":"Add the new supplier's number."}`), Session: reader})
	if first.Status != workflows.StatusPendingApproval || first.ApproverRole != "editor" {
		t.Fatalf("a suggested edit: %+v", first)
	}
}
