// starter's dev-only commands, which run beside make dev alone: a demo user's access token, a demo credential.

package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devenv"
	"github.com/toolgate/toolgate/policy"
)

// devFile and devErr are what devenv.Load found: make dev's settings file,
// and why it was not read.
var (
	devFile string
	devErr  error
)

// notDev is a dev-only command's error outside dev mode: what it needs, and
// how to get it.
func notDev(cmd, why string) error {
	return fmt.Errorf("%s: %s, so it runs only in dev mode (TOOLGATE_DEV=1, which make dev sets): %s", cmd, why, devenv.Missing(devFile, devErr))
}

// credentialCmd issues a credential for a demo user under an unguessable
// handle, bound to the role, stores and sign-in strength given (dev mode
// only: it reuses the demo upstream secret of the user's seeded row). In a
// deployment the agent backend's sign-in issues credentials.
func tokenCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "the demo user to sign in (ama, efua, kofi, yaw, adwoa; cara and sam for the card desk)")
	acr := fs.String("acr", policy.ACRPassword, "how strongly to sign in (pwd, or mfa with the user's TOTP code)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !cfg.DevMode {
		return notDev("token", "it signs in with a demo user's password from the users file (a real MCP client signs in through the browser)")
	}
	if !slices.Contains(policy.ACRLevels, *acr) {
		return fmt.Errorf("token: --acr must be one of %v", policy.ACRLevels)
	}
	file := firstSet(os.Getenv("IDP_USERS_FILE"), ".dev/idp-users.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("token: the demo users (%s): %w; make dev writes it", file, err)
	}
	var users []idp.User
	if err := json.Unmarshal(b, &users); err != nil {
		return fmt.Errorf("token: %s: %w", file, err)
	}
	i := slices.IndexFunc(users, func(u idp.User) bool { return u.ID == *user })
	if i < 0 {
		return fmt.Errorf("token: %q is not a user in %s", *user, file)
	}
	issuer := firstSet(os.Getenv("MCP_OIDC_ISSUER"), os.Getenv("APPROVALS_OIDC_ISSUER"), os.Getenv("IDP_ISSUER"), "http://127.0.0.1:8082")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := idp.SignIn(ctx, issuer, firstSet(os.Getenv("IDP_MCP_CLIENT_ID"), "toolgate-mcp"), users[i], *acr)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(out, tok.AccessToken)
	return nil
}

func firstSet(v ...string) string {
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

func credentialCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("credential", flag.ContinueOnError)
	user := fs.String("user", "", "the demo user (ama, efua, kofi, yaw)")
	role := fs.String("role", "", "the role the credential holds")
	stores := fs.String("stores", "", "Mangrove's alias: --stores 112,118 is --resources store=112,store=118")
	resources := fs.String("resources", "", "the resources it holds, as kind=id pairs, comma-separated (e.g. queue=Q-1)")
	acr := fs.String("acr", policy.ACRPassword, "the strength of the sign-in it stands for (pwd or mfa)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !cfg.DevMode {
		return notDev("credential", "it issues demo credentials (a deployment's sign-in issues its own)")
	}
	held, err := parseResources(*stores, *resources)
	if err != nil {
		return err
	}
	if *user == "" || *role == "" || !slices.Contains(policy.ACRLevels, *acr) {
		return fmt.Errorf("credential: --user and --role are required, and --acr is one of %v", policy.ACRLevels)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	defer db.Close(ctx)
	ref := "cr_" + strings.ToLower(rand.Text())
	tag, err := db.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, issuer, subject, role, resources, acr, auth_time)
		SELECT $1, user_id, client_secret, secret_pack, $2, user_id, $3, $4::jsonb, $5, now() FROM vault.credentials WHERE user_id = $6 AND demo AND NOT revoked LIMIT 1`,
		ref, OperatorIssuer, *role, held, *acr, *user)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("credential: %q is not a demo user with a seeded credential", *user)
	}
	fmt.Fprintln(out, ref)
	return nil
}
