package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"golang.org/x/oauth2"
)

// OIDC is how the card UI signs people in: an OpenID provider, this
// client's registration there, and the names of the claims that carry an
// approver's role and resources (so Okta, Entra ID, Keycloak or Google
// Workspace is a matter of settings).
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this card UI's /auth/callback, as registered.
	RedirectURL string
	Scopes      []string
	// Claim names: the user ID, display name and role.
	UserClaim, NameClaim, RoleClaim string
	// ACRValues maps toolgate's levels (pwd, mfa) to the provider's acr
	// values, both for asking (acr_values) and for reading the ID token.
	ACRValues policy.ACRValues
	// Roles are the packs' roles a sign-in may carry (policy.Roles), in
	// the order the card UI names them; auditor is always one more.
	Roles []policy.Role
	// Policy reads a sign-in's resources from the claims Resources names
	// (policy.ClaimMap, TOOLGATE_RESOURCE_CLAIMS).
	Policy    *policy.Policy
	Resources policy.ClaimMap
}

// RolesOf lists the roles of a deployment's packs, for OIDC.Roles.
func RolesOf(p *policy.Policy) []policy.Role {
	var out []policy.Role
	for _, r := range p.Roles() {
		out = append(out, r.Name)
	}
	return out
}

// OIDCFromEnv reads the APPROVALS_OIDC_* settings. The issuer, client ID,
// secret and redirect URL are required.
func OIDCFromEnv() (OIDC, error) {
	env := func(k, def string) string {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
		return def
	}
	o := OIDC{Issuer: env("APPROVALS_OIDC_ISSUER", ""), ClientID: env("APPROVALS_OIDC_CLIENT_ID", ""), ClientSecret: env("APPROVALS_OIDC_CLIENT_SECRET", ""),
		RedirectURL: env("APPROVALS_OIDC_REDIRECT_URL", ""), Scopes: strings.Fields(env("APPROVALS_OIDC_SCOPES", "openid profile")),
		UserClaim: env("APPROVALS_OIDC_USER_CLAIM", "preferred_username"), NameClaim: env("APPROVALS_OIDC_NAME_CLAIM", "name"),
		RoleClaim: env("APPROVALS_OIDC_ROLE_CLAIM", "toolgate_role")}
	var missing []string
	for k, v := range map[string]string{"APPROVALS_OIDC_ISSUER": o.Issuer, "APPROVALS_OIDC_CLIENT_ID": o.ClientID,
		"APPROVALS_OIDC_CLIENT_SECRET": o.ClientSecret, "APPROVALS_OIDC_REDIRECT_URL": o.RedirectURL} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return o, fmt.Errorf("the card UI signs people in with OpenID Connect: set %s (make dev sets them for its demo provider; docs/identity.md shows a real provider's settings)", strings.Join(missing, ", "))
	}
	var err error
	o.ACRValues, err = policy.ParseACRValues("APPROVALS_OIDC_ACR_VALUES", os.Getenv("APPROVALS_OIDC_ACR_VALUES"))
	return o, err
}

// providerACR is the provider's acr value for a toolgate level.
func (o OIDC) providerACR(level string) string { return o.ACRValues.Provider(level) }

// level is the toolgate level of a provider's acr value, "" when unknown.
func (o OIDC) level(acr string) string { return o.ACRValues.Level(acr) }

// Auth is the card UI's relying party: the provider's discovery, the
// OAuth client and the ID token verifier.
type Auth struct {
	cfg      OIDC
	provider *oidc.Provider
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	logout   *oidc.IDTokenVerifier
	// endSession is the provider's end_session_endpoint, if it has one.
	endSession string
}

