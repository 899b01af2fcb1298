// Package exchange is toolgate's side of OAuth 2.0 Token Exchange (RFC
// 8693) at the identity provider, so that a person acts at a pack's
// upstream with no secret of theirs seeded anywhere and no token of one
// upstream ever sent to another: at sign-in, the access token a person's
// client presented is exchanged for a grant (a refresh token issued to
// toolgate), which the vault keeps; on each call, the grant is exchanged
// for a short-lived access token whose one audience is the tool's pack's
// upstream. The protocol is zitadel/oidc's client; this package only names
// the two exchanges and tells a refusal from an outage.
package exchange

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/tokenexchange"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// Client exchanges tokens at one provider as one confidential client.
type Client struct {
	Issuer, ClientID, ClientSecret string
	// HTTP is the client for discovery and the token endpoint (a 10 s
	// bound when nil).
	HTTP *http.Client

	mu sync.Mutex
	te tokenexchange.TokenExchanger
}

// ErrRefused wraps the provider's refusal (an OAuth error): trying again
// gets the same answer. Any other error is the provider being unreachable.
var ErrRefused = errors.New("the identity provider refused the exchange")

// Grant exchanges a person's access token for a grant toolgate keeps.
func (c *Client) Grant(ctx context.Context, accessToken string) (string, error) {
	res, err := c.exchange(ctx, accessToken, oidc.AccessTokenType, nil, oidc.RefreshTokenType)
	if err != nil {
		return "", err
	}
	if res.RefreshToken == "" {
		return "", fmt.Errorf("%w: it answered without a grant", ErrRefused)
	}
	return res.RefreshToken, nil
}

// Token exchanges a grant for an access token to audience alone, for
// subject. The token must be a JWT access token (RFC 9068) whose aud is
// audience and nothing else and whose sub is subject: a provider that
// ignored the audience asked for, or answered for someone else, would
// otherwise have one upstream handed a token another would take.
func (c *Client) Token(ctx context.Context, grant, audience, subject string) (string, error) {
	res, err := c.exchange(ctx, grant, oidc.RefreshTokenType, []string{audience}, oidc.AccessTokenType)
	if err != nil {
		return "", err
	}
	if res.AccessToken == "" {
		return "", fmt.Errorf("%w: it answered without a token", ErrRefused)
	}
	if why := forOnly(res.AccessToken, audience, subject); why != "" {
		return "", fmt.Errorf("%w: %s", ErrRefused, why)
	}
	return res.AccessToken, nil
}

// forOnly says how a token is not a JWT for audience alone and subject,
// or "". The provider signed it for the upstream to verify; here it is
// read, not verified, to refuse a token toolgate did not ask for.
func forOnly(token, audience, subject string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "the token is not a JWT"
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Aud json.RawMessage `json:"aud"`
		Sub string          `json:"sub"`
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return "the token's claims do not read"
	}
	var auds []string
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		auds = []string{one}
	} else if json.Unmarshal(claims.Aud, &auds) != nil {
		return "the token's audience does not read"
	}
	if len(auds) != 1 || auds[0] != audience {
		return "the token is for another audience than the one asked for"
	}
	if subject != "" && claims.Sub != subject {
		return "the token is for another person than the grant's"
	}
	return ""
}

func (c *Client) exchange(ctx context.Context, subject string, typ oidc.TokenType, audience []string, want oidc.TokenType) (*oidc.TokenExchangeResponse, error) {
	te, err := c.exchanger(ctx)
	if err != nil {
		return nil, err
	}
	res, err := tokenexchange.ExchangeToken(ctx, te, subject, typ, "", "", nil, audience, nil, want)
	var refusal *oidc.Error
	if errors.As(err, &refusal) {
		return nil, fmt.Errorf("%w: %s %s", ErrRefused, refusal.ErrorType, refusal.Description)
	}
	if err != nil {
		return nil, fmt.Errorf("the identity provider's token endpoint: %w", err)
	}
	return res, nil
}

// exchanger discovers the provider on first use, and again after a
// discovery that failed: a worker starts before its provider.
func (c *Client) exchanger(ctx context.Context) (tokenexchange.TokenExchanger, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.te != nil {
		return c.te, nil
	}
	h := c.HTTP
	if h == nil {
		h = &http.Client{Timeout: 10 * time.Second}
	}
	te, err := tokenexchange.NewTokenExchangerClientCredentials(ctx, c.Issuer, c.ClientID, c.ClientSecret, tokenexchange.WithHTTPClient(h))
	if err != nil {
		return nil, fmt.Errorf("discover the identity provider %s: %w", c.Issuer, err)
	}
	c.te = te
	return te, nil
}
