package idp

import (
	"context"
	"crypto/rand"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// GrantLifetime is how long after a sign-in a grant (the refresh token a
// token exchange issues for it) lets its client act for the person: longer
// than any call waits for its card, as long as the card UI's sessions last.
const GrantLifetime = DefaultLogoutRetryFor

// grant is a refresh token issued by token exchange (RFC 8693) to a client
// that acts for a person: who, how and when they signed in, so every token
// it is exchanged for later says the same.
type grant struct {
	subject, clientID string
	acr               string
	amr               []string
	authTime          time.Time
	expires           time.Time
}

// The grant as op reads a refresh token.
type grantRequest struct {
	g      *grant
	scopes []string
}

func (r *grantRequest) GetAMR() []string            { return r.g.amr }
func (r *grantRequest) GetAudience() []string       { return []string{r.g.clientID} }
func (r *grantRequest) GetAuthTime() time.Time      { return r.g.authTime }
func (r *grantRequest) GetClientID() string         { return r.g.clientID }
func (r *grantRequest) GetScopes() []string         { return r.scopes }
func (r *grantRequest) GetSubject() string          { return r.g.subject }
func (r *grantRequest) SetCurrentScopes(s []string) { r.scopes = s }

// ValidateTokenExchangeRequest allows the two exchanges a client with
// Exchange audiences makes, and nothing else:
//
//   - a person's access token from this provider for a grant
//     (requested_token_type refresh_token, no audience): the client keeps
//     it to act for them later;
//   - that grant, presented by the same client, for an access token to
//     exactly one of its Exchange audiences (the upstream of one pack).
func (s *storage) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	c, ok := s.client(req.GetClientID())
	if !ok || len(c.Exchange) == 0 {
		return oidc.ErrUnauthorizedClient().WithDescription("this client may not exchange tokens")
	}
	if req.GetExchangeActor() != "" {
		return oidc.ErrInvalidRequest().WithDescription("an actor_token is not taken: the client acts for the subject itself")
	}
	if len(req.GetResourses()) > 0 {
		return oidc.ErrInvalidTarget().WithDescription("name the upstream as audience, not resource")
	}
	switch req.GetExchangeSubjectTokenType() {
	case oidc.AccessTokenType:
		if req.GetRequestedTokenType() != oidc.RefreshTokenType || len(req.GetAudience()) > 0 {
			return oidc.ErrInvalidRequest().WithDescription("an access token is exchanged for a grant: requested_token_type refresh_token, no audience")
		}
		claims := req.GetExchangeSubjectTokenClaims()
		// Only a live access token a person's client was given for a
		// resource this client serves (GrantFrom): not an ID token, not a
		// token whose sessions ended since, not one an exchange issued
		// (which would renew a grant past its lifetime).
		jti, _ := claims["jti"].(string)
		s.p.mu.Lock()
		t, live := s.p.tokens[jti]
		s.p.mu.Unlock()
		if !live || t.subject != req.GetSubject() || s.p.opts.Now().After(t.expires) || !slices.ContainsFunc(t.audience, func(a string) bool { return slices.Contains(c.GrantFrom, a) }) {
			return oidc.ErrInvalidRequest().WithDescription("a grant is made from a live access token a person's client was given for a resource this client serves")
		}
		at, ok := claims["auth_time"].(float64)
		if !ok {
			return oidc.ErrInvalidRequest().WithDescription("the subject_token says nothing of the sign-in (auth_time)")
		}
		if s.p.opts.Now().After(time.Unix(int64(at), 0).Add(GrantLifetime)) {
			return oidc.ErrInvalidRequest().WithDescription("the sign-in is older than a grant lives; sign in again")
		}
	case oidc.RefreshTokenType:
		if t := req.GetRequestedTokenType(); t != "" && t != oidc.AccessTokenType {
			return oidc.ErrInvalidRequest().WithDescription("a grant is exchanged for an access token")
		}
		req.SetRequestedTokenType(oidc.AccessTokenType)
		s.p.mu.Lock()
		g, ok := s.p.grants[req.GetExchangeSubjectTokenIDOrToken()]
		s.p.mu.Unlock()
		if !ok || g.clientID != c.ID {
			return oidc.ErrInvalidGrant().WithDescription("the grant was issued to another client")
		}
		if aud := req.GetAudience(); len(aud) != 1 || !slices.Contains(c.Exchange, aud[0]) {
			return oidc.ErrInvalidTarget().WithDescription("name exactly one audience this client may act at")
		}
	default:
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type is an access token or a grant (refresh token)")
	}
	if acc, ok := s.account(req.GetSubject()); !ok || acc.locked {
		return oidc.ErrAccessDenied().WithDescription("the account is locked or gone")
	}
	return nil
}

