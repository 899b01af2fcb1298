package startup_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/devcerts"
	"github.com/toolgate/toolgate/internal/testenv"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// tlsTarget is a Temporal frontend that demands a client certificate, in
// a namespace other than default, and the client configuration that
// reaches it.
type tlsTarget struct {
	profile   envconfig.ClientConfigProfile
	file, pro string // a TOML file holding profile pro
}

// mutualTLSTarget is make test-cluster's mTLS cluster when it names one
// (TOOLGATE_TEST_TLS_PROFILE: a client configuration file, profile
// toolgate), else a front of this test's own: a TLS listener that requires
// a client certificate from a fresh CA and passes the connection on to the
// dev server, in its second namespace.
func mutualTLSTarget(t *testing.T) tlsTarget {
	t.Helper()
	if file := os.Getenv("TOOLGATE_TEST_TLS_PROFILE"); file != "" {
		conf, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file})
		if err != nil || conf.Profiles["toolgate"] == nil {
			t.Fatalf("TOOLGATE_TEST_TLS_PROFILE=%s: %v (want a profile named toolgate)", file, err)
		}
		return tlsTarget{profile: *conf.Profiles["toolgate"], file: file, pro: "toolgate"}
	}
	dev := testenv.TemporalAddress(t)
	dir := t.TempDir()
	if _, err := devcerts.Write(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, devcerts.ServerCertFile), filepath.Join(dir, devcerts.ServerKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, devcerts.CAFile))
	cas := x509.NewCertPool()
	cas.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: cas,
		ClientAuth: tls.RequireAndVerifyClientCert, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return // no client certificate from the CA: nothing reaches the server
				}
				up, err := net.Dial("tcp", dev)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	// The dev server has a second namespace; a configured server (make test-cluster's first cluster) has
	// the tests' own, and the mTLS cluster after it a namespace of its own (TOOLGATE_TEST_TLS_PROFILE).
	ns := testenv.SecondNamespace
	if testenv.Configured() {
		ns = testenv.Namespace()
	}
	p := envconfig.ClientConfigProfile{Address: ln.Addr().String(), Namespace: ns, TLS: &envconfig.ClientConfigTLS{
		ClientCertPath: filepath.Join(dir, devcerts.ClientCertFile), ClientKeyPath: filepath.Join(dir, devcerts.ClientKeyFile),
		ServerCACertPath: filepath.Join(dir, devcerts.CAFile), ServerName: devcerts.ServerName}}
	conf := envconfig.ClientConfig{Profiles: map[string]*envconfig.ClientConfigProfile{"toolgate": &p}}
	b, err := conf.ToTOML(envconfig.ClientConfigToTOMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "temporal.toml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return tlsTarget{profile: p, file: file, pro: "toolgate"}
}

// env is the target as Temporal's environment variables alone.
func (x tlsTarget) env() []string {
	return []string{"TEMPORAL_ADDRESS=" + x.profile.Address, "TEMPORAL_NAMESPACE=" + x.profile.Namespace,
		"TEMPORAL_TLS_CLIENT_CERT_PATH=" + x.profile.TLS.ClientCertPath, "TEMPORAL_TLS_CLIENT_KEY_PATH=" + x.profile.TLS.ClientKeyPath,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + x.profile.TLS.ServerCACertPath, "TEMPORAL_TLS_SERVER_NAME=" + x.profile.TLS.ServerName}
}

