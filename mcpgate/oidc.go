package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/policy"
	"go.uber.org/zap"
)

// Claims name where an access token carries the person's user ID and
// role, and read its resources by the packs' claim map.
type Claims struct {
	User, Role string
	Policy     *policy.Policy
	Resources  policy.ClaimMap
	// ACR reads the provider's acr values as toolgate's levels (nil: it
	// says pwd and mfa).
	ACR policy.ACRValues
}

// DefaultClaims are the demo provider's user and role claims and the
// packs' own resource claims (policy.ClaimMap with no override).
func DefaultClaims(p *policy.Policy) Claims {
	m, _ := p.ClaimMap("")
	return Claims{User: "preferred_username", Role: "toolgate_role", Policy: p, Resources: m}
}

// NewVerifier discovers the OpenID provider (retrying for up to wait while
// it starts) and returns a token check: a JWT access token signed with the
// provider's JWKS key, from its issuer, for audience, unexpired, naming a
// user and a role, with resources its claims grant.
func NewVerifier(ctx context.Context, issuer, audience string, claims Claims, wait time.Duration) (func(context.Context, string) (Identity, error), error) {
	prov, err := discover(ctx, issuer, wait)
	if err != nil {
		return nil, err
	}
	v := prov.Verifier(&oidc.Config{ClientID: audience})
	return func(ctx context.Context, raw string) (Identity, error) {
		tok, err := v.Verify(ctx, raw)
		if err != nil {
			return Identity{}, err
		}
		var all map[string]any
		if err := tok.Claims(&all); err != nil {
			return Identity{}, err
		}
		var byName map[string]json.RawMessage
		if err := tok.Claims(&byName); err != nil {
			return Identity{}, err
		}
		id := Identity{Issuer: tok.Issuer, Subject: tok.Subject, Expiry: tok.Expiry, Token: raw}
		id.UserID, _ = all[claims.User].(string)
		if claims.Policy == nil {
			return Identity{}, errors.New("the MCP server has no packs to read a token's resources by")
		}
		id.Role = roleOf(all[claims.Role], claims.Policy)
		if id.Resources, err = claims.Policy.ResourcesFromClaims(claims.Resources, byName); err != nil {
			return Identity{}, fmt.Errorf("the token: %w", err)
		}
		acr, _ := all["acr"].(string)
		id.ACR = claims.ACR.Level(acr)
		if at, ok := all["auth_time"].(float64); ok {
			id.AuthTime = time.Unix(int64(at), 0).UTC()
		}
		if !policy.ValidID(id.UserID) || id.Role == "" {
			return Identity{}, errors.New("the token names no user or role")
		}
		if id.Subject == "" || id.AuthTime.IsZero() {
			// Without them no revocation could tell this sign-in from another.
			return Identity{}, errors.New("the token names no subject or sign-in time (auth_time)")
		}
		return id, nil
	}, nil
}

// VaultCredentials issues a sign-in's credential through the vault's one
// function the MCP server's role may call (migration 025). With x, the
// sign-in's access token is first exchanged for a grant (RFC 8693), which
// the credential holds for the packs whose upstreams take the provider's
// tokens; a person with a seeded secret still gets a credential when the
// provider cannot give one.
func VaultCredentials(pool *pgxpool.Pool, x *exchange.Client, log *zap.Logger) func(context.Context, Identity) (string, error) {
	if log == nil {
		log = zap.NewNop()
	}
	return func(ctx context.Context, id Identity) (string, error) {
		var grant string
		var grantErr error
		// A person's token goes to the provider that issued it, and no other.
		if x != nil && id.Issuer == x.Issuer {
			if grant, grantErr = x.Grant(ctx, id.Token); grantErr != nil {
				log.Warn("no grant for the sign-in: the packs that take the provider's tokens will refuse its calls", zap.String("user", id.UserID), zap.Error(grantErr))
			}
		}
		var ref string
		err := pool.QueryRow(ctx, `SELECT vault.issue_for_sign_in_grant($1, $2, $3, $4, $5::jsonb, $6, $7, $8)`,
			id.UserID, id.Issuer, id.Subject, string(id.Role), id.Resources, id.ACR, id.AuthTime, grant).Scan(&ref)
		if err != nil {
			return "", errors.Join(fmt.Errorf("issue a credential for %s: %w", id.UserID, err), grantErr)
		}
		return ref, nil
	}
}

