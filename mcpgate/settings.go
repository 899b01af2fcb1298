package mcpgate

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// Settings are the MCP server's environment (MCP_*), with loopback defaults.
type Settings struct {
	// Addr is where it listens (MCP_ADDR, 127.0.0.1:8090).
	Addr string
	// Resource is its URL as clients reach it (MCP_RESOURCE, http://Addr/mcp).
	Resource string
	// Audience is what its access tokens must be for (MCP_AUDIENCE, Resource).
	Audience string
	// Issuer is the OpenID provider that issues them (MCP_OIDC_ISSUER,
	// else APPROVALS_OIDC_ISSUER).
	Issuer string
	// MaxWait bounds a tools/call's wait for a card (MCP_MAX_WAIT, 2m).
	MaxWait time.Duration
	// ClientID is the MCP client registered at the provider, the audience
	// of its logout tokens (MCP_OIDC_CLIENT_ID, toolgate-mcp).
	ClientID string
	// UserClaim and RoleClaim name the access token's claims of the
	// person's user ID and role (MCP_OIDC_USER_CLAIM, MCP_OIDC_ROLE_CLAIM;
	// else the card UI's APPROVALS_OIDC_USER_CLAIM, APPROVALS_OIDC_ROLE_CLAIM:
	// the same provider's words; else preferred_username, toolgate_role).
	UserClaim, RoleClaim string
	// ACR reads the provider's acr values as toolgate's levels
	// (MCP_OIDC_ACR_VALUES, else APPROVALS_OIDC_ACR_VALUES: the same
	// provider's words; unset, it says pwd and mfa).
	ACR policy.ACRValues
	// CardsURL is the card UI as people reach it (TOOLGATE_CARDS_URL): where
	// a client that declares URL elicitation sends a person to decide
	// their own card; none when unset.
	CardsURL string
}

// SettingsFromEnv reads the MCP_* variables; the error names the one to fix.
func SettingsFromEnv() (Settings, error) {
	env := func(k, def string) string {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
		return def
	}
	s := Settings{Addr: env("MCP_ADDR", "127.0.0.1:8090")}
	s.Resource = env("MCP_RESOURCE", "http://"+s.Addr+Path)
	s.Audience = env("MCP_AUDIENCE", s.Resource)
	s.Issuer = env("MCP_OIDC_ISSUER", os.Getenv("APPROVALS_OIDC_ISSUER"))
	s.ClientID = env("MCP_OIDC_CLIENT_ID", "toolgate-mcp")
	// The card UI's names are the same provider's words only when it is
	// the same provider.
	cardUI := func(k, def string) string {
		if s.Issuer == env("APPROVALS_OIDC_ISSUER", "") {
			return env(k, def)
		}
		return def
	}
	s.UserClaim = env("MCP_OIDC_USER_CLAIM", cardUI("APPROVALS_OIDC_USER_CLAIM", "preferred_username"))
	s.RoleClaim = env("MCP_OIDC_ROLE_CLAIM", cardUI("APPROVALS_OIDC_ROLE_CLAIM", "toolgate_role"))
	acrSetting, acr := "MCP_OIDC_ACR_VALUES", env("MCP_OIDC_ACR_VALUES", "")
	if acr == "" {
		acrSetting, acr = "APPROVALS_OIDC_ACR_VALUES", cardUI("APPROVALS_OIDC_ACR_VALUES", "")
	}
	var err error
	if s.ACR, err = policy.ParseACRValues(acrSetting, acr); err != nil {
		return s, err
	}
	s.CardsURL = strings.TrimRight(env("TOOLGATE_CARDS_URL", ""), "/")
	wait, err := time.ParseDuration(env("MCP_MAX_WAIT", "2m"))
	if err != nil || wait < 0 {
		return s, fmt.Errorf("MCP_MAX_WAIT=%q: want a Go duration such as 2m (0 never waits for a card)", os.Getenv("MCP_MAX_WAIT"))
	}
	s.MaxWait = wait
	if s.Issuer == "" {
		return s, fmt.Errorf("MCP_OIDC_ISSUER (or APPROVALS_OIDC_ISSUER) must name the OpenID provider that issues the MCP server's access tokens")
	}
	return s, nil
}

// Claims are how the access tokens these settings name are read, for the
// packs of p, whose resource kinds' claims are resources.
func (s Settings) Claims(p *policy.Policy, resources policy.ClaimMap) Claims {
	return Claims{User: s.UserClaim, Role: s.RoleClaim, Policy: p, Resources: resources, ACR: s.ACR}
}
