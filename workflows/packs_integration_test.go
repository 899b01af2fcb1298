package workflows_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// notesPack is a pack file of one write, post_note, that the model may make
// at once: a POST marked idempotent, its route's dedupes as given.
func notesPack(t *testing.T, dedupes string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "notes.yaml")
	body := `pack: notes
system: the notes service
roles: [{name: reader, label: Reader}]
tools:
  - name: post_note
    description: Post a note to the team's board.
    tier: write_reversible
    idempotent: true
    example: {text: "Cold room at 4 C."}
    args:
      type: object
      properties:
        text: {type: string, maxLength: 200, title: Text, description: The note.}
      required: [text]
    route: {method: POST, path: /v1/notes, body: [text]` + dedupes + `}
    policy:
      roles: [reader]
      decision: allow
`
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestAWriteRetriesOnlyWhereItsUpstreamDedupes: a pack file cannot make a
// POST retry on its word alone. A timeout or a 5xx after the upstream wrote
// would run the POST again, and an upstream that ignores Idempotency-Key
// writes twice: the file is refused unless its route says the upstream
// runs one key once (dedupes). One that says so is retried, sends the same
// key, and the upstream that keeps its promise writes once.
func TestAWriteRetriesOnlyWhereItsUpstreamDedupes(t *testing.T) {
	var mu sync.Mutex
	writes, seen := 0, map[string]bool{}
	dedupe := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" { // the person's seeded secret, traded for a token
			_, _ = w.Write([]byte(`{"accessToken":"t-ama"}`))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if !dedupe || !seen[key] {
			writes++
		}
		first := !seen[key]
		seen[key] = true
		if first { // wrote, then failed to answer: the caller cannot tell
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"note":"N-1"}`))
	}))
	defer srv.Close()
	run := func(file string) workflows.ToolCallResult {
		set, err := packs.Load("mangrove," + file)
		if err != nil {
			t.Fatal(err)
		}
		s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, Upstreams: map[string]string{"notes": srv.URL}})
		ref := issueCredential(t, s, "ama", "reader", nil, policy.ACRPassword)
		if _, err := s.Owner.Exec(context.Background(), `UPDATE vault.credentials SET secret_pack = 'notes' WHERE ref = $1`, ref); err != nil {
			t.Fatal(err)
		}
		reader := policy.Session{UserID: "ama", Role: "reader", SessionID: "s-notes", ConversationID: "notes", CredentialRef: ref}
		return s.Run(t, workflows.ToolCallInput{Tool: "post_note", ToolCallID: "n1", Args: json.RawMessage(`{"text":"Cold room at 4 C."}`), Session: reader})
	}

	_, err := packs.Load("mangrove," + notesPack(t, ""))
	if err == nil {
		res := run(notesPack(t, ""))
		t.Fatalf("a POST marked idempotent, its upstream's deduplication unsaid, was loaded; the call ended %s and the upstream wrote %d times", res.Status, writes)
	}
	if want := "tools[0].idempotent: a POST marked idempotent is sent again after a timeout or a 5xx"; !strings.Contains(err.Error(), want) {
		t.Fatalf("the refusal: %v, want %q", err, want)
	}
	if _, err := packs.Load("mangrove," + notesPack(t, ", keyed: false, dedupes: true")); err == nil || !strings.Contains(err.Error(), "dedupes needs keyed") {
		t.Fatalf("dedupes on a route that sends no key: %v", err)
	}

	dedupe = true
	res := run(notesPack(t, ", dedupes: true"))
	if res.Status != workflows.StatusExecuted || !strings.Contains(string(res.Result), "N-1") || writes != 1 || len(seen) != 1 {
		t.Fatalf("a retried POST to an upstream that dedupes: %s/%s %q, %d writes under %d keys", res.Status, res.Code, res.Message, writes, len(seen))
	}
}
