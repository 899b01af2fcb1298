package app

import (
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/httpserver"
	"github.com/toolgate/toolgate/mcpgate"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// MCP serves toolgate's MCP server on MCP_ADDR.
func MCP(log *zap.Logger, cfg config.Config) error {
	set, err := mcpgate.SettingsFromEnv()
	if err != nil {
		return err
	}
	ctx, stop := stopping()
	defer stop()
	verify, err := mcpgate.NewVerifier(ctx, set.Issuer, set.Audience, set.Claims(cfg.Policy, cfg.Claims), 30*time.Second)
	if err != nil {
		return err
	}
	logout, err := mcpgate.NewLogoutVerifier(ctx, set.Issuer, set.ClientID, 30*time.Second)
	if err != nil {
		return err
	}
	pool, err := cfg.OpenPool(ctx, "mcp")
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := requireSchema(ctx, pool); err != nil {
		return err
	}
	c, err := client.DialContext(ctx, withLogger(cfg.ClientOptions(), log))
	if err != nil {
		return cfg.DialError(err)
	}
	defer c.Close()
	srv := httpserver.New(set.Addr, (&mcpgate.Server{Temporal: c, TaskQueue: cfg.TaskQueue, QueueFor: cfg.QueueFor, Policy: cfg.Policy, Verify: verify, Credential: mcpgate.VaultCredentials(pool, cfg.Exchange, log), Revoked: mcpgate.VaultRevocations(pool), Seal: mcpgate.VaultSeal(pool),
		Logout: logout, Revoke: mcpgate.VaultRevoke(pool),
		Resource: set.Resource, AuthorizationServer: set.Issuer, MaxWait: set.MaxWait, Signer: cfg.WithdrawSigningKey,
		Codec: cfg.Codec, SpendState: mcpgate.VaultStates(pool), TakeSignIn: mcpgate.VaultSignIns(pool), CardsURL: set.CardsURL, Logger: log}).Handler())
	// A tools/call holds its response open while a card waits (MaxWait):
	// the write deadline leaves room for the answer after the longest wait.
	srv.WriteTimeout = max(srv.WriteTimeout, set.MaxWait+httpserver.WriteTimeout)
	log.Info("MCP server listening", zap.String("addr", set.Addr), zap.String("resource", set.Resource), zap.String("issuer", set.Issuer))
	return httpserver.Run(ctx, srv)
}
