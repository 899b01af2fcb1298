package approvals_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/toolgate/toolgate/approvals"
)

// TestFailedSignInsAreThrottled: after five wrong passwords for one user
// from one address, further sign-ins for that user are refused for a while,
// even with the right password; another user is not affected.
func TestFailedSignInsAreThrottled(t *testing.T) {
	u := newUI(t, 0)
	post := func(user, password string) int {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(u.URL+"/signin", url.Values{"user": {user}, "password": {password}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		if code := post("ama", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i+1, code)
		}
	}
	if code := post("ama", approvals.DemoPassword); code != http.StatusTooManyRequests {
		t.Fatalf("the right password after five failures: %d, want 429", code)
	}
	if code := post("kofi", approvals.DemoPassword); code != http.StatusSeeOther {
		t.Fatalf("another user: %d, want a signed-in redirect", code)
	}
}
