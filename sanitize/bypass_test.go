package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
)

// Bypasses is a table of secrets and PII dressed to slip past pattern
// matching: look-alike and full-width characters, zero-width characters,
// secrets in object keys, key names, and the token shapes of common
// services. Each entry's leak must not survive anywhere the sanitizer's
// output goes. Exported to the package's tests only; the integration suite
// in workflows/ keeps its own copy of a few, sent through the real stack.
var bypasses = []struct {
	name string
	// json is an object holding the secret; leak is the part that must go.
	json, leak string
}{
	{"full-width email", `{"note":"write to ａｍａ＠ｍａｎｇｒｏｖｅ．ｅｘａｍｐｌｅ"}`, "mangrove"},
	{"full-width at sign", `{"note":"ama＠mangrove.example"}`, "ama"},
	{"full-width phone", `{"note":"call ＋２３３ ２４ ５５５ ０１２３ tonight"}`, "５５５"},
	{"full-width card", `{"note":"card ４１１１ １１１１ １１１１ １１１１"}`, "１１１１ １１１１"},
	{"zero-width in an email", `{"note":"ama\u200b@mangrove.example"}`, "mangrove.example"},
	{"zero-width in a phone", `{"note":"+233\u200c 24 555 0123"}`, "555 0123"},
	{"zero-width in a token", `{"note":"sk-\u200dproj4f9a8b7c6d5e4f3a2b1c"}`, "proj4f9a8b7c6d5e4f3a2b1c"},
	{"soft hyphen in a token", `{"note":"ghp_\u00adAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}`, "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"},
	{"word joiner in bearer", `{"note":"Bearer\u2060 mgv1.abc.def"}`, "mgv1.abc.def"},
	{"full-width bearer", `{"note":"Ｂｅａｒｅｒ abcdefghijklmnop"}`, "abcdefghijklmnop"},
	{"token as a key", `{"sk-live4f9a8b7c6d5e4f3a2b1c":"x"}`, "live4f9a8b7c6d5e4f3a2b1c"},
	{"email as a key", `{"ama@mangrove.example":"owner"}`, "ama@mangrove"},
	{"passphrase", `{"passphrase":"correct horse battery"}`, "correct horse"},
	{"otp", `{"otp":"492031"}`, "492031"},
	{"totp code", `{"totpCode":"492031"}`, "492031"},
	{"credential", `{"credential":"cred-kofi-raw"}`, "cred-kofi-raw"},
	{"credentialRef", `{"credentialRef":"cred-kofi"}`, "cred-kofi"},
	{"session", `{"session":"s3ss10nv4lue"}`, "s3ss10nv4lue"},
	{"session cookie", `{"set-cookie":"sid=abc123def456"}`, "abc123def456"},
	{"api_key", `{"api_key":"k-12345678"}`, "k-12345678"},
	{"x-api-key", `{"x-api-key":"k-12345678"}`, "k-12345678"},
	{"private_key", `{"private_key":"MIIEvQIBADANBg"}`, "MIIEvQIBADANBg"},
	{"refresh token", `{"refresh_token":"rt-98765"}`, "rt-98765"},
	{"nested secret key", `{"user":{"auth":{"pwd":"hunter2"}}}`, "hunter2"},
	{"secret key in a list", `{"items":[{"apiSecret":"hunter2"}]}`, "hunter2"},
	{"GitHub token", `{"note":"use ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}`, "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"},
	{"GitHub fine-grained token", `{"note":"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP"}`, "11ABCDEFG0123456789"},
	{"OpenAI project key", `{"note":"sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12"}`, "Ab12Cd34Ef56Gh78Ij90Kl12"},
	{"Anthropic key", `{"note":"sk-ant-api03-Ab12Cd34Ef56Gh78Ij90"}`, "Ab12Cd34Ef56Gh78Ij90"},
	{"Stripe live key", `{"note":"sk_live_4eC39HqLyjWDarjtT1zdp7dc"}`, "4eC39HqLyjWDarjtT1zdp7dc"},
	{"Stripe restricted key", `{"note":"rk_live_4eC39HqLyjWDarjtT1zdp7dc"}`, "4eC39HqLyjWDarjtT1zdp7dc"},
	{"Slack bot token", `{"note":"xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"}`, "AbCdEfGhIjKlMnOpQrStUvWx"},
	{"Slack user token", `{"note":"xoxp-1234-5678-abcdef"}`, "5678-abcdef"},
	{"Slack webhook", `{"note":"https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX"}`, "XXXXXXXXXXXXXXXX"},
	{"AWS access key", `{"note":"AKIAIOSFODNN7EXAMPLE"}`, "IOSFODNN7EXAMPLE"},
	{"AWS temporary key", `{"note":"ASIAIOSFODNN7EXAMPLE"}`, "IOSFODNN7EXAMPLE"},
	{"AWS secret after its name", `{"note":"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`, "wJalrXUtnFEMI"},
	{"Google API key", `{"note":"AIzaSyA-1234567890abcdefghijklmnopqrstu"}`, "1234567890abcdefghijklmnopqrstu"},
	{"GitLab token", `{"note":"glpat-Ab12Cd34Ef56Gh78Ij90"}`, "Ab12Cd34Ef56Gh78Ij90"},
	{"npm token", `{"note":"npm_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"}`, "Ab12Cd34Ef56Gh78Ij90Kl12"},
	{"JWT", `{"note":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbWEifQ.c2lnbmF0dXJl"}`, "eyJzdWIiOiJhbWEifQ"},
	{"short JWT header", `{"note":"eyJhbGci.eyJzdWIi.c2ln"}`, "eyJzdWIi"},
	{"PEM private key", `{"note":"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"}`, "MIIEowIBAAKCAQEA7"},
	{"password in a URL", `{"note":"postgres://admin:hunter2@db.example/prod"}`, "hunter2"},
	{"password in text", `{"note":"the wifi password: hunter2 (do not share)"}`, "hunter2"},
	{"password= in text", `{"note":"login with pwd=hunter2"}`, "hunter2"},
	{"Basic auth header", `{"note":"Authorization: Basic YWRtaW46aHVudGVyMg=="}`, "YWRtaW46aHVudGVyMg"},
}

