package mcpgate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/policy"
)

// TestATokensACRIsReadInToolgatesLevels: a provider that names its sign-in
// strengths in its own words (APPROVALS_OIDC_ACR_VALUES, or
// MCP_OIDC_ACR_VALUES) has them read as toolgate's levels, as the card UI
// reads its ID tokens; with no mapping, pwd and mfa are read as they are.
// The demo provider says pwd and mfa, so the test maps them the other way
// round: its password sign-in then reads as mfa, its mfa as pwd.
func TestATokensACRIsReadInToolgatesLevels(t *testing.T) {
	f := testenv.NewIdPForMCP(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	ctx := context.Background()
	swapped := policy.ACRValues{policy.ACRPassword: policy.ACRMFA, policy.ACRMFA: policy.ACRPassword}
	for name, c := range map[string]struct {
		values           policy.ACRValues
		user, acr, reads string
	}{
		"unmapped, a password":      {nil, "ama", idp.ACRPassword, policy.ACRPassword},
		"unmapped, a second factor": {nil, "ama", idp.ACRMFA, policy.ACRMFA},
		"mapped, a password":        {swapped, "efua", idp.ACRPassword, policy.ACRMFA},
		"mapped, a second factor":   {swapped, "efua", idp.ACRMFA, policy.ACRPassword},
		"a word the mapping lacks":  {policy.ACRValues{policy.ACRPassword: "urn:x:1fa", policy.ACRMFA: "urn:x:2fa"}, "kofi", idp.ACRPassword, ""},
	} {
		claims := mcpgate.DefaultClaims(testenv.Policy)
		claims.ACR = c.values
		verify, err := mcpgate.NewVerifier(ctx, f.URL, testenv.MCPAudience, claims, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := idp.SignIn(ctx, f.URL, testenv.MCPClientID, f.Users[c.user], c.acr) // one code a period: each user signs in with one at most
		if err != nil {
			t.Fatal(err)
		}
		id, err := verify(ctx, tok.AccessToken)
		if err != nil || id.ACR != c.reads {
			t.Errorf("%s: the token's %s reads as %q (%v), want %q", name, c.acr, id.ACR, err, c.reads)
		}
	}
}

// TestATokensClaimsAreTheProvidersNames: the MCP server reads a token's
// user ID, role and acr by the names a team's provider gives them: its
// own settings, else the card UI's (the same provider), else the demo
// provider's.
func TestATokensClaimsAreTheProvidersNames(t *testing.T) {
	t.Setenv("MCP_OIDC_ISSUER", "https://sso.example.com")
	for name, c := range map[string]struct {
		env             map[string]string
		user, role, mfa string
	}{
		"the demo provider's": {nil, "preferred_username", "toolgate_role", policy.ACRMFA},
		"the card UI's": {map[string]string{"APPROVALS_OIDC_USER_CLAIM": "email", "APPROVALS_OIDC_ROLE_CLAIM": "groups",
			"APPROVALS_OIDC_ACR_VALUES": "pwd=urn:okta:loa:1fa:any,mfa=urn:okta:loa:2fa:any"}, "email", "groups", "urn:okta:loa:2fa:any"},
		"its own": {map[string]string{"APPROVALS_OIDC_USER_CLAIM": "email", "APPROVALS_OIDC_ROLE_CLAIM": "groups", "APPROVALS_OIDC_ACR_VALUES": "pwd=1,mfa=2",
			"MCP_OIDC_USER_CLAIM": "upn", "MCP_OIDC_ROLE_CLAIM": "roles", "MCP_OIDC_ACR_VALUES": "pwd=urn:x:1fa,mfa=urn:x:2fa"}, "upn", "roles", "urn:x:2fa"},
	} {
		for _, k := range []string{"APPROVALS_OIDC_USER_CLAIM", "APPROVALS_OIDC_ROLE_CLAIM", "APPROVALS_OIDC_ACR_VALUES", "MCP_OIDC_USER_CLAIM", "MCP_OIDC_ROLE_CLAIM", "MCP_OIDC_ACR_VALUES"} {
			t.Setenv(k, c.env[k])
		}
		t.Setenv("APPROVALS_OIDC_ISSUER", "https://sso.example.com")
		s, err := mcpgate.SettingsFromEnv()
		claims := s.Claims(testenv.Policy, nil)
		if err != nil || claims.User != c.user || claims.Role != c.role || claims.ACR.Level(c.mfa) != policy.ACRMFA {
			t.Errorf("%s: %+v %v, want %s, %s and mfa said %s", name, claims, err, c.user, c.role, c.mfa)
		}
	}
	// Another provider than the card UI's: its names are not the MCP server's.
	t.Setenv("APPROVALS_OIDC_ISSUER", "https://cards.example.com")
	t.Setenv("MCP_OIDC_USER_CLAIM", "")
	t.Setenv("MCP_OIDC_ROLE_CLAIM", "")
	t.Setenv("MCP_OIDC_ACR_VALUES", "")
	if s, err := mcpgate.SettingsFromEnv(); err != nil || s.UserClaim != "preferred_username" || s.RoleClaim != "toolgate_role" || s.ACR != nil {
		t.Errorf("another provider than the card UI's: %+v %v", s, err)
	}
	t.Setenv("MCP_OIDC_ACR_VALUES", "pwd=a,mfa=b")
	if s, err := mcpgate.SettingsFromEnv(); err != nil || s.ACR.Level("b") != policy.ACRMFA {
		t.Errorf("its own mapping, for another provider than the card UI's: %+v %v", s, err)
	}
	t.Setenv("MCP_OIDC_ACR_VALUES", "gold=1")
	if _, err := mcpgate.SettingsFromEnv(); err == nil || !strings.Contains(err.Error(), "MCP_OIDC_ACR_VALUES=") {
		t.Errorf("a level toolgate does not have: %v", err)
	}
}
