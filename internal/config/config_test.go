package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
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

// TestNoDirectTemporalVariables: nothing in the repository reads a
// TEMPORAL_* variable itself: Temporal's client configuration library does
// (Go: go.temporal.io/sdk/contrib/envconfig; the TypeScript example:
// @temporalio/envconfig). Scripts and tests may set them for the processes
// they start, and name them in prose.
func TestNoDirectTemporalVariables(t *testing.T) {
	reads := regexp.MustCompile(`(Getenv|LookupEnv)\("TEMPORAL_|process\.env\.TEMPORAL_|process\.env\["TEMPORAL_|(^|[^A-Za-z])env\("TEMPORAL_|\$\{?TEMPORAL_[A-Z_]+`)
	var found []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == ".dev" || d.Name() == "bin" || path == "../../bench/engines") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".mjs", ".js", ".ts", ".yml", ".yaml":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := reads.FindString(line); m != "" {
				found = append(found, fmt.Sprintf("%s:%d: %s", strings.TrimPrefix(path, "../../"), i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("TEMPORAL_* read directly (use config.TemporalClient, or let the temporal CLI read its own configuration):\n%s", strings.Join(found, "\n"))
	}
}

// TestUpstreamsSayWhatToFix: TOOLGATE_UPSTREAMS names loaded packs and
// http(s) URLs only; each refusal says which entry and why.
func TestUpstreamsSayWhatToFix(t *testing.T) {
	p := packs.MustLoad(packs.Default).Policy
	got, err := ParseUpstreams(" mangrove=http://127.0.0.1:9000/ ", p)
	if err != nil || got["mangrove"] != "http://127.0.0.1:9000" {
		t.Fatalf("%v %v", got, err)
	}
	for in, want := range map[string]string{
		"mangrove":                            `"mangrove" is not pack=url`,
		"carddesk=http://127.0.0.1:1":         `"carddesk" is not a loaded pack (mangrove)`,
		"mangrove=file:///etc/passwd":         `is not an http(s) URL`,
		"mangrove=http://h/?x=1":              `is not an http(s) URL`,
		"mangrove=http://h,mangrove=http://i": `mangrove is named twice`,
	} {
		if _, err := ParseUpstreams(in, p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// TestEachPackOnItsOwnTaskQueue: TOOLGATE_TASK_QUEUES gives loaded packs
// task queues of their own; a tool's calls go to its pack's, the others'
// to TOOLGATE_TASK_QUEUE, and a worker polls each queue once. Each refusal
// says which entry and why.
func TestEachPackOnItsOwnTaskQueue(t *testing.T) {
	p := packs.MustLoad("mangrove,plancover,../../examples/packs/carddesk.yaml").Policy
	qs, err := ParseTaskQueues(" plancover=toolgate-plancover, carddesk=toolgate-carddesk ", p)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Policy: p, TaskQueue: "toolgate", TaskQueues: qs}
	for tool, want := range map[string]string{"get_stock": "toolgate", "find_network_hospitals": "toolgate-plancover", "replace_card": "toolgate-carddesk", "no_such_tool": "toolgate"} {
		if got := c.QueueFor(tool); got != want {
			t.Errorf("%s runs on %q, want %q", tool, got, want)
		}
	}
	if got := c.Queues(); strings.Join(got, " ") != "toolgate toolgate-plancover toolgate-carddesk" {
		t.Errorf("the worker polls %v", got)
	}
	shared := Config{Policy: p, TaskQueue: "toolgate", TaskQueues: map[string]string{"plancover": "toolgate"}}
	if got := shared.Queues(); len(got) != 1 {
		t.Errorf("a pack on the default queue is polled twice: %v", got)
	}
	for in, want := range map[string]string{
		"plancover":                 `"plancover" is not pack=queue`,
		"northgate=q":               `"northgate" is not a loaded pack (mangrove, plancover, carddesk)`,
		"plancover=":                `plancover's task queue "" must be 1 to 200`,
		"plancover=a b":             `plancover's task queue "a b" must be 1 to 200`,
		"plancover=a/b":             `must be 1 to 200 letters`,
		"plancover=q1,plancover=q2": `plancover is named twice`,
	} {
		if _, err := ParseTaskQueues(in, p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// TestExchangeSaysWhatToFix: a pack takes exchanged tokens only with an
// upstream of its own (their audience) and toolgate's client at the
// provider; anything short of that is refused at start, saying what to set.
func TestExchangeSaysWhatToFix(t *testing.T) {
	p := packs.MustLoad("mangrove,../../examples/packs/carddesk.yaml").Policy
	ups := map[string]string{"carddesk": "http://127.0.0.1:8083"}
	secret := strings.Repeat("s", MinSecretLength)
	ok := map[string]string{"TOOLGATE_DEV": "1", "TOOLGATE_EXCHANGE_ISSUER": "http://127.0.0.1:8082", "TOOLGATE_EXCHANGE_CLIENT_SECRET": secret, "TOOLGATE_EXCHANGE_PACKS": " carddesk "}
	x, aud, err := ParseExchange(func(k string) string { return ok[k] }, ups, p)
	if err != nil || x == nil || x.ClientID != "toolgate" || x.Issuer != "http://127.0.0.1:8082" || len(aud) != 1 || aud["carddesk"] != "http://127.0.0.1:8083" {
		t.Fatalf("%+v %v %v", x, aud, err)
	}
	if x, aud, err := ParseExchange(func(string) string { return "" }, ups, p); x != nil || len(aud) != 0 || err != nil {
		t.Fatalf("nothing set: %+v %v %v", x, aud, err)
	}
	for name, c := range map[string]struct {
		set  map[string]string
		want string
	}{
		"an unknown pack":             {map[string]string{"TOOLGATE_EXCHANGE_PACKS": "bank"}, `"bank" is not a loaded pack`},
		"no upstream":                 {map[string]string{"TOOLGATE_EXCHANGE_PACKS": "mangrove"}, "mangrove has no upstream of its own: name it in TOOLGATE_UPSTREAMS"},
		"no client":                   {map[string]string{"TOOLGATE_EXCHANGE_CLIENT_SECRET": ""}, "TOOLGATE_EXCHANGE_PACKS needs TOOLGATE_EXCHANGE_ISSUER and TOOLGATE_EXCHANGE_CLIENT_SECRET"},
		"a short secret":              {map[string]string{"TOOLGATE_EXCHANGE_CLIENT_SECRET": "short"}, "at least 32 characters"},
		"no issuer":                   {map[string]string{"TOOLGATE_EXCHANGE_ISSUER": ""}, "must be the identity provider's URL"},
		"an issuer not a URL":         {map[string]string{"TOOLGATE_EXCHANGE_ISSUER": "idp.local"}, "must be the identity provider's URL"},
		"plain http outside dev mode": {map[string]string{"TOOLGATE_DEV": ""}, "must be https"},
	} {
		env := map[string]string{}
		for k, v := range ok {
			env[k] = v
		}
		for k, v := range c.set {
			env[k] = v
		}
		if _, _, err := ParseExchange(func(k string) string { return env[k] }, ups, p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestMakeDevsKeysAreDevModesAlone: a process outside dev mode never takes
// keys from a .dev/keys.env in its working directory (one left by an
// earlier make dev, or planted in a shared folder): whoever holds that
// signing key could sign any approver's decision. In dev mode it does.
func TestMakeDevsKeysAreDevModesAlone(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(DevKeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(DevKeysFile, []byte("TOOLGATE_APPROVAL_KEYS=planted:AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_DEV", "")
	if v := devEnv("TOOLGATE_APPROVAL_KEYS"); v != "" {
		t.Fatalf("outside dev mode, %s gave %q", DevKeysFile, v)
	}
	t.Setenv("TOOLGATE_DEV", "1")
	if v := devEnv("TOOLGATE_APPROVAL_KEYS"); v != "planted:AAAA" {
		t.Fatalf("in dev mode, %s gave %q", DevKeysFile, v)
	}
}
