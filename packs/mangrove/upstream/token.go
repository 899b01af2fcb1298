package upstream

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TokenPrefix starts every access token, so the sanitizer can spot one.
const TokenPrefix = "mgv1."

// Claims are what an access token asserts about its bearer.
type Claims struct {
	Subject string   `json:"sub"`
	Role    string   `json:"role"`
	Stores  []int64  `json:"stores"`
	Scopes  []string `json:"scopes"`
	Expires int64    `json:"exp"`
}

// HasScope reports whether the token grants the scope.
func (c Claims) HasScope(s string) bool { return slices.Contains(c.Scopes, s) }

// CoversStore reports whether the token covers the store.
func (c Claims) CoversStore(id int64) bool { return slices.Contains(c.Stores, id) }

// Sign returns a short-lived HMAC-signed access token for the claims.
func Sign(key []byte, c Claims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	return TokenPrefix + body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Errors of Verify.
var (
	ErrMalformed = errors.New("malformed token")
	ErrSignature = errors.New("bad token signature")
	ErrExpired   = errors.New("token expired")
)

// Verify checks the token's signature and expiry and returns its claims.
func Verify(key []byte, token string, now time.Time) (Claims, error) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return Claims{}, ErrMalformed
	}
	body, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Claims{}, ErrMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return Claims{}, ErrSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Claims{}, ErrMalformed
	}
	if now.Unix() >= c.Expires {
		return Claims{}, ErrExpired
	}
	return c, nil
}
