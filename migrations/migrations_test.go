package migrations_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditLogIsAppendOnly: UPDATE, DELETE and TRUNCATE are refused for the
// app role and for the owner, on the table and on a month of it; the app
// role may INSERT and SELECT, and a second row with a written event key is
// not written.
func TestAuditLogIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	owner, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	app := testenv.AppPool(t, url)
	month := "audit_log_" + time.Now().UTC().Format("2006_01") // this month's partition

	insert := `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
	           VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's1', 'c1', 'wf', 'run', $1)`
	if _, err := app.Exec(ctx, insert, "app"); err != nil {
		t.Fatalf("app role cannot insert: %v", err)
	}
	if _, err := owner.Exec(ctx, insert, "owner"); err != nil {
		t.Fatalf("owner cannot insert: %v", err)
	}
	for who, pool := range map[string]*pgxpool.Pool{"app": app, "owner": owner} {
		for _, stmt := range []string{
			`UPDATE audit_log SET reason = 'ok'`,
			`UPDATE audit_log SET reason = 'ok' WHERE id = -1`,
			`DELETE FROM audit_log`,
			`TRUNCATE audit_log`,
			`UPDATE ` + month + ` SET reason = 'ok'`,
			`DELETE FROM ` + month,
			`TRUNCATE ` + month,
		} {
			if _, err := pool.Exec(ctx, stmt); err == nil {
				t.Errorf("%s: %q was allowed", who, stmt)
			}
		}
	}
	var n int
	if err := app.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after the attempts: %d (%v), want 2", n, err)
	}
	if tag, err := app.Exec(ctx, insert, "app"); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("a second row with the same event key: %v, %d rows written", err, tag.RowsAffected())
	}
	if err := app.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after a second row with the same event key: %d (%v), want 2", n, err)
	}
}

// TestMigrationsAreIdempotent: applying twice changes nothing and fails nothing.
func TestMigrationsAreIdempotent(t *testing.T) {
	url := testenv.Database(t)
	if err := testenv.Migrate(url); err != nil {
		t.Fatal(err)
	}
}

