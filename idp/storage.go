package idp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the op.Storage of the provider: everything in memory.
type storage struct{ p *Provider }

var errNotFound = errors.New("not found")

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if slices.Contains(req.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired()
	}
	a := &authRequest{id: rand.Text(), created: s.p.opts.Now(), req: *req}
	for _, c := range s.p.opts.Clients {
		if c.ID == req.ClientID {
			a.audience = c.Audience
		}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	for id, r := range s.p.requests { // forget abandoned requests
		if s.p.opts.Now().Sub(r.created) > 15*time.Minute {
			delete(s.p.requests, id)
		}
	}
	s.p.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if a, ok := s.p.requests[id]; ok {
		return a, nil
	}
	return nil, errNotFound
}

// AuthRequestByCode takes the code: looked up and deleted under one lock, so
// of any number of exchanges at once exactly one gets the request (RFC 6749
// §4.1.2: a code is used once), whatever the exchange does with it next.
func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	id, ok := s.p.codes[code]
	delete(s.p.codes, code)
	a, found := s.p.requests[id]
	if !ok || !found {
		return nil, errors.New("code invalid or used")
	}
	return a, nil
}

// SaveAuthCode keeps a sign-in's one code. A second code for the same
// request (its callback visited again) is refused: two codes would be two
// token sets for one sign-in.
func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	a := s.p.requests[id]
	if a == nil || a.coded {
		return errors.New("this sign-in has already been given its code")
	}
	a.coded = true
	s.p.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.requests, id)
	for code, rid := range s.p.codes {
		if rid == id {
			delete(s.p.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	var client string
	switch r := req.(type) {
	case *authRequest:
		client = r.req.ClientID
	case op.TokenExchangeRequest:
		client = r.GetClientID()
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if acc, ok := s.p.accounts[req.GetSubject()]; !ok || acc.locked {
		return "", time.Time{}, oidc.ErrAccessDenied().WithDescription("the account is locked")
	}
	id := rand.Text()
	exp := s.p.opts.Now().Add(5 * time.Minute)
	s.p.tokens[id] = &token{subject: req.GetSubject(), clientID: client, audience: req.GetAudience(), scopes: req.GetScopes(), expires: exp}
	return id, exp, nil
}

func (s *storage) TerminateSession(ctx context.Context, user, _ string) error {
	s.p.mu.Lock()
	for id, sess := range s.p.sessions {
		if sess.user == user {
			delete(s.p.sessions, id)
		}
	}
	s.p.mu.Unlock()
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenID, _, _ string) *oidc.Error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.tokens, tokenID)
	delete(s.p.grants, tokenID)
	return nil
}

// GetRefreshTokenInfo lets a client revoke its grant (RFC 7009).
func (s *storage) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if g, ok := s.p.grants[token]; ok && g.clientID == clientID {
		return g.subject, token, nil
	}
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct{ p *Provider }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.p.key }
func (k signingKey) ID() string                                  { return k.p.keyID }

type publicKey struct{ p *Provider }

func (k publicKey) ID() string                         { return k.p.keyID }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.p.key.PublicKey }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return signingKey{s.p}, nil }
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *storage) KeySet(context.Context) ([]op.Key, error) { return []op.Key{publicKey{s.p}}, nil }

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	for _, c := range s.p.opts.Clients {
		if c.ID == id {
			return client{c}, nil
		}
	}
	return nil, fmt.Errorf("no client %q", id)
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	for _, c := range s.p.opts.Clients {
		if c.ID == id && c.Secret != "" && constantEqual(c.Secret, secret) {
			return nil
		}
	}
	return errors.New("the client ID and secret do not match")
}

// SetUserinfoFromScopes is deprecated in op; SetUserinfoFromRequest fills ID tokens.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, _ []string) error {
	return s.userinfo(info, req.GetSubject())
}

// SetUserinfoFromToken answers the userinfo endpoint; a locked account's
// tokens are refused.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.p.mu.Lock()
	t, ok := s.p.tokens[tokenID]
	s.p.mu.Unlock()
	if !ok || t.subject != subject || s.p.opts.Now().After(t.expires) {
		return errors.New("the token is not valid")
	}
	return s.userinfo(info, subject)
}

