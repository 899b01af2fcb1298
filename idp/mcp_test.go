package idp_test

import (
	"context"
	"slices"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/toolgate/toolgate/idp"
)

// TestAccessTokensForAResource: the public MCP client signs in headless
// with PKCE; its access token is a JWT the resource verifies with the
// provider's JWKS, for its audience, naming the person, their role and
// stores and how they signed in; a token for another audience is refused,
// and the confidential client's tokens stay opaque.
func TestAccessTokensForAResource(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	prov, err := oidc.NewProvider(ctx, f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	verify := prov.Verifier(&oidc.Config{ClientID: mcpAudience})
	for user, acr := range map[string]string{"ama": idp.ACRPassword, "kofi": idp.ACRMFA} {
		tok, err := idp.SignIn(ctx, f.srv.URL, "mcp", f.users[user], acr)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		at, err := verify.Verify(ctx, tok.AccessToken)
		if err != nil {
			t.Fatalf("%s's access token does not verify for the resource: %v", user, err)
		}
		var c struct {
			User     string  `json:"preferred_username"`
			Role     string  `json:"toolgate_role"`
			Stores   []int64 `json:"toolgate_stores"`
			ACR      string  `json:"acr"`
			AuthTime int64   `json:"auth_time"`
		}
		if err := at.Claims(&c); err != nil || at.Subject != user || c.User != user || c.Role != f.users[user].Role || !slices.Equal(c.Stores, f.users[user].Stores) ||
			c.ACR != acr || c.AuthTime == 0 {
			t.Fatalf("%s's claims: %v %+v", user, err, c)
		}
		if _, err := prov.Verifier(&oidc.Config{ClientID: "another-resource"}).Verify(ctx, tok.AccessToken); err == nil {
			t.Fatal("the token verifies for another audience")
		}
	}
	if _, err := idp.SignIn(ctx, f.srv.URL, "mcp", idp.User{ID: "ama", Password: "wrong"}, ""); err == nil {
		t.Fatal("a wrong password signed in")
	}
}