// NewAuth discovers the provider, retrying for up to wait (the provider
// may be starting beside the card UI).
func NewAuth(ctx context.Context, cfg OIDC, wait time.Duration) (*Auth, error) {
	deadline := time.Now().Add(wait)
	for {
		p, err := oidc.NewProvider(ctx, cfg.Issuer)
		if err == nil {
			var meta struct {
				EndSession string `json:"end_session_endpoint"`
			}
			_ = p.Claims(&meta)
			return &Auth{cfg: cfg, provider: p, endSession: meta.EndSession,
				oauth:    oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL, Endpoint: p.Endpoint(), Scopes: cfg.Scopes},
				verifier: p.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
				logout:   p.Verifier(&oidc.Config{ClientID: cfg.ClientID})}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("discover the OpenID provider %s: %w", cfg.Issuer, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// signInClaims are what a verified ID token says about the person.
type signInClaims struct {
	User     User
	Evidence signoff.AuthEvidence
	AuthTime time.Time
	// IDToken is the raw token, kept as the id_token_hint of a sign-out.
	IDToken string
}

// endSessionURL is where a sign-out sends the browser so the provider's
// session ends too (RP-initiated logout), or "" when it has no such endpoint.
func (a *Auth) endSessionURL(idToken string) string {
	if a.endSession == "" {
		return ""
	}
	back := "/signed-out"
	if u, err := url.Parse(a.cfg.RedirectURL); err == nil {
		back = u.Scheme + "://" + u.Host + "/signed-out"
	}
	q := url.Values{"client_id": {a.cfg.ClientID}, "post_logout_redirect_uri": {back}}
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	return a.endSession + "?" + q.Encode()
}

// claims reads a verified ID token with the configured claim names. The
// error says which claim is missing or malformed.
func (a *Auth) claims(tok *oidc.IDToken) (signInClaims, error) {
	var raw map[string]json.RawMessage
	if err := tok.Claims(&raw); err != nil {
		return signInClaims{}, fmt.Errorf("read the ID token: %w", err)
	}
	str := func(name string) string {
		var s string
		_ = json.Unmarshal(raw[name], &s)
		return s
	}
	var c signInClaims
	c.User.UserID, c.User.Name = str(a.cfg.UserClaim), str(a.cfg.NameClaim)
	if !policy.ValidID(c.User.UserID) {
		return c, fmt.Errorf("the ID token's %q claim is %q, not a user ID (1 to %d letters, digits or . _ @ -)", a.cfg.UserClaim, clip(c.User.UserID), policy.MaxIDLength)
	}
	if c.User.Name == "" {
		c.User.Name = c.User.UserID
	}
	role, err := roleOf(raw[a.cfg.RoleClaim], a.cfg.Roles)
	if err != nil {
		return c, fmt.Errorf("the ID token's %q claim: %w", a.cfg.RoleClaim, err)
	}
	c.User.Role = role
	if a.cfg.Policy == nil {
		return c, errors.New("the card UI has no packs to read a sign-in's resources by")
	}
	if c.User.Resources, err = a.cfg.Policy.ResourcesFromClaims(a.cfg.Resources, raw); err != nil {
		return c, fmt.Errorf("the ID token: %w", err)
	}
	var amr []string
	_ = json.Unmarshal(raw["amr"], &amr)
	var authTime int64
	if err := json.Unmarshal(raw["auth_time"], &authTime); err != nil || authTime <= 0 {
		return c, errors.New("the ID token has no auth_time: ask the provider for it (the card UI needs to know when the person signed in)")
	}
	c.AuthTime = time.Unix(authTime, 0).UTC()
	c.Evidence = signoff.AuthEvidence{Issuer: tok.Issuer, Subject: tok.Subject, ACR: a.cfg.level(str("acr")), AMR: cleanAMR(amr), AuthTime: c.AuthTime.Format(time.RFC3339)}
	return c, nil
}

// roleOf reads a role claim: a string, or a list whose first known role
// counts (the packs' roles and auditor).
func roleOf(raw json.RawMessage, roles []policy.Role) (policy.Role, error) {
	known := append(slices.Clone(roles), RoleAuditor)
	var one string
	if json.Unmarshal(raw, &one) == nil && slices.Contains(known, policy.Role(one)) {
		return policy.Role(one), nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, r := range many {
			if slices.Contains(known, policy.Role(r)) {
				return policy.Role(r), nil
			}
		}
	}
	names := make([]string, len(known))
	for i, r := range known {
		names[i] = string(r)
	}
	return "", fmt.Errorf("no card UI role (%s or %s) in %s", strings.Join(names[:len(names)-1], ", "), RoleAuditor, clip(string(raw)))
}

func cleanAMR(amr []string) []string {
	var out []string
	for _, m := range amr {
		if len(out) < 8 && len(m) <= 32 && m != "" && strings.Trim(m, "abcdefghijklmnopqrstuvwxyz_") == "" {
			out = append(out, m)
		}
	}
	return out
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
