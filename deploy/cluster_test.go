package deploy_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// clusterServices are the Temporal services make cluster runs as processes
// and docker-compose.yml as containers (the frontend is compose's temporal).
var clusterServices = map[string]string{"frontend": "temporal", "history": "temporal-history", "matching": "temporal-matching", "worker": "temporal-worker"}

// renderCluster renders deploy/temporal/cluster.yaml as the server does
// (a Go template; env reads the environment, default fills what is unset).
func renderCluster(t *testing.T, env map[string]string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("temporal/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw[:min(len(raw), 1024)], []byte("enable-template")) {
		t.Fatal("cluster.yaml lacks the enable-template comment in its first 1 KB: the server would not render it")
	}
	funcs := template.FuncMap{
		"env": func(k string) string { return env[k] },
		"default": func(d string, v string) string {
			if v == "" {
				return d
			}
			return v
		},
	}
	tpl, err := template.New("cluster").Funcs(funcs).Parse(string(raw))
	if err != nil {
		t.Fatalf("cluster.yaml is not a valid template: %v", err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, nil); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &cfg); err != nil {
		t.Fatalf("rendered cluster.yaml is not YAML: %v\n%s", err, out.String())
	}
	return cfg
}

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// TestClusterIsProductionShaped: the rendered configuration is PostgreSQL
// for persistence and visibility, several history shards, and four services
// on distinct ports bound to loopback unless told otherwise.
func TestClusterIsProductionShaped(t *testing.T) {
	cfg := renderCluster(t, map[string]string{})
	if n, _ := dig(cfg, "persistence", "numHistoryShards").(int); n < 4 {
		t.Errorf("numHistoryShards = %v; want several (4 or more)", dig(cfg, "persistence", "numHistoryShards"))
	}
	for _, store := range []string{"default", "visibility"} {
		if dig(cfg, "persistence", "datastores", store, "sql", "pluginName") != "postgres12" {
			t.Errorf("datastore %s is not PostgreSQL", store)
		}
	}
	if dig(cfg, "persistence", "visibilityStore") != "visibility" || dig(cfg, "persistence", "defaultStore") != "default" {
		t.Error("persistence does not name the default and visibility stores")
	}
	ports := map[int]string{}
	for svc := range clusterServices {
		for _, k := range []string{"grpcPort", "membershipPort"} {
			p, _ := dig(cfg, "services", svc, "rpc", k).(int)
			if p == 0 || ports[p] != "" {
				t.Errorf("%s %s %d is missing or shared with %s", svc, k, p, ports[p])
			}
			ports[p] = svc
		}
		if ip := dig(cfg, "services", svc, "rpc", "bindOnIP"); ip != "127.0.0.1" {
			t.Errorf("%s binds %v by default; want 127.0.0.1", svc, ip)
		}
	}
	if p, _ := dig(cfg, "services", "frontend", "rpc", "grpcPort").(int); p != 7233 {
		t.Errorf("the frontend listens on %d; clients dial 7233", p)
	}
	// Compose's values render too: the frontend is reached by its service name.
	compose := renderCluster(t, load(t)["temporal"].Environment)
	if dig(compose, "publicClient", "hostPort") != "temporal:7233" || dig(compose, "persistence", "datastores", "default", "sql", "connectAddr") != "postgres:5432" {
		t.Errorf("compose's environment renders publicClient %v, database %v", dig(compose, "publicClient", "hostPort"), dig(compose, "persistence", "datastores", "default", "sql", "connectAddr"))
	}
}