func (s *storage) userinfo(info *oidc.UserInfo, subject string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	a, ok := s.p.accounts[subject]
	if !ok || a.locked {
		return errors.New("the account is locked or gone")
	}
	info.Subject, info.Name, info.PreferredUsername = a.ID, a.Name, a.ID
	info.AppendClaims(ClaimRole, a.Role)
	info.AppendClaims(ClaimStores, slices.Clone(a.Stores))
	for k, v := range a.Claims {
		if !reserved(k) {
			info.AppendClaims(k, v)
		}
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, res *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.p.mu.Lock()
	t, ok := s.p.tokens[tokenID]
	s.p.mu.Unlock()
	if !ok || t.subject != subject || s.p.opts.Now().After(t.expires) {
		return errors.New("the token is not valid")
	}
	res.Active, res.Subject, res.ClientID, res.Audience = true, subject, t.clientID, t.audience
	res.Scope = t.scopes
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetPrivateClaimsFromRequest puts, into a JWT access token, who the person
// is and how they signed in: what a resource server (the MCP server) needs
// to act for them without asking the provider again.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	a, ok := req.(*authRequest)
	if !ok || a.audience == "" {
		return nil, nil
	}
	s.p.mu.Lock()
	acc, found := s.p.accounts[a.user]
	s.p.mu.Unlock()
	if !found || acc.locked {
		return nil, oidc.ErrAccessDenied().WithDescription("the account is locked")
	}
	claims := map[string]any{}
	for k, v := range acc.Claims {
		if !reserved(k) {
			claims[k] = v
		}
	}
	for k, v := range map[string]any{"preferred_username": acc.ID, ClaimRole: acc.Role, ClaimStores: acc.Stores,
		"acr": a.acr, "amr": a.amr, "auth_time": a.authTime.Unix()} {
		claims[k] = v
	}
	return claims, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// client is a registered relying party as op sees it.
type client struct{ c Client }

func (c client) GetID() string          { return c.c.ID }
func (c client) RedirectURIs() []string { return c.c.RedirectURIs }
func (c client) ApplicationType() op.ApplicationType {
	if c.c.Public {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}
func (c client) AuthMethod() oidc.AuthMethod {
	if c.c.Public {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) GrantTypes() []oidc.GrantType {
	if len(c.c.Exchange) > 0 {
		return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeTokenExchange}
	}
	return []oidc.GrantType{oidc.GrantTypeCode}
}
func (c client) LoginURL(id string) string { return "/login/password?authRequestID=" + id }
func (c client) AccessTokenType() op.AccessTokenType {
	if c.c.Audience != "" || len(c.c.Exchange) > 0 {
		return op.AccessTokenTypeJWT
	}
	return op.AccessTokenTypeBearer
}
func (c client) IDTokenLifetime() time.Duration                               { return 5 * time.Minute }
func (c client) IDTokenUserinfoClaimsAssertion() bool                         { return true }
func (c client) ClockSkew() time.Duration                                     { return 0 }
func (c client) IsScopeAllowed(string) bool                                   { return false }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string     { return keep }
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string { return keep }

// PostLogoutRedirectURIs are the client's /signed-out page, at the origin
// of each redirect URI.
func (c client) PostLogoutRedirectURIs() []string {
	var out []string
	for _, u := range c.c.RedirectURIs {
		if p, err := url.Parse(u); err == nil {
			out = append(out, p.Scheme+"://"+p.Host+"/signed-out")
		}
	}
	return out
}

// DevMode lets a loopback http:// redirect URI through (the demo's).
func (c client) DevMode() bool {
	for _, u := range c.c.RedirectURIs {
		if !strings.HasPrefix(u, "http://127.0.0.1:") && !strings.HasPrefix(u, "http://localhost:") && !strings.HasPrefix(u, "https://") {
			return false
		}
	}
	return true
}

func keep(s []string) []string { return s }

// reserved says a user's extra claim would shadow one the provider sets
// itself (who, how and when they signed in), so it is never sent.
func reserved(claim string) bool {
	switch claim {
	case "iss", "sub", "aud", "exp", "iat", "nbf", "jti", "auth_time", "acr", "amr", "nonce", "azp", "sid", "at_hash", "c_hash",
		"preferred_username", "name", "email", ClaimRole, ClaimStores:
		return true
	}
	return false
}
