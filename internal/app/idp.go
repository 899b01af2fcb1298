package app

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/devenv"
	"github.com/toolgate/toolgate/internal/httpserver"
	"go.uber.org/zap"
)

// IDP runs the demo OpenID provider on IDP_ADDR, in dev mode only.
func IDP(log *zap.Logger, cfg config.Config) error {
	if !cfg.DevMode {
		return fmt.Errorf("the demo identity provider runs only in dev mode (TOOLGATE_DEV=1, which make dev sets): a deployment signs people in with its own provider (docs: identity)")
	}
	set := idp.SettingsFromEnv()
	users, created, err := idp.LoadOrCreateUsers(set.UsersFile)
	if err != nil {
		return err
	}
	if created {
		log.Info("created the demo users (idp users prints them)", zap.String("file", set.UsersFile))
	}
	if len(set.Client.Secret) < config.MinSecretLength {
		return fmt.Errorf("IDP_CLIENT_SECRET must be a random secret of at least %d characters (the card UI's APPROVALS_OIDC_CLIENT_SECRET; make dev makes one)", config.MinSecretLength)
	}
	clients := []idp.Client{set.Client, set.MCPClient}
	if x := set.ExchangeClient; x != nil {
		if len(x.Secret) < config.MinSecretLength {
			return fmt.Errorf("IDP_EXCHANGE_CLIENT_SECRET must be a random secret of at least %d characters (toolgate's TOOLGATE_EXCHANGE_CLIENT_SECRET; make dev makes one)", config.MinSecretLength)
		}
		clients = append(clients, *x)
	}
	p, err := idp.New(idp.Options{Issuer: set.Issuer, Users: users, Logger: log, Clients: clients})
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, stop := stopping()
	defer stop()
	log.Info("demo identity provider listening", zap.String("addr", set.Addr), zap.String("issuer", set.Issuer))
	return httpserver.Run(ctx, httpserver.New(set.Addr, p.Handler()))
}

// IDPUsers prints the demo users' passwords and TOTP secrets for an
// authenticator app, in a second shell beside make dev: devFile and devErr
// are what devenv.Load found there. With args "add", FILE, it first adds
// the people FILE lists (idp.AddUsers) and prints only them.
func IDPUsers(devFile string, devErr error, args []string) func(*zap.Logger, config.Config) error {
	return func(_ *zap.Logger, cfg config.Config) error {
		if !cfg.DevMode {
			return fmt.Errorf("the demo users exist only in dev mode (TOOLGATE_DEV=1, which make dev sets); %s", devenv.Missing(devFile, devErr))
		}
		path := idp.SettingsFromEnv().UsersFile
		switch {
		case len(args) == 0:
			users, _, err := idp.LoadOrCreateUsers(path)
			if err != nil {
				return err
			}
			printUsers(os.Stdout, users)
			return nil
		case len(args) == 2 && args[0] == "add":
			people, err := idp.AddUsers(path, args[1])
			if err != nil {
				return err
			}
			printUsers(os.Stdout, people)
			fmt.Printf("added to %s, and every auditor there granted what they hold; the provider reads them when it starts (make dev, again)\n", path)
			return nil
		}
		return fmt.Errorf("usage: idp users [add PEOPLE.json]  (PEOPLE.json: [{\"id\", \"name\", \"role\", \"claims\": {\"<a pack's claim>\": [\"<id>\"]}}])")
	}
}

func printUsers(w io.Writer, users []idp.User) {
	fmt.Fprintf(w, "%-6s %-22s %-14s %-34s %s\n", "user", "role", "password", "TOTP secret", "holds")
	for _, u := range users {
		fmt.Fprintf(w, "%-6s %-22s %-14s %-34s %s\n", u.ID, u.Role, u.Password, u.TOTPSecret, holds(u))
	}
	fmt.Fprintln(w, "Add a secret to an authenticator app by hand (TOTP, SHA-1, 6 digits, 30 s) or from its otpauth URL:")
	for _, u := range users {
		fmt.Fprintf(w, "  %s\n", u.OTPAuthURL("toolgate-demo"))
	}
}

// holds is what a user's sign-in grants, as a line: their stores and each
// claim's values.
func holds(u idp.User) string {
	var parts []string
	if len(u.Stores) > 0 {
		parts = append(parts, fmt.Sprintf("stores %v", u.Stores))
	}
	claims := slices.Sorted(maps.Keys(u.Claims))
	for _, c := range claims {
		parts = append(parts, fmt.Sprintf("%s %v", c, u.Claims[c]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
