package config

import (
	"strings"
	"testing"
)

// TestWebhookSettings: a webhook needs an http(s) URL and a secret of at
// least MinSecretLength, and the error says which to fix; without a URL
// there is none.
func TestWebhookSettings(t *testing.T) {
	for _, c := range []struct{ url, secret, want string }{
		{"", "", ""},
		{"ftp://hooks.example.com", strings.Repeat("s", 32), "want an http or https URL"},
		{"https://hooks.example.com/cards", "short", "TOOLGATE_WEBHOOK_SECRET is 5 characters"},
		{"https://hooks.example.com/cards", strings.Repeat("s", 32), ""},
	} {
		t.Setenv("TOOLGATE_WEBHOOK_URL", c.url)
		t.Setenv("TOOLGATE_WEBHOOK_SECRET", c.secret)
		cfg, err := FromEnv()
		switch {
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.url, err, c.want)
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.url, err)
		case c.want == "" && (cfg.Webhook != nil) != (c.url != ""):
			t.Errorf("%q: webhook %+v", c.url, cfg.Webhook)
		}
	}
}
