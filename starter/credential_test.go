package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestCredentialIssuesAnUnguessableHandle: in dev mode, `starter credential`
// prints a fresh handle whose vault row is bound to the role, stores and
// acr given and is not a demo row; outside dev mode, or for a stranger, it
// refuses and writes nothing.
func TestCredentialIssuesAnUnguessableHandle(t *testing.T) {
	db := testenv.Database(t)
	t.Setenv("DATABASE_URL", db)
	t.Setenv("TOOLGATE_DEV", "1")
	var out strings.Builder
	if err := run([]string{"credential", "--user", "ama", "--role", "store_manager", "--stores", "112", "--acr", "mfa"}, &out); err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimSpace(out.String())
	if !strings.HasPrefix(ref, "cr_") || len(ref) < 25 {
		t.Fatalf("handle %q", ref)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM vault.credentials WHERE ref = $1 AND user_id = 'ama' AND NOT demo AND role = 'store_manager'
		AND resources = '{"store": ["112"]}'::jsonb AND acr = 'mfa' AND auth_time IS NOT NULL`, ref).Scan(&n)
	if n != 1 {
		t.Fatal("the vault row is not bound as asked")
	}
	if err := run([]string{"credential", "--user", "mallory", "--role", "store_manager", "--stores", "112"}, &out); err == nil || !strings.Contains(err.Error(), "not a demo user") {
		t.Fatalf("a stranger: %v", err)
	}
	t.Setenv("TOOLGATE_DEV", "")
	if err := run([]string{"credential", "--user", "ama", "--role", "store_manager", "--stores", "112"}, &out); err == nil || !strings.Contains(err.Error(), "TOOLGATE_DEV") {
		t.Fatalf("outside dev mode: %v", err)
	}
	_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM vault.credentials WHERE NOT demo`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d issued credentials, want 1", n)
	}
}
