// Package compose checks docker-compose.yml against the code, since no
// Docker engine runs where the tests do.
package compose

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
	} `yaml:"services"`
}

func TestComposeMatchesTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	for _, name := range []string{"postgres", "temporal", "migrate", "upstream", "worker", "approvals"} {
		svc, ok := f.Services[name]
		if !ok {
			t.Fatalf("service %s is missing", name)
		}
		if svc.Image == "" && svc.Build == nil {
			t.Errorf("service %s names no image and no build", name)
		}
	}
	for _, name := range []string{"migrate", "upstream", "worker", "approvals"} {
		env := f.Services[name].Environment
		for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "UPSTREAM_URL", "TOOLGATE_TASK_QUEUE"} {
			if env[k] == "" {
				t.Errorf("%s lacks %s", name, k)
			}
		}
		if _, err := os.Stat("../../" + strings.TrimPrefix(map[string]string{"migrate": "starter", "upstream": "upstream/cmd/upstream", "worker": "worker", "approvals": "approvals/cmd/approvals"}[name], "/")); err != nil {
			t.Errorf("%s: its command's package is missing: %v", name, err)
		}
	}
	want := map[string]string{"temporal": "7233:7233", "upstream": "8081:8081", "postgres": "5432:5432", "approvals": "8080:8080", "worker": "9090:9090"}
	for svc, port := range want {
		found := false
		for _, p := range f.Services[svc].Ports {
			found = found || p == port
		}
		if !found {
			t.Errorf("%s does not publish %s", svc, port)
		}
	}
	if !strings.Contains(f.Services["worker"].Environment["TOOLGATE_APPROVAL_KEYS"], "TOOLGATE_APPROVAL_KEYS") ||
		!strings.Contains(f.Services["approvals"].Environment["TOOLGATE_APPROVAL_SIGNING_KEY"], "TOOLGATE_APPROVAL_SIGNING_KEY") {
		t.Error("the worker must get the public keys and the card UI the signing key")
	}
	if !strings.Contains(f.Services["worker"].Environment["DATABASE_URL"], "@postgres:5432/toolgate") {
		t.Errorf("worker DATABASE_URL %q does not point at the postgres service", f.Services["worker"].Environment["DATABASE_URL"])
	}
}
