// Package pg opens the PostgreSQL pools the services use.
package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppRole is the role the services act as: INSERT and SELECT on audit_log only.
const AppRole = "toolgate_app"

// Open returns a pool. When role is set, every connection switches to it, so
// even a DATABASE_URL naming the owner acts with the app role's rights.
func Open(ctx context.Context, url, role string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if role != "" {
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database %s: %w", cfg.ConnConfig.Database, err)
	}
	return pool, nil
}
