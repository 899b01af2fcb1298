package app

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/httpserver"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// Approvals serves the card UI and the insights page on APPROVALS_ADDR.
func Approvals(log *zap.Logger, cfg config.Config) error {
	if cfg.SigningKey == nil {
		return errors.New("TOOLGATE_APPROVAL_SIGNING_KEY is not set: the card UI signs every decision (starter keygen makes a key pair; make dev sets one up)")
	}
	sessionKey, err := config.SessionKey()
	if err != nil {
		return err
	}
	oc, err := approvals.OIDCFromEnv()
	if err != nil {
		return err
	}
	oc.Roles, oc.Policy, oc.Resources = approvals.RolesOf(cfg.Policy), cfg.Policy, cfg.Claims
	if len(sessionKey) == 0 {
		sessionKey = make([]byte, 32)
		_, _ = rand.Read(sessionKey)
		log.Warn("APPROVALS_SESSION_KEY is not set: using a random key, so a restart signs everyone out")
	}
	ctx, stop := stopping()
	defer stop()
	auth, err := approvals.NewAuth(ctx, oc, 30*time.Second)
	if err != nil {
		return err
	}
	pool, err := cfg.OpenPool(ctx, "approvals")
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := requireSchema(ctx, pool); err != nil {
		return err
	}
	audit, err := cfg.OpenPool(ctx, "auditor")
	if err != nil {
		return fmt.Errorf("the insights page's read-only login (AUDITOR_DATABASE_URL, default DATABASE_URL as toolgate_auditor): %w", err)
	}
	defer audit.Close()
	c, err := client.DialContext(ctx, withLogger(cfg.ClientOptions(), log))
	if err != nil {
		return cfg.DialError(err)
	}
	defer c.Close()
	srv := httpserver.New(cfg.ApprovalsAddr, (&approvals.Server{
		Policy: cfg.Policy, Pool: pool, Temporal: c, Auth: auth, Signer: *cfg.SigningKey, SessionKey: sessionKey,
		SecureCookies: os.Getenv("APPROVALS_SECURE_COOKIES") == "1", Logger: log, Auditor: insights.Reader{Pool: audit, Policy: cfg.Policy},
		TemporalWeb: cfg.TemporalWebURL, Namespace: cfg.Namespace}).Handler())
	log.Info("card UI listening", zap.String("addr", cfg.ApprovalsAddr), zap.String("issuer", oc.Issuer))
	return httpserver.Run(ctx, srv)
}
