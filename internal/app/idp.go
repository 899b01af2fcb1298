package app

import (
	"fmt"
	"io"
	"os"

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
// are what devenv.Load found there.
func IDPUsers(devFile string, devErr error) func(*zap.Logger, config.Config) error {
	return func(_ *zap.Logger, cfg config.Config) error {
		if !cfg.DevMode {
			return fmt.Errorf("the demo users exist only in dev mode (TOOLGATE_DEV=1, which make dev sets); %s", devenv.Missing(devFile, devErr))
		}
		users, _, err := idp.LoadOrCreateUsers(idp.SettingsFromEnv().UsersFile)
		if err != nil {
			return err
		}
		printUsers(os.Stdout, users)
		return nil
	}
}

func printUsers(w io.Writer, users []idp.User) {
	fmt.Fprintf(w, "%-6s %-22s %-14s %-34s %s\n", "user", "role", "password", "TOTP secret", "stores")
	for _, u := range users {
		fmt.Fprintf(w, "%-6s %-22s %-14s %-34s %v\n", u.ID, u.Role, u.Password, u.TOTPSecret, u.Stores)
	}
	fmt.Fprintln(w, "Add a secret to an authenticator app by hand (TOTP, SHA-1, 6 digits, 30 s) or from its otpauth URL:")
	for _, u := range users {
		fmt.Fprintf(w, "  %s\n", u.OTPAuthURL("toolgate-demo"))
	}
}