// TestBypassesAreRedacted runs every entry through Args and Result: the leak
// is gone from both, and the output is still valid JSON.
func TestBypassesAreRedacted(t *testing.T) {
	for _, b := range bypasses {
		if !json.Valid([]byte(b.json)) {
			t.Fatalf("%s: the table entry is not JSON", b.name)
		}
		for what, out := range map[string][]byte{"args": Sanitizer{}.Args([]byte(b.json)), "result": Sanitizer{}.Result([]byte(b.json))} {
			if !json.Valid(out) {
				t.Errorf("%s (%s): not JSON: %s", b.name, what, out)
			}
			if strings.Contains(string(out), b.leak) {
				t.Errorf("%s (%s): %q survived in %s", b.name, what, b.leak, out)
			}
		}
	}
}

// TestOrdinaryTextSurvives: the stricter matching still leaves the demo's
// ordinary answers alone.
func TestOrdinaryTextSurvives(t *testing.T) {
	for _, in := range []string{
		`{"article":"UHT milk 1 L, case of 12","articleId":40211,"cases":6,"storeId":112}`,
		`{"summary":"Store 112 has 6 cases of UHT milk 1 L, case of 12."}`,
		`{"deliveryId":"DL-5501","expected":"06:30","supplier":"Volta Dairies"}`,
		`{"grnId":"GRN-88213","note":"6 cases short"}`,
		`{"title":"Milk handling guide, part 3","sessionsHeld":2,"skipping":"no"}`,
		`{"transferNumber":"TR-000001","taskId":7,"date":"2026-11-30"}`,
	} {
		out := Sanitizer{}.Result([]byte(in))
		var a, b any
		_ = json.Unmarshal([]byte(in), &a)
		_ = json.Unmarshal(out, &b)
		if ja, _ := json.Marshal(a); string(ja) != func() string { jb, _ := json.Marshal(b); return string(jb) }() {
			t.Errorf("ordinary text changed:\n in %s\nout %s", in, out)
		}
	}
}
