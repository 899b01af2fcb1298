package workflows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// TestAnHTTPServerIsCalledAsThePersonNeverWithTheirToken: a team's MCP
// server over HTTP that takes the provider's tokens. A call runs as the
// signed-in person with a token the provider issued for the server's
// audience alone (RFC 8693); the caller's own access token never reaches
// it, as the MCP authorization spec requires; a server with a service
// credential is sent that and nothing of the person's; and no token either
// way is in the worker's logs or the audit log.
func TestAnHTTPServerIsCalledAsThePersonNeverWithTheirToken(t *testing.T) {
	id := testenv.NewIdP(t, "http://127.0.0.1:9")
	notes, url := testenv.Notes(t, id.URL)
	t.Setenv("NOTES_TOKEN", testenv.NotesServiceToken)
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.yaml")
	row := func(server string) string {
		return "  - server: " + server + "\n    tool: whoami\n    tier: read\n    idempotent: true\n    example: {}\n    policy: {roles: [member], decision: allow}\n"
	}
	body := "pack: notes\nsystem: the notes server\nroles: [{name: member, label: Member}]\nservers:\n" +
		"  - {name: notes, url: \"" + url + "\", auth: {exchange: \"" + testenv.NotesAudience + "\", bearer: \"${NOTES_TOKEN}\"}}\n" +
		"  - {name: service, url: \"" + url + "\", auth: {bearer: \"${NOTES_TOKEN}\"}}\n" +
		"tools:\n" + row("notes") + row("service")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := packs.Accept(ctx, file, true); err != nil { // lists with the service credential
		t.Fatal(err)
	}
	set, err := packs.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.NewStackWith(t, testenv.StackOptions{Policy: set.Policy, MCPServers: set.Servers, Exchange: id.Exchange()})

	// meera signs in through the MCP server's path: her client's token,
	// exchanged for a grant the vault keeps.
	who, ref, access := testenv.MCPSignIn(t, id, s.Policy, s.DatabaseURL, "meera")
	meera := policy.Session{UserID: who.UserID, Role: who.Role, SessionID: "s-meera", ConversationID: "notes", CredentialRef: ref}

	seen := len(notes.Tokens())
	r := s.Run(t, workflows.ToolCallInput{Tool: "notes__whoami", ToolCallID: "n1", Args: json.RawMessage(`{}`), Session: meera})
	if r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), `"subject":"`+who.Subject+`"`) {
		t.Fatalf("whoami as meera: %s/%s %q %s", r.Status, r.Code, r.Message, r.Result)
	}
	asMeera := notes.Tokens()[seen:]
	if len(asMeera) == 0 {
		t.Fatal("the call sent no token")
	}
	for _, sent := range asMeera {
		if sent == access || sent == testenv.NotesServiceToken {
			t.Fatalf("a call as meera sent %s", map[bool]string{true: "her own access token", false: "the service credential"}[sent == access])
		}
	}

	seen = len(notes.Tokens())
	r = s.Run(t, workflows.ToolCallInput{Tool: "service__whoami", ToolCallID: "n2", Args: json.RawMessage(`{}`), Session: meera})
	if r.Status != workflows.StatusExecuted || !strings.Contains(string(r.Result), `"subject":"service"`) {
		t.Fatalf("whoami on the service credential: %s/%s %q %s", r.Status, r.Code, r.Message, r.Result)
	}
	for _, sent := range notes.Tokens()[seen:] {
		if sent != testenv.NotesServiceToken {
			t.Fatal("a server with a service credential was sent a token of the person's")
		}
	}

	var audit string
	if err := s.Owner.QueryRow(ctx, `SELECT coalesce(string_agg(row_to_json(a)::text, ' '), '') FROM audit_log a`).Scan(&audit); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	for _, e := range s.Logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		logs.WriteString(e.Message + string(b))
	}
	for _, secret := range append(notes.Tokens(), access) {
		if strings.Contains(audit, secret) || strings.Contains(logs.String(), secret) {
			t.Fatal("a token is in the audit log or the worker's logs")
		}
	}
}