// TestEarlierAndLaterVersionsReadEachOthersRows: during a rolling deploy
// across migration 023, a row an earlier worker writes (store_id only) has
// its resource, and a row this version writes for a store has its
// store_id, so either version counts and lists the other's; a resource of
// another kind, or an ID that is not a store number, fills nothing.
func TestEarlierAndLaterVersionsReadEachOthersRows(t *testing.T) {
	ctx := context.Background()
	owner := testenv.OwnerPool(t, testenv.Database(t))
	for _, c := range []struct {
		key, write, want string
	}{
		{"earlier", `112, NULL, NULL`, "112 store 112"},
		{"later", `NULL, 'store', '118'`, "118 store 118"},
		{"account", `NULL, 'account', '4471'`, "- account 4471"},
		{"padded", `NULL, 'store', '0112'`, "- store 0112"},
	} {
		if _, err := owner.Exec(ctx, `INSERT INTO audit_log (event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key, store_id, resource_kind, resource_id)
			VALUES ('denied', 'role', 'get_stock', 'ama', 'store_manager', 's', 'c', 'wf', 'run', $1, `+c.write+`)`, c.key); err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		var got string
		if err := owner.QueryRow(ctx, `SELECT coalesce(store_id::text, '-') || ' ' || coalesce(resource_kind, '-') || ' ' || coalesce(resource_id, '-') FROM audit_log WHERE event_key = $1`, c.key).Scan(&got); err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.key, got, err, c.want)
		}
	}
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, resources) VALUES ('cr_later', 'ama', 'x', 'mangrove', '{"store": ["112", "118"]}'), ('cr_acc', 'ama', 'x', 'mangrove', '{"account": ["ACC-1"]}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, store_ids) VALUES ('cr_earlier', 'ama', 'x', ARRAY[131])`); err != nil {
		t.Fatal(err)
	}
	rows, err := owner.Query(ctx, `SELECT ref || ' ' || coalesce(array_to_string(store_ids, ','), '-') || ' ' || coalesce(resources::text, '-') FROM vault.credentials WHERE ref IN ('cr_acc', 'cr_earlier', 'cr_later') ORDER BY ref`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	want := []string{`cr_acc - {"account": ["ACC-1"]}`, `cr_earlier 131 {"store": ["131"]}`, `cr_later 112,118 {"store": ["112", "118"]}`}
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("credentials:\n%s\nwant:\n%s (%v)", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
}

// TestASeededSecretIsOnePersons: alice's seeded secret, bound to her
// sign-in (issuer and subject alice-1), is copied into her credential
// alone. A second account named alice (subject alice-2) gets a credential
// holding its grant and no secret, or none without a grant; a seeded
// secret bound to no sign-in goes to nobody, saying how to bind it.
func TestASeededSecretIsOnePersons(t *testing.T) {
	ctx := context.Background()
	owner := testenv.OwnerPool(t, testenv.Database(t))
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, issuer, subject)
		VALUES ('cred-alice', 'alice', 'alices-secret', 'mangrove', 'https://id.test', 'alice-1'), ('cred-bob', 'bob', 'bobs-secret', 'mangrove', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	issue := func(user, subject, grant string) (string, error) {
		var ref string
		err := owner.QueryRow(ctx, `SELECT vault.issue_for_sign_in_grant($1, 'https://id.test', $2, 'store_manager', '{}', 'pwd', now(), nullif($3, ''))`, user, subject, grant).Scan(&ref)
		return ref, err
	}
	secretOf := func(ref string) string {
		var secret string
		_ = owner.QueryRow(ctx, `SELECT coalesce(client_secret, '') FROM vault.credentials WHERE ref = $1`, ref).Scan(&secret)
		return secret
	}
	if ref, err := issue("alice", "alice-1", ""); err != nil || secretOf(ref) != "alices-secret" {
		t.Fatalf("alice's own sign-in: %v, secret %q", err, secretOf(ref))
	}
	if ref, err := issue("alice", "alice-2", "grant_other"); err != nil || secretOf(ref) != "" {
		t.Fatalf("a second account named alice, with a grant: %v, secret %q", err, secretOf(ref))
	}
	if _, err := issue("alice", "alice-2", ""); err == nil || !strings.Contains(err.Error(), "no seeded secret of this sign-in") {
		t.Fatalf("a second account named alice, without a grant: %v", err)
	}
	if _, err := issue("bob", "bob-1", ""); err == nil || !strings.Contains(err.Error(), "names no sign-in, so it goes to nobody") {
		t.Fatalf("bob's unbound seeded secret: %v", err)
	}
	if _, err := owner.Exec(ctx, `UPDATE vault.credentials SET issuer = 'https://id.test', subject = 'bob-1' WHERE ref = 'cred-bob'`); err != nil {
		t.Fatal(err)
	}
	if ref, err := issue("bob", "bob-1", ""); err != nil || secretOf(ref) != "bobs-secret" {
		t.Fatalf("bob's secret once bound to his sign-in: %v, secret %q", err, secretOf(ref))
	}
}

// TestCopiesOfAnUnboundSecretAreRevoked: before migration 032 a second
// account named carol could copy carol's seeded secret; 032 revokes every
// copy of a seeded secret that names no sign-in (nothing tells whose a copy
// is), and leaves other credentials alone.
func TestCopiesOfAnUnboundSecretAreRevoked(t *testing.T) {
	ctx := context.Background()
	url := testenv.DatabaseAt(t, 31)
	owner := testenv.OwnerPool(t, url)
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, secret_pack, issuer, subject, role, acr, auth_time) VALUES
		('cred-carol', 'carol', 'carols-secret', 'mangrove', NULL, NULL, NULL, NULL, NULL),
		('cr_carol_1', 'carol', 'carols-secret', 'mangrove', 'https://id.test', 'carol-1', 'store_manager', 'pwd', now()),
		('cr_carol_2', 'carol', 'carols-secret', 'mangrove', 'https://id.test', 'carol-2', 'store_manager', 'pwd', now()),
		('cr_dan_1', 'dan', 'dans-secret', 'mangrove', 'https://id.test', 'dan-1', 'store_manager', 'pwd', now())`); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Migrate(url); err != nil {
		t.Fatal(err)
	}
	rows, err := owner.Query(ctx, `SELECT ref || ' ' || revoked::text FROM vault.credentials WHERE ref IN ('cred-carol', 'cr_carol_1', 'cr_carol_2', 'cr_dan_1', 'cred-ama') ORDER BY ref`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "cr_carol_1 true,cr_carol_2 true,cr_dan_1 false,cred-ama false,cred-carol false"; strings.Join(got, ",") != want {
		t.Fatalf("after migration 032: %s, want %s", strings.Join(got, ","), want)
	}
}

// TestACredentialHoldsASecretForOnePackOrAGrant: the demo rows' secrets
// are the demo pack's, and a copy of one keeps its pack (an earlier
// starter or MCP server copies without naming it); any other secret names
// no pack, so it goes nowhere. A credential holds a secret or a grant: the
// vault issues a sign-in with no seeded row of its person a credential
// holding the grant alone, and none without one.
func TestACredentialHoldsASecretForOnePackOrAGrant(t *testing.T) {
	ctx := context.Background()
	owner := testenv.OwnerPool(t, testenv.Database(t))
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret, demo)
		SELECT 'cr_copy', user_id, client_secret, demo FROM vault.credentials WHERE ref = 'cred-ama'`); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id, client_secret) VALUES ('cr_own', 'ama', 'a-secret-of-another-system')`); err != nil {
		t.Fatal(err)
	}
	ref := ""
	if err := owner.QueryRow(ctx, `SELECT vault.issue_for_sign_in_grant('cara', 'https://id.test', 'cara', 'card_agent', '{"account": ["ACC-4471"]}', 'pwd', now(), 'grant_x')`).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	rows, err := owner.Query(ctx, `SELECT ref || ' ' || coalesce(secret_pack, '-') || ' ' || (client_secret IS NOT NULL)::text || ' ' || coalesce(grant_token, '-')
		FROM vault.credentials WHERE ref IN ('cred-ama', 'cred-kofi', 'cr_copy', 'cr_own', $1) ORDER BY ref`, ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cr_copy mangrove true -", "cr_own - true -", ref + " - false grant_x", "cred-ama mangrove true -", "cred-kofi mangrove true -"}
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("credentials:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := owner.Exec(ctx, `INSERT INTO vault.credentials (ref, user_id) VALUES ('cr_empty', 'ama')`); err == nil {
		t.Fatal("a credential holding neither a secret nor a grant was written")
	}
	if err := owner.QueryRow(ctx, `SELECT vault.issue_for_sign_in_grant('sam', 'https://id.test', 'sam', 'card_supervisor', '{}', 'pwd', now(), NULL)`).Scan(&ref); err == nil ||
		!strings.Contains(err.Error(), "no seeded secret of this sign-in and no grant") {
		t.Fatalf("a sign-in with neither a seeded secret nor a grant got a credential: %v", err)
	}
}

// TestAMonthArchivedBefore033KeepsItsDigest: migrations 033 and 037 add
// columns to the audit log, and a month's digest hashes each row's JSON; a
// month archived before them must still match the digest its archive
// recorded, or it could never be dropped without archiving it again. A row
// that names a person (from 033), or a decision made in the requester's
// client (from 037), is archived with them.
func TestAMonthArchivedBefore033KeepsItsDigest(t *testing.T) {
	ctx := context.Background()
	url := testenv.DatabaseAt(t, 32)
	owner := testenv.OwnerPool(t, url)
	month := time.Now().UTC().AddDate(0, -2, 0)
	starts := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	ends := starts.AddDate(0, 1, 0)
	if _, err := owner.Exec(ctx, `SELECT audit_log_partition($1::date)`, starts); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key)
		SELECT $1::timestamptz + make_interval(hours => g), 'allowed', 'ok', 'get_stock', 'ama', 'store_manager', 's', 'c', 'wf-' || g, 'run', 'decision'
		FROM generate_series(1, 20) g`, starts); err != nil {
		t.Fatal(err)
	}
	digest := func() string {
		t.Helper()
		var d string
		if err := owner.QueryRow(ctx, `SELECT audit_rows_digest($1, $2)`, starts, ends).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()
	if err := testenv.Migrate(url); err != nil {
		t.Fatal(err)
	}
	if after := digest(); after != before {
		t.Fatalf("the month's digest was %s before migration 033 and is %s after: its archive no longer matches", before, after)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key,
		requester_issuer, requester_subject) VALUES ($1::timestamptz + interval '30 hours', 'allowed', 'ok', 'get_stock', 'ama', 'store_manager', 's', 'c', 'wf-named', 'run', 'decision',
		'https://id.test', 'ama-1')`, starts); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := owner.QueryRow(ctx, `SELECT audit_row_text(a) FROM audit_log a WHERE workflow_id = 'wf-named'`).Scan(&text); err != nil ||
		!strings.Contains(text, `"requester_subject": "ama-1"`) || !strings.Contains(text, `"requester_issuer": "https://id.test"`) {
		t.Fatalf("a row that names a person, as archived: %v %s", err, text)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, workflow_id, run_id, event_key,
		approver_id, approver_via) VALUES ($1::timestamptz + interval '31 hours', 'approved', 'ok', 'get_stock', 'ama', 'store_manager', 's', 'c', 'wf-named', 'run', 'approved',
		'ama', 'confirmed_in_client')`, starts); err != nil {
		t.Fatal(err)
	}
	if err := owner.QueryRow(ctx, `SELECT audit_row_text(a) FROM audit_log a WHERE workflow_id = 'wf-named' AND event = 'approved'`).Scan(&text); err != nil ||
		!strings.Contains(text, `"approver_via": "confirmed_in_client"`) {
		t.Fatalf("a decision made in the client, as archived: %v %s", err, text)
	}
	if digest() == before {
		t.Fatal("a row added to the month left its digest as it was")
	}
}
