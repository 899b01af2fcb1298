// Package migrations holds toolgate's SQL migrations and applies them with
// tern. They create the append-only audit log, the demo vault and the
// Mangrove demo upstream's tables with their seed data.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed sql/*.sql
var files embed.FS

// VersionTable records which migrations have run.
const VersionTable = "schema_version"

// Apply creates the database named in databaseURL when it is missing, then
// runs every migration not yet applied. It must run as a role that can
// create tables (the database owner), not as the app role.
func Apply(ctx context.Context, databaseURL string) error {
	return ApplyTo(ctx, databaseURL, -1)
}

// ApplyTo is Apply up to and including migration version (all of them
// when version is negative): an upgrade test starts a database at an
// older version.
func ApplyTo(ctx context.Context, databaseURL string, version int32) error {
	if err := EnsureDatabase(ctx, databaseURL); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("migrations: load: %w", err)
	}
	if version < 0 {
		version = int32(len(m.Migrations))
	}
	if err := m.MigrateTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: apply: %w", err)
	}
	return nil
}

// EnsureDatabase creates the database of databaseURL if it does not exist,
// connecting to the server's postgres database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("migrations: DATABASE_URL: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrations: connect to the server: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrations: create database %s: %w", name, err)
	}
	return nil
}