// VaultSeal seals a caller's factor in the vault for one verification
// call (vault.seal_factor) and returns its reference.
func VaultSeal(pool *pgxpool.Pool) func(ctx context.Context, credentialRef, tool, factor string) (string, error) {
	return func(ctx context.Context, credentialRef, tool, factor string) (string, error) {
		var ref string
		if err := pool.QueryRow(ctx, `SELECT vault.seal_factor($1, $2, $3)`, credentialRef, tool, factor).Scan(&ref); err != nil {
			return "", fmt.Errorf("seal the factor: %w", err)
		}
		return ref, nil
	}
}

// VaultRevocations asks the vault whether a sign-in was revoked after it
// was made (migration 022): a lock or a role change at the provider.
func VaultRevocations(pool *pgxpool.Pool) func(context.Context, Identity) (bool, error) {
	return func(ctx context.Context, id Identity) (bool, error) {
		var at any
		if !id.AuthTime.IsZero() {
			at = id.AuthTime
		}
		var revoked bool
		if err := pool.QueryRow(ctx, `SELECT vault.sign_in_revoked($1, $2, $3)`, id.Issuer, id.Subject, at).Scan(&revoked); err != nil {
			return true, fmt.Errorf("check the sign-in of %s: %w", id.UserID, err)
		}
		return revoked, nil
	}
}

// BackChannelLogoutEvent is the events member a logout token must carry.
const BackChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// NewLogoutVerifier discovers the OpenID provider (retrying for up to
// wait) and returns a logout token check for the MCP client clientID:
// signed with the provider's key, from its issuer, for clientID, carrying
// the back-channel logout event and a subject, and no nonce.
func NewLogoutVerifier(ctx context.Context, issuer, clientID string, wait time.Duration) (func(context.Context, string) (Logout, error), error) {
	prov, err := discover(ctx, issuer, wait)
	if err != nil {
		return nil, err
	}
	v := prov.Verifier(&oidc.Config{ClientID: clientID})
	return func(ctx context.Context, raw string) (Logout, error) {
		tok, err := v.Verify(ctx, raw)
		if err != nil {
			return Logout{}, err
		}
		var claims struct {
			Events map[string]json.RawMessage `json:"events"`
			Nonce  *string                    `json:"nonce"`
			Reason string                     `json:"toolgate_reason"`
		}
		if err := tok.Claims(&claims); err != nil {
			return Logout{}, err
		}
		if _, ok := claims.Events[BackChannelLogoutEvent]; !ok || claims.Nonce != nil || tok.Subject == "" {
			return Logout{}, errors.New("not a logout token: it needs the back-channel logout event and a subject, and no nonce")
		}
		reason := claims.Reason
		if reason == "" {
			reason = "logged out at the provider"
		}
		return Logout{Issuer: tok.Issuer, Subject: tok.Subject, Reason: reason}, nil
	}, nil
}

// VaultRevoke ends a sign-in's authority through the vault (migration 022):
// its credentials revoked, its tokens refused by VaultRevocations.
func VaultRevoke(pool *pgxpool.Pool) func(context.Context, Logout) error {
	return func(ctx context.Context, l Logout) error {
		if _, err := pool.Exec(ctx, `SELECT vault.revoke_sign_in($1, $2, $3)`, l.Issuer, l.Subject, l.Reason); err != nil {
			return fmt.Errorf("revoke the sign-in of %s: %w", l.Subject, err)
		}
		return nil
	}
}

// discover finds the OpenID provider, retrying for up to wait while it starts.
func discover(ctx context.Context, issuer string, wait time.Duration) (*oidc.Provider, error) {
	for deadline := time.Now().Add(wait); ; time.Sleep(500 * time.Millisecond) {
		prov, err := oidc.NewProvider(ctx, issuer)
		if err == nil {
			return prov, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the OpenID provider %s: %w", issuer, err)
		}
	}
}

// roleOf reads a role claim as the card UI does: a string, or a list whose
// first role a pack declares; "" when there is none.
func roleOf(claim any, p *policy.Policy) policy.Role {
	known := func(r string) bool {
		for _, spec := range p.Roles() {
			if string(spec.Name) == r {
				return true
			}
		}
		return false
	}
	switch v := claim.(type) {
	case string:
		return policy.Role(v)
	case []any:
		for _, x := range v {
			if r, ok := x.(string); ok && known(r) {
				return policy.Role(r)
			}
		}
	}
	return ""
}
