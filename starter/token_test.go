package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestTokenSignsInAtTheDemoProvider: in dev mode `starter token` prints an
// access token the MCP server's audience verifies, for the user asked and
// at the strength asked; outside dev mode, or for a stranger, it refuses.
func TestTokenSignsInAtTheDemoProvider(t *testing.T) {
	p := testenv.NewIdP(t, "http://127.0.0.1:1")
	var users []idp.User
	for _, u := range p.Users {
		users = append(users, u)
	}
	b, _ := json.Marshal(users)
	file := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDP_USERS_FILE", file)
	t.Setenv("MCP_OIDC_ISSUER", p.URL)
	t.Setenv("IDP_MCP_CLIENT_ID", testenv.MCPClientID)
	t.Setenv("TOOLGATE_DEV", "1")
	var out strings.Builder
	if err := run([]string{"token", "--user", "kofi", "--acr", "mfa"}, &out); err != nil {
		t.Fatal(err)
	}
	prov, err := oidc.NewProvider(context.Background(), p.URL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := prov.Verifier(&oidc.Config{ClientID: testenv.MCPAudience}).Verify(context.Background(), strings.TrimSpace(out.String()))
	var c struct {
		ACR string `json:"acr"`
	}
	if err != nil || tok.Subject != "kofi" || tok.Claims(&c) != nil || c.ACR != "mfa" {
		t.Fatalf("the token: %v %+v", err, c)
	}
	if err := run([]string{"token", "--user", "mallory"}, &out); err == nil || !strings.Contains(err.Error(), "not a user") {
		t.Fatalf("a stranger: %v", err)
	}
	t.Setenv("TOOLGATE_DEV", "")
	if err := run([]string{"token", "--user", "ama"}, &out); err == nil || !strings.Contains(err.Error(), "TOOLGATE_DEV") {
		t.Fatalf("outside dev mode: %v", err)
	}
}
