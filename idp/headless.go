package idp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"
)

// SignIn is a headless sign-in at the demo provider, for scripts and tests
// (starter token): the authorization code flow with PKCE as a public client
// whose loopback callback is never listened on, answering the password
// page and, for acr "mfa", the code page with a code computed from the
// user's TOTP secret. It returns the token response (the access token is a
// JWT for the client's audience when the client has one).
func SignIn(ctx context.Context, issuer, clientID string, u User, acr string) (*oauth2.Token, error) {
	jar, _ := cookiejar.New(nil)
	redirect := "http://127.0.0.1:1/callback"
	var code string
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			code = r.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	conf := oauth2.Config{ClientID: clientID, RedirectURL: redirect, Scopes: []string{"openid", "profile"},
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("prompt", "login")}
	if acr != "" {
		opts = append(opts, oauth2.SetAuthURLParam("acr_values", acr))
	}
	page, err := fetch(hc, http.MethodGet, conf.AuthCodeURL("headless", opts...), nil)
	if err != nil {
		return nil, err
	}
	page, err = answer(hc, issuer+"/login/password", page, url.Values{"username": {u.ID}, "password": {u.Password}})
	if err != nil {
		return nil, err
	}
	if code == "" && strings.Contains(page, `name="code"`) {
		otp, err := totp.GenerateCode(u.TOTPSecret, time.Now())
		if err != nil {
			return nil, fmt.Errorf("sign in %s: TOTP: %w", u.ID, err)
		}
		if _, err := answer(hc, issuer+"/login/totp", page, url.Values{"code": {otp}}); err != nil {
			return nil, err
		}
	}
	if code == "" {
		return nil, fmt.Errorf("sign in %s: the provider did not return a code (wrong password, a locked account, or a code already used this period)", u.ID)
	}
	return conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), code, oauth2.VerifierOption(verifier))
}

var authRequestIDRe = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)

// answer posts a sign-in page's form with the page's auth request ID.
func answer(hc *http.Client, to, page string, form url.Values) (string, error) {
	m := authRequestIDRe.FindStringSubmatch(page)
	if m == nil {
		return "", errors.New("sign in: not a sign-in page of the provider")
	}
	form.Set("authRequestID", m[1])
	return fetch(hc, http.MethodPost, to, form)
}

func fetch(hc *http.Client, method, to string, form url.Values) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, to, body)
	if err != nil {
		return "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("sign in: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}
