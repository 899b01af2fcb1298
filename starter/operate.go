// starter's commands for operators: the Temporal connection, make cluster's certificates, accepting a pack file's MCP tools.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devcerts"
	"github.com/toolgate/toolgate/internal/packs"
	"go.temporal.io/sdk/contrib/envconfig"
)

// temporalConfigCmd prints the Temporal connection every toolgate process
// makes, as Temporal's client configuration resolves it (no secret: only
// whether TLS is on and an API key is set).
func temporalConfigCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("temporal-config", flag.ContinueOnError)
	prop := fs.String("prop", "", "print one property: address, namespace, tls or api-key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	onOff := func(b bool, on, off string) string {
		if b {
			return on
		}
		return off
	}
	props := []struct{ name, value string }{
		{"address", cfg.Temporal.HostPort}, {"namespace", cfg.Temporal.Namespace},
		{"tls", onOff(cfg.Temporal.ConnectionOptions.TLS != nil, "on", "off")},
		{"api-key", onOff(cfg.Temporal.Credentials != nil, "set", "unset")},
	}
	for _, p := range props {
		switch {
		case *prop == p.name:
			fmt.Fprintln(out, p.value)
			return nil
		case *prop == "":
			fmt.Fprintf(out, "%s=%s\n", p.name, p.value)
		}
	}
	if *prop != "" {
		return fmt.Errorf("temporal-config: --prop %q: want address, namespace, tls or api-key", *prop)
	}
	return nil
}

// devCertsCmd makes make cluster's mTLS certificates with Go's standard
// library, prints the TEMPORAL_TLS_* settings of a client that uses them,
// and with --toml writes them as a Temporal client profile.
func devCertsCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dev-certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "where the certificates go (kept if still valid)")
	file := fs.String("toml", "", "also write a Temporal client configuration file here")
	profile := fs.String("profile", "default", "with --toml: the profile's name")
	address := fs.String("address", config.DefaultTemporalAddress, "with --toml: the frontend's address")
	namespace := fs.String("namespace", config.DefaultNamespace, "with --toml: the namespace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("dev-certs: --dir is required, e.g. --dir .dev/tls")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("dev-certs: %w", err)
	}
	made, err := devcerts.Write(abs, time.Now())
	if err != nil {
		return fmt.Errorf("dev-certs: %w", err)
	}
	tls := &envconfig.ClientConfigTLS{ClientCertPath: filepath.Join(abs, devcerts.ClientCertFile), ClientKeyPath: filepath.Join(abs, devcerts.ClientKeyFile),
		ServerCACertPath: filepath.Join(abs, devcerts.CAFile), ServerName: devcerts.ServerName}
	if *file != "" {
		c := envconfig.ClientConfig{Profiles: map[string]*envconfig.ClientConfigProfile{*profile: {Address: *address, Namespace: *namespace, TLS: tls}}}
		b, err := c.ToTOML(envconfig.ClientConfigToTOMLOptions{})
		if err != nil {
			return fmt.Errorf("dev-certs: the profile: %w", err)
		}
		if err := os.WriteFile(*file, b, 0o600); err != nil {
			return fmt.Errorf("dev-certs: %w", err)
		}
	}
	fmt.Fprintf(out, "# %s in %s: a client configured by Temporal's own variables\n", map[bool]string{true: "new certificates", false: "certificates kept"}[made], abs)
	fmt.Fprintf(out, "TEMPORAL_TLS_CLIENT_CERT_PATH=%s\nTEMPORAL_TLS_CLIENT_KEY_PATH=%s\nTEMPORAL_TLS_SERVER_CA_CERT_PATH=%s\nTEMPORAL_TLS_SERVER_NAME=%s\n",
		tls.ClientCertPath, tls.ClientKeyPath, tls.ServerCACertPath, tls.ServerName)
	return nil
}

// acceptMCPCmd shows a pack file's MCP tools as their servers define them
// now, against what was accepted, and with --write accepts them: the pins
// file the pack's processes load. It exits non-zero when anything differs
// and nothing was written, so a check in CI fails on an unaccepted change.
func acceptMCPCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("accept-mcp", flag.ContinueOnError)
	file := fs.String("pack", "", "the pack file whose MCP servers to read")
	write := fs.Bool("write", false, "accept what the servers offer now: write the pins file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("accept-mcp: --pack is required, e.g. --pack examples/packs/reference.yaml")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reviews, err := packs.Accept(ctx, *file, *write)
	if err != nil {
		return fmt.Errorf("accept-mcp: %w", err)
	}
	packs.Report(out, reviews)
	pending := 0
	for _, r := range reviews {
		if r.Status != packs.ReviewSame && r.Status != packs.ReviewLeftOut {
			pending++
		}
	}
	switch {
	case *write:
		fmt.Fprintf(out, "accepted: %s written\n", packs.PinsFile(*file))
	case pending > 0:
		return fmt.Errorf("accept-mcp: %d tools are not as accepted; read the above, then run again with --write to accept them", pending)
	}
	return nil
}
