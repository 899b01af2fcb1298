package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DemoKey signs tokens in dev mode only (TOOLGATE_DEV=1, set by make dev).
const DemoKey = "mangrove-demo-signing-key-change-me"

// Settings are what the upstream process reads from its environment. The
// upstream is another system: it reads its own settings and imports
// nothing of toolgate.
type Settings struct {
	// Addr is UPSTREAM_ADDR, 127.0.0.1:8081 by default.
	Addr string
	// DatabaseURL is UPSTREAM_DATABASE_URL, else DATABASE_URL with its user
	// replaced by toolgate_upstream.
	DatabaseURL string
	// Key is UPSTREAM_TOKEN_KEY: at least 32 characters and not DemoKey,
	// unless Dev, where DemoKey is the default.
	Key string
	Dev bool
}

// SettingsFromEnv reads and checks the upstream's settings; the error names
// the variable to fix.
func SettingsFromEnv() (Settings, error) {
	s := Settings{Addr: os.Getenv("UPSTREAM_ADDR"), DatabaseURL: os.Getenv("UPSTREAM_DATABASE_URL"),
		Key: os.Getenv("UPSTREAM_TOKEN_KEY"), Dev: os.Getenv("TOOLGATE_DEV") == "1"}
	if s.Addr == "" {
		s.Addr = "127.0.0.1:8081"
	}
	if s.DatabaseURL == "" {
		owner := os.Getenv("DATABASE_URL")
		if owner == "" {
			owner = "postgres://postgres@127.0.0.1:5432/toolgate?sslmode=disable"
		}
		u, err := url.Parse(owner)
		if err != nil || u.Scheme == "" {
			return s, fmt.Errorf("UPSTREAM_DATABASE_URL unset and DATABASE_URL is not a postgres:// URL")
		}
		u.User = url.User("toolgate_upstream")
		s.DatabaseURL = u.String()
	}
	switch {
	case s.Dev && s.Key == "":
		s.Key = DemoKey
	case s.Dev:
	case s.Key == "":
		return s, fmt.Errorf("UPSTREAM_TOKEN_KEY is not set: outside dev mode (TOOLGATE_DEV=1, which make dev sets) it must be a random secret of at least 32 characters, e.g. openssl rand -base64 32")
	case s.Key == DemoKey:
		return s, fmt.Errorf("UPSTREAM_TOKEN_KEY is the published demo key: set a random secret of at least 32 characters (openssl rand -base64 32)")
	case len(s.Key) < 32:
		return s, fmt.Errorf("UPSTREAM_TOKEN_KEY is %d characters: use a random secret of at least 32 (openssl rand -base64 32)", len(s.Key))
	}
	return s, nil
}

// OpenPool connects with the settings' database URL and refuses a
// superuser: the upstream needs only its own schema.
func (s Settings) OpenPool(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, s.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("upstream database: %w", err)
	}
	var user string
	var super bool
	if err := pool.QueryRow(ctx, `SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super); err != nil {
		pool.Close()
		return nil, fmt.Errorf("upstream database: %w", err)
	}
	if super {
		pool.Close()
		return nil, fmt.Errorf("the upstream connects as %s, a superuser; give it its own role (toolgate_upstream by default)", user)
	}
	return pool, nil
}

// HTTPServer is the upstream's server on its address, with read, write and
// idle timeouts so a slow client is cut off.
func (s Settings) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Addr: s.Addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10}
}