// TestClusterMirrorsCompose keeps make cluster (scripts/temporal-cluster.sh,
// the Makefile) and docker-compose.yml in step: the same services from the
// same configuration files, the same versions, the same schema steps, and
// every variable the configuration reads set by both.
func TestClusterMirrorsCompose(t *testing.T) {
	svcs := load(t)
	script, err := os.ReadFile("../scripts/temporal-cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^services=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/temporal-cluster.sh has no services=(...) line")
	}
	scripted := strings.Fields(string(m[1]))
	for svc, name := range clusterServices {
		if !slices.Contains(scripted, svc) {
			t.Errorf("make cluster does not start the %s service", svc)
		}
		c, ok := svcs[name]
		if !ok {
			t.Errorf("compose has no %s service for Temporal's %s", name, svc)
			continue
		}
		cmd := strings.Join(c.Entrypoint, " ")
		if !strings.Contains(cmd, "--config /etc/toolgate/temporal --env cluster") || !strings.HasSuffix(cmd, "start --service "+svc) {
			t.Errorf("compose's %s does not run the cluster configuration's %s service: %s", name, svc, cmd)
		}
		if !slices.Contains(c.Volumes, "./deploy/temporal/cluster.yaml:/etc/toolgate/temporal/cluster.yaml:ro") ||
			!slices.Contains(c.Volumes, "./deploy/temporal-dynamicconfig.yaml:"+c.Environment["DYNAMIC_CONFIG_FILE_PATH"]+":ro") {
			t.Errorf("compose's %s does not mount the cluster and dynamic configuration make cluster uses: %v", name, c.Volumes)
		}
	}
	if len(scripted) != len(clusterServices) {
		t.Errorf("make cluster starts %v; compose runs %d Temporal services", scripted, len(clusterServices))
	}
	if !strings.Contains(string(script), "--config \"$root/deploy/temporal\" --env cluster") || !strings.Contains(string(script), "DYNAMIC_CONFIG_FILE_PATH=\"$root/deploy/temporal-dynamicconfig.yaml\"") {
		t.Error("make cluster does not run deploy/temporal/cluster.yaml with deploy/temporal-dynamicconfig.yaml")
	}
	// Every variable the configuration reads is set by compose and by the script.
	raw, _ := os.ReadFile("temporal/cluster.yaml")
	for _, v := range regexp.MustCompile(`env "([A-Z_]+)"`).FindAllStringSubmatch(string(raw), -1) {
		name := v[1]
		if name == "LOG_LEVEL" || name == "NUM_HISTORY_SHARDS" || name == "BIND_ON_IP" {
			continue // defaulted in both; compose sets BIND_ON_IP from the container's address in its entrypoint
		}
		// make cluster's mTLS mode is make cluster's: unset, there is no TLS section (compose runs without).
		if _, ok := svcs["temporal"].Environment[name]; !ok && name != "TOOLGATE_CLUSTER_TLS_DIR" {
			t.Errorf("cluster.yaml reads %s, which compose's Temporal services do not set", name)
		}
		if !strings.Contains(string(script), name) {
			t.Errorf("cluster.yaml reads %s, which scripts/temporal-cluster.sh does not set", name)
		}
	}
	// The same server version: compose's images, the Makefile's build.
	version := regexp.MustCompile(`(?m)^TEMPORAL_SERVER_VERSION\s*:=\s*v(\S+)`).FindSubmatch(makefile)
	ui := regexp.MustCompile(`(?m)^TEMPORAL_UI_VERSION\s*:=\s*v(\S+)`).FindSubmatch(makefile)
	if version == nil || ui == nil {
		t.Fatal("the Makefile names no TEMPORAL_SERVER_VERSION or TEMPORAL_UI_VERSION")
	}
	for name, s := range svcs {
		switch {
		case strings.HasPrefix(s.Image, "temporalio/server:") && s.Image != "temporalio/server:"+string(version[1]),
			strings.HasPrefix(s.Image, "temporalio/admin-tools:") && !strings.HasPrefix(s.Image, "temporalio/admin-tools:"+string(version[1])+"-"),
			strings.HasPrefix(s.Image, "temporalio/ui:") && s.Image != "temporalio/ui:"+string(ui[1]):
			t.Errorf("compose's %s runs %s; make cluster builds server v%s and UI v%s", name, s.Image, version[1], ui[1])
		}
	}
	// The same schema steps, by Temporal's SQL tool and its embedded schemas.
	schema := strings.Join(svcs["temporal-schema"].Command, " ")
	for _, step := range []string{"create-database", "setup-schema -v 0.0", "update-schema --schema-name", "postgresql/v12/", "temporal_visibility"} {
		if !strings.Contains(schema, step) || !strings.Contains(string(script), step) {
			t.Errorf("the schema step %q is not in both compose's temporal-schema and make cluster", step)
		}
	}
}

// TestClusterMutualTLSMode: with TOOLGATE_CLUSTER_TLS_DIR the frontend
// demands client certificates from the CA there and the system worker
// presents one; without it the cluster has no TLS section.
func TestClusterMutualTLSMode(t *testing.T) {
	if tls := dig(renderCluster(t, map[string]string{}), "global", "tls"); tls != nil {
		t.Fatalf("TLS without the mode: %v", tls)
	}
	cfg := renderCluster(t, map[string]string{"TOOLGATE_CLUSTER_TLS_DIR": "/certs"})
	server := dig(cfg, "global", "tls", "frontend", "server")
	if dig(server, "requireClientAuth") != true || dig(server, "certFile") != "/certs/server.pem" || dig(server, "keyFile") != "/certs/server.key" {
		t.Fatalf("frontend server TLS: %v", server)
	}
	if cas, _ := dig(server, "clientCaFiles").([]any); len(cas) != 1 || cas[0] != "/certs/ca.pem" {
		t.Fatalf("client CAs: %v", dig(server, "clientCaFiles"))
	}
	if dig(cfg, "global", "tls", "systemWorker", "certFile") != "/certs/system-worker.pem" || dig(cfg, "global", "membership", "maxJoinDuration") != "30s" {
		t.Fatalf("system worker TLS: %v", dig(cfg, "global", "tls", "systemWorker"))
	}
}
