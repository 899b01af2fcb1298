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
	"errors"
	"fmt"
	"net/http"
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

// Token exchanges a grant for an access token to audience alone.
func (c *Client) Token(ctx context.Context, grant, audience string) (string, error) {
	res, err := c.exchange(ctx, grant, oidc.RefreshTokenType, []string{audience}, oidc.AccessTokenType)
	if err != nil {
		return "", err
	}
	if res.AccessToken == "" {
		return "", fmt.Errorf("%w: it answered without a token", ErrRefused)
	}
	return res.AccessToken, nil
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