// TestProcessesConfiguredByTemporalsOwnSettings: a worker and a starter
// given nothing about Temporal but its client configuration (the
// TEMPORAL_TLS_* variables, or a profile file) reach a frontend that
// demands a client certificate, in a namespace other than default, and
// complete a call; the call is in that namespace and not in default, and
// a starter without the client certificate is turned away.
func TestProcessesConfiguredByTemporalsOwnSettings(t *testing.T) {
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+"/", "./worker", "./starter")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	target := mutualTLSTarget(t)
	db := testenv.Database(t)
	up := testenv.Upstream(t, db)
	// Conversations of this run alone: make test-cluster runs this test on one database twice.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range []struct{ name, conv string }{{"environment", "tlsenv" + run}, {"profile", "tlsprofile" + run}} {
		t.Run(c.name, func(t *testing.T) {
			temporalEnv := target.env()
			if c.name == "profile" {
				temporalEnv = []string{"TEMPORAL_CONFIG_FILE=" + target.file, "TEMPORAL_PROFILE=" + target.pro}
			}
			queue := "toolgate-" + c.conv
			base := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TOOLGATE_DEV=1", "DATABASE_URL=" + db,
				"TOOLGATE_TASK_QUEUE=" + queue, "TOOLGATE_CODEC_KEYS=" + testenv.CodecKeys, "TOOLGATE_CODEC_KEY_ID=test"}, temporalEnv...)
			ctx, cancel := context.WithCancel(context.Background())
			w := exec.CommandContext(ctx, filepath.Join(bin, "worker"))
			w.Env = append(append([]string{}, base...), "UPSTREAM_URL="+up.URL, "METRICS_ADDR=127.0.0.1:0", "CODEC_ADDR=127.0.0.1:0")
			// A file, not a buffer: the process writes it while the test may read it.
			logFile, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()
			w.Stdout, w.Stderr = logFile, logFile
			logs := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); _ = w.Wait() })
			call := func(env []string, id string) (string, error) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				s := exec.CommandContext(ctx, filepath.Join(bin, "starter"), "call", "--tool", "get_stock", "--call-id", id, "--args", `{"articleId":40211}`,
					"--user", "ama", "--role", "store_manager", "--stores", "112", "--conversation", c.conv, "--credential", "cred-ama")
				s.Env = env
				out, err := s.CombinedOutput()
				return string(out), err
			}
			out, err := call(base, "c1")
			var res struct{ Status, Code string }
			if err != nil || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res) != nil || res.Status != "executed" {
				t.Fatalf("starter call: %v\n%s\nworker:\n%s", err, out, logs())
			}
			if !strings.Contains(out, `"cases": 6`) && !strings.Contains(out, `"cases":6`) {
				t.Fatalf("the read's result:\n%s", out)
			}
			// The call is in the configured namespace, and only there.
			opts, err := target.profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			tc, err := client.Dial(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			id := "toolcall-" + c.conv + "-c1"
			if _, err := tc.DescribeWorkflow(context.Background(), id, ""); err != nil {
				t.Fatalf("%s is not in namespace %s: %v", id, opts.Namespace, err)
			}
			if opts.Namespace != "default" {
				opts.Namespace = "default"
				dc, err := client.Dial(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer dc.Close()
				if _, err := dc.DescribeWorkflow(context.Background(), id, ""); err == nil {
					t.Fatalf("%s is in namespace default too", id)
				}
			}
			// Without its client certificate the starter is turned away.
			var bare []string
			for _, kv := range base {
				if !strings.HasPrefix(kv, "TEMPORAL_TLS_CLIENT_") && !strings.HasPrefix(kv, "TEMPORAL_CONFIG_FILE") && !strings.HasPrefix(kv, "TEMPORAL_PROFILE") {
					bare = append(bare, kv)
				}
			}
			if c.name == "profile" {
				bare = append(bare, "TEMPORAL_ADDRESS="+target.profile.Address, "TEMPORAL_TLS_SERVER_CA_CERT_PATH="+target.profile.TLS.ServerCACertPath,
					"TEMPORAL_TLS_SERVER_NAME="+target.profile.TLS.ServerName, "TEMPORAL_NAMESPACE="+target.profile.Namespace)
			}
			if out, err := call(bare, "c2"); err == nil {
				t.Fatalf("a starter without a client certificate got through:\n%s", out)
			}
		})
	}
}