// CreateTokenExchangeRequest keeps nothing: the grant itself is the record.
func (s *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest gives an exchanged access token
// the person's claims and the sign-in its grant was made from, so its
// upstream sees who signed in, how and when.
func (s *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	acc, ok := s.account(req.GetSubject())
	if !ok || acc.locked {
		return nil, oidc.ErrAccessDenied().WithDescription("the account is locked")
	}
	s.p.mu.Lock()
	g := s.p.grants[req.GetExchangeSubjectTokenIDOrToken()]
	s.p.mu.Unlock()
	claims := map[string]any{}
	for k, v := range acc.Claims {
		if !reserved(k) {
			claims[k] = v
		}
	}
	claims["preferred_username"], claims[ClaimRole], claims[ClaimStores] = acc.ID, acc.Role, acc.Stores
	if g != nil {
		claims["acr"], claims["amr"], claims["auth_time"] = g.acr, g.amr, g.authTime.Unix()
	}
	return claims, nil
}

// SetUserinfoFromTokenExchangeRequest fills an exchanged ID token; none is
// asked for here, but op's interface has it.
func (s *storage) SetUserinfoFromTokenExchangeRequest(_ context.Context, info *oidc.UserInfo, req op.TokenExchangeRequest) error {
	return s.userinfo(info, req.GetSubject())
}

// CreateAccessAndRefreshTokens issues a grant for an exchanged access
// token, with the sign-in its claims carry. A refresh token is issued by
// nothing else: the refresh_token grant is no client's.
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, _ string) (string, string, time.Time, error) {
	te, ok := req.(op.TokenExchangeRequest)
	if !ok {
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("refresh tokens are issued by token exchange alone")
	}
	id, exp, err := s.CreateAccessToken(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	claims := te.GetExchangeSubjectTokenClaims()
	g := &grant{subject: req.GetSubject(), clientID: te.GetClientID()}
	g.acr, _ = claims["acr"].(string)
	if at, ok := claims["auth_time"].(float64); ok {
		g.authTime = time.Unix(int64(at), 0).UTC()
	}
	// A grant lives GrantLifetime from the sign-in, however late it is made.
	g.expires = g.authTime.Add(GrantLifetime)
	if amr, ok := claims["amr"].([]any); ok {
		for _, m := range amr {
			if s, ok := m.(string); ok {
				g.amr = append(g.amr, s)
			}
		}
	}
	token := "grant_" + rand.Text() + rand.Text()
	s.p.mu.Lock()
	s.p.grants[token] = g
	s.p.mu.Unlock()
	return id, token, exp, nil
}

// TokenRequestByRefreshToken finds an unexpired grant whose person's
// sessions have not ended since (a lock, a role change forget them).
func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	g, ok := s.p.grants[token]
	if !ok || s.p.opts.Now().After(g.expires) {
		return nil, op.ErrInvalidRefreshToken
	}
	return &grantRequest{g: g}, nil
}

func (s *storage) client(id string) (Client, bool) {
	for _, c := range s.p.opts.Clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}

func (s *storage) account(id string) (account, bool) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	a, ok := s.p.accounts[id]
	if !ok {
		return account{}, false
	}
	return *a, true
}
