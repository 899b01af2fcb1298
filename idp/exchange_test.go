package idp_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/idp"
)

// TestTokenExchangeActsForThePersonAtOneAudience: toolgate's client turns
// a person's access token into a grant, and the grant into a JWT for one
// upstream alone that names the person, their claims and the sign-in the
// grant was made from. Every other exchange is refused: another audience,
// another client or its grant, a wrong secret, a token that is not a grant,
// an ID token or another client's token for a grant, the refresh_token
// grant type, and a grant, or a new one, once the person's sessions ended.
func TestTokenExchangeActsForThePersonAtOneAudience(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	prov, err := oidc.NewProvider(ctx, f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := idp.SignIn(ctx, f.srv.URL, "mcp", f.users["cara"], idp.ACRPassword)
	if err != nil {
		t.Fatal(err)
	}
	signedIn, err := prov.Verifier(&oidc.Config{ClientID: mcpAudience}).Verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		AuthTime int64 `json:"auth_time"`
	}
	if err := signedIn.Claims(&first); err != nil {
		t.Fatal(err)
	}
	x := &exchange.Client{Issuer: f.srv.URL, ClientID: "toolgate", ClientSecret: exchangeSecret}
	grant, err := x.Grant(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	desk, err := x.Token(ctx, grant, deskAudience, "cara")
	if err != nil {
		t.Fatal(err)
	}
	at, err := prov.Verifier(&oidc.Config{ClientID: deskAudience}).Verify(ctx, desk)
	if err != nil {
		t.Fatalf("the exchanged token does not verify for the desk: %v", err)
	}
	var c struct {
		User     string   `json:"preferred_username"`
		Role     string   `json:"toolgate_role"`
		Accounts []string `json:"carddesk_accounts"`
		ACR      string   `json:"acr"`
		AuthTime int64    `json:"auth_time"`
	}
	if err := at.Claims(&c); err != nil || at.Subject != "cara" || c.User != "cara" || c.Role != "card_agent" ||
		!slices.Equal(c.Accounts, []string{"ACC-4471", "ACC-5120"}) || c.ACR != idp.ACRPassword || c.AuthTime != first.AuthTime {
		t.Fatalf("the exchanged token's claims: %v %+v (signed in at %d)", err, c, first.AuthTime)
	}
	for _, aud := range []string{mcpAudience, "other.test", "https://desk.test/"} {
		if _, err := prov.Verifier(&oidc.Config{ClientID: aud}).Verify(ctx, desk); err == nil {
			t.Fatalf("the desk's token verifies for %s", aud)
		}
	}

	refused := []struct {
		name string
		do   func() error
	}{
		{"an audience the client may not act at", func() error { _, err := x.Token(ctx, grant, "https://elsewhere.test", "cara"); return err }},
		{"two audiences", func() error {
			return post(t, f.srv.URL, "toolgate", exchangeSecret, grant, "refresh_token", deskAudience, "https://other.test")
		}},
		{"a resource instead of an audience", func() error {
			return postForm(t, f.srv.URL, "toolgate", exchangeSecret, url.Values{"resource": {deskAudience}, "subject_token": {grant},
				"subject_token_type": {"urn:ietf:params:oauth:token-type:refresh_token"}})
		}},
		{"a client that exchanges nothing", func() error {
			_, err := (&exchange.Client{Issuer: f.srv.URL, ClientID: "cards", ClientSecret: "s3cret-s3cret-s3cret-s3cret-s3cret"}).Token(ctx, grant, deskAudience, "cara")
			return err
		}},
		{"another exchange client's grant", func() error {
			_, err := (&exchange.Client{Issuer: f.srv.URL, ClientID: "other-gate", ClientSecret: exchangeSecret}).Token(ctx, grant, deskAudience, "cara")
			return err
		}},
		{"a wrong secret", func() error {
			_, err := (&exchange.Client{Issuer: f.srv.URL, ClientID: "toolgate", ClientSecret: "not-" + exchangeSecret}).Token(ctx, grant, deskAudience, "cara")
			return err
		}},
		{"an access token as a grant", func() error { _, err := x.Token(ctx, tok.AccessToken, deskAudience, "cara"); return err }},
		{"the desk's token for a grant (renewing it)", func() error { _, err := x.Grant(ctx, desk); return err }},
		{"a made-up grant", func() error {
			_, err := x.Token(ctx, "grant_"+strings.Repeat("A", 52), deskAudience, "cara")
			return err
		}},
		{"a made-up access token", func() error { _, err := x.Grant(ctx, "eyJhbGciOiJub25lIn0.e30."); return err }},
		{"an ID token for a grant", func() error {
			id, _ := tok.Extra("id_token").(string)
			if id == "" {
				t.Fatal("the sign-in gave no ID token")
			}
			_, err := x.Grant(ctx, id)
			return err
		}},
		{"another exchange client's grant from the person's token", func() error {
			_, err := (&exchange.Client{Issuer: f.srv.URL, ClientID: "other-gate", ClientSecret: exchangeSecret}).Grant(ctx, tok.AccessToken)
			return err
		}},
		{"the grant at the refresh_token grant type", func() error {
			return postForm(t, f.srv.URL, "toolgate", exchangeSecret, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {grant}})
		}},
	}
	for _, r := range refused {
		if err := r.do(); err == nil {
			t.Errorf("%s: exchanged", r.name)
		} else if !errors.Is(err, exchange.ErrRefused) && !strings.Contains(err.Error(), "400") && !strings.Contains(err.Error(), "401") {
			t.Errorf("%s: not a refusal: %v", r.name, err)
		}
	}

	if err := f.p.SetRole(ctx, "cara", "card_supervisor", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Token(ctx, grant, deskAudience, "cara"); !errors.Is(err, exchange.ErrRefused) {
		t.Fatalf("the grant outlived the role it was made under: %v", err)
	}
	if _, err := x.Grant(ctx, tok.AccessToken); !errors.Is(err, exchange.ErrRefused) {
		t.Fatalf("a token from before the role change made a new grant: %v", err)
	}
}

func post(t *testing.T, issuer, id, secret, subject, typ string, audiences ...string) error {
	t.Helper()
	return postForm(t, issuer, id, secret, url.Values{"audience": audiences, "subject_token": {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:" + typ}})
}

func postForm(t *testing.T, issuer, id, secret string, form url.Values) error {
	t.Helper()
	if form.Get("grant_type") == "" {
		form.Set("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
	}
	req, err := http.NewRequest(http.MethodPost, issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return nil
	}
	return errors.New(res.Status)
}
