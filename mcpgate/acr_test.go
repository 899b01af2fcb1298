package mcpgate_test

import (
	"context"
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
