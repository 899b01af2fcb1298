package idp

import (
	"os"
	"strings"
)

// Settings are the demo provider's environment (IDP_*).
type Settings struct {
	// Addr is where it listens (IDP_ADDR, 127.0.0.1:8082).
	Addr string
	// Issuer is its URL as clients name it (IDP_ISSUER, http://Addr).
	Issuer string
	// UsersFile holds the users, created with DemoUsers when missing
	// (IDP_USERS_FILE, .dev/idp-users.json).
	UsersFile string
	// Client is the card UI's registration (IDP_CLIENT_ID, IDP_CLIENT_SECRET,
	// IDP_REDIRECT_URIS, IDP_BACKCHANNEL_LOGOUT_URI).
	Client Client
	// MCPClient is the public client MCP clients sign in with: PKCE,
	// loopback redirects on any port, JWT access tokens for the MCP
	// server's resource URL (IDP_MCP_CLIENT_ID, IDP_MCP_AUDIENCE), whose
	// logout tokens go to the MCP server (IDP_MCP_BACKCHANNEL_LOGOUT_URI).
	MCPClient Client
	// ExchangeClient is toolgate's own confidential client for token
	// exchange (RFC 8693), registered when IDP_EXCHANGE_CLIENT_SECRET is set:
	// IDP_EXCHANGE_CLIENT_ID (toolgate) may turn a person's access token for
	// the MCP server into a grant, and a grant into a token for one of
	// IDP_EXCHANGE_AUDIENCES (the upstreams of the packs that take the
	// provider's tokens).
	ExchangeClient *Client
}

// MCPRedirectURIs are the loopback callbacks MCP clients use (any port).
var MCPRedirectURIs = []string{"http://127.0.0.1/callback", "http://localhost/callback", "http://127.0.0.1/oauth/callback", "http://localhost/oauth/callback"}

// SettingsFromEnv reads the IDP_* variables, with loopback defaults.
func SettingsFromEnv() Settings {
	env := func(k, def string) string {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
		return def
	}
	s := Settings{Addr: env("IDP_ADDR", "127.0.0.1:8082"), UsersFile: env("IDP_USERS_FILE", ".dev/idp-users.json")}
	s.Issuer = env("IDP_ISSUER", "http://"+s.Addr)
	s.Client = Client{ID: env("IDP_CLIENT_ID", "toolgate-approvals"), Secret: os.Getenv("IDP_CLIENT_SECRET"),
		RedirectURIs:         strings.Fields(strings.ReplaceAll(env("IDP_REDIRECT_URIS", "http://127.0.0.1:8080/auth/callback"), ",", " ")),
		BackChannelLogoutURI: env("IDP_BACKCHANNEL_LOGOUT_URI", "http://127.0.0.1:8080/auth/backchannel-logout")}
	s.MCPClient = Client{ID: env("IDP_MCP_CLIENT_ID", "toolgate-mcp"), Public: true, RedirectURIs: MCPRedirectURIs,
		Audience:             env("IDP_MCP_AUDIENCE", "http://127.0.0.1:8090/mcp"),
		BackChannelLogoutURI: env("IDP_MCP_BACKCHANNEL_LOGOUT_URI", "http://127.0.0.1:8090/backchannel-logout")}
	if secret := os.Getenv("IDP_EXCHANGE_CLIENT_SECRET"); secret != "" {
		s.ExchangeClient = &Client{ID: env("IDP_EXCHANGE_CLIENT_ID", "toolgate"), Secret: secret, GrantFrom: []string{s.MCPClient.Audience}}
		for _, a := range strings.Fields(strings.ReplaceAll(os.Getenv("IDP_EXCHANGE_AUDIENCES"), ",", " ")) {
			// As TOOLGATE_UPSTREAMS writes the URL the worker asks for.
			s.ExchangeClient.Exchange = append(s.ExchangeClient.Exchange, strings.TrimRight(a, "/"))
		}
	}
	return s
}
