// Package deploy_test checks docker-compose.yml against the code, since no
// Docker engine runs where the tests do.
package deploy_test

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
	"go.yaml.in/yaml/v3"
)

type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]any    `yaml:"depends_on"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Volumes     []string          `yaml:"volumes"`
	NetworkMode string            `yaml:"network_mode"`
}

func load(t *testing.T) map[string]service {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]service `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	return f.Services
}

// TestComposeMatchesTheCode checks every service, port and env name.
func TestComposeMatchesTheCode(t *testing.T) {
	svcs := load(t)
	want := []string{"postgres", "temporal-schema", "temporal", "temporal-history", "temporal-matching", "temporal-worker", "temporal-setup", "temporal-ui", "migrate", "upstream", "worker", "approvals", "idp", "mcp"}
	for _, name := range want {
		if _, ok := svcs[name]; !ok {
			t.Fatalf("service %s is missing", name)
		}
	}
	for name, svc := range svcs {
		if !slices.Contains(want, name) {
			t.Errorf("unexpected service %s: add it to this test", name)
		}
		if svc.Image == "" && svc.Build == nil {
			t.Errorf("%s names no image and no build", name)
		}
		for dep := range svc.DependsOn {
			if _, ok := svcs[dep]; !ok || dep == name {
				t.Errorf("%s depends on %q", name, dep)
			}
		}
	}
	// toolgate's own processes: one Dockerfile, the code's env names, the code's commands.
	commands := map[string]string{"migrate": "starter", "upstream": "cmd/upstream", "worker": "worker", "approvals": "cmd/approvals", "idp": "cmd/idp", "mcp": "cmd/mcp"}
	for name, pkg := range commands {
		svc := svcs[name]
		if svc.Build == nil {
			t.Errorf("%s must be built from the repo's Dockerfile", name)
		}
		if _, err := os.Stat("../" + pkg); err != nil {
			t.Errorf("%s: its command's package %s is missing", name, pkg)
		}
		if len(svc.Entrypoint) == 0 || !strings.HasSuffix(svc.Entrypoint[0], "/"+path.Base(pkg)) {
			t.Errorf("%s runs %v, want the %s binary", name, svc.Entrypoint, pkg)
		}
		for k := range svc.Environment {
			if !slices.Contains(config.Vars, k) {
				t.Errorf("%s sets %s, which the code never reads", name, k)
			}
		}
		for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "UPSTREAM_URL", "TOOLGATE_TASK_QUEUE", "TOOLGATE_CODEC_KEYS"} {
			if svc.Environment[k] == "" && name != "idp" { // the provider is another system
				t.Errorf("%s lacks %s", name, k)
			}
		}
	}
	ports := map[string]string{"temporal": "127.0.0.1:7233:7233", "temporal-ui": "127.0.0.1:8233:8080",
		"upstream": "127.0.0.1:8081:8081", "idp": "127.0.0.1:8080:8080", "worker": "127.0.0.1:9090:9090"}
	if !slices.Contains(svcs["idp"].Ports, "127.0.0.1:8090:8090") {
		t.Error("the MCP server's port is not published")
	}
	for svc, port := range ports {
		if !slices.Contains(svcs[svc].Ports, port) {
			t.Errorf("%s does not publish %s", svc, port)
		}
	}
	// Nothing is published beyond loopback, and PostgreSQL (trust auth inside
	// the stack) not at all.
	for name, svc := range svcs {
		for _, p := range svc.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s on every interface", name, p)
			}
		}
	}
	if len(svcs["postgres"].Ports) != 0 {
		t.Errorf("postgres is published: %v", svcs["postgres"].Ports)
	}
	// Secrets have no demo default: compose stops unless .env sets them.
	for svc, k := range map[string]string{"upstream": "UPSTREAM_TOKEN_KEY", "approvals": "APPROVALS_SESSION_KEY", "worker": "TOOLGATE_CODEC_KEYS"} {
		if v := svcs[svc].Environment[k]; !strings.HasPrefix(v, "${"+k+":?") {
			t.Errorf("%s's %s is %q, not required from .env", svc, k, v)
		}
	}
	// Dev mode only for the demo provider and the worker's demo credentials; the card UI signs in
	// with OpenID Connect and needs none.
	for name, svc := range svcs {
		if svc.Environment["TOOLGATE_DEV"] != "" && name != "idp" && name != "worker" {
			t.Errorf("%s runs in dev mode", name)
		}
	}
	// The card UI shares the provider's network, so both name it by the issuer URL the browser uses,
	// and the worker trusts that issuer.
	if svcs["approvals"].NetworkMode != "service:idp" {
		t.Errorf("the card UI's network mode is %q, not service:idp", svcs["approvals"].NetworkMode)
	}
	// The Temporal server gets the limits that bound a flooded card.
	dyn, err := os.ReadFile("temporal-dynamicconfig.yaml")
	if err != nil || !strings.Contains(string(dyn), "history.maximumSignalsPerExecution") || !strings.Contains(string(dyn), "limit.blobSize.error") ||
		!strings.Contains(strings.Join(svcs["temporal"].Volumes, " "), "./deploy/temporal-dynamicconfig.yaml:") {
		t.Errorf("the Temporal service does not mount deploy/temporal-dynamicconfig.yaml with the signal and payload limits (%v)", err)
	}
	// The compose server, the dev server of make dev and the tests' all run one task-queue partition.
	dev, _ := os.ReadFile("../scripts/dev.sh")
	for _, k := range []string{"matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions"} {
		if !strings.Contains(string(dyn), k+":\n  - value: 1") || !strings.Contains(string(dev), k+"=1") || !slices.Contains(testenv.DevServerArgs, k+"=1") {
			t.Errorf("%s is not 1 in deploy/temporal-dynamicconfig.yaml, make dev and the tests alike", k)
		}
	}
	env := func(svc, k string) string { return svcs[svc].Environment[k] }
	checks := map[string]bool{
		"worker DATABASE_URL points at the postgres service":      strings.Contains(env("worker", "DATABASE_URL"), "@postgres:5432/toolgate"),
		"worker UPSTREAM_URL points at the upstream service":      env("worker", "UPSTREAM_URL") == "http://upstream:8081",
		"the worker trusts approval keys":                         env("worker", "TOOLGATE_APPROVAL_KEYS") != "",
		"the card UI signs decisions":                             env("approvals", "TOOLGATE_APPROVAL_SIGNING_KEY") != "",
		"the upstream listens on its published port":              env("upstream", "UPSTREAM_ADDR") == ":8081",
		"the card UI listens on its published port":               env("approvals", "APPROVALS_ADDR") == ":8080",
		"metrics on the published port":                           env("worker", "METRICS_ADDR") == ":9090",
		"Temporal Web decodes through the worker's codec address": strings.HasSuffix(env("temporal-ui", "TEMPORAL_CODEC_ENDPOINT"), env("worker", "CODEC_ADDR")) && slices.Contains(svcs["worker"].Ports, "127.0.0.1:8089:8089"),
		"the codec endpoint allows Temporal Web's origin":         env("worker", "CODEC_CORS_ORIGINS") == env("temporal-ui", "TEMPORAL_CORS_ORIGINS"),
		"Temporal stores its data in the postgres service":        env("temporal", "POSTGRES_SEEDS") == "postgres",
		"the card UI's issuer is the provider's":                  env("approvals", "APPROVALS_OIDC_ISSUER") == env("idp", "IDP_ISSUER") && strings.HasSuffix(env("idp", "IDP_ISSUER"), env("idp", "IDP_ADDR")),
		"the worker trusts the provider":                          env("worker", "TOOLGATE_APPROVER_ISSUERS") == env("idp", "IDP_ISSUER"),
		"the provider knows the card UI's callback":               env("idp", "IDP_REDIRECT_URIS") == env("approvals", "APPROVALS_OIDC_REDIRECT_URL"),
		"the provider and card UI share a client":                 env("idp", "IDP_CLIENT_ID") == env("approvals", "APPROVALS_OIDC_CLIENT_ID"),
	}
	if grace, err := time.ParseDuration(svcs["worker"].StopGrace); err != nil || grace <= workflows.StopTimeout(testenv.Policy) {
		checks["the worker's stop_grace_period outlasts its stop timeout "+workflows.StopTimeout(testenv.Policy).String()] = false
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("compose: %s", what)
		}
	}
	// Every search attribute the workflow upserts is registered, with its type.
	setup := strings.Join(svcs["temporal-setup"].Command, " ")
	for _, sa := range workflows.SearchAttributes() {
		if !strings.Contains(setup, sa.Name+"="+sa.Type) {
			t.Errorf("temporal-setup does not register %s=%s", sa.Name, sa.Type)
		}
	}
}
