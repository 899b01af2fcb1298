package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRetentionArchivesThenDropsAMonth keeps the audit log lawfully, through
// starter retention as toolgate_retention: the rows of a real approved
// transfer, moved three months back, are a month that ended longer ago than
// the log is kept. The month is archived (its file's SHA-256 is what
// audit_archives records and what its .sha256 says), a tampered copy of the
// archive drops nothing, nor does a checksum the archive did not record, no
// service's login may record an archive or drop a month, neither this month
// nor one younger than the log is kept may be dropped, and the drop takes
// the month and
// writes a partition_dropped row. explain then says where a call of the
// dropped month went, and reads it from its archive, checked.
func TestRetentionArchivesThenDropsAMonth(t *testing.T) {
	ctx := context.Background()
	s := testenv.NewStack(t)
	milk1, _, _ := friday(t, s)
	asStarter(t, s)
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 12, 0, 0, 0, time.UTC)
	old := thisMonth.AddDate(0, -3, 0)
	month, partition := old.Format("2006-01"), insights.Month(old)
	moved := "toolcall-march-" + strings.TrimPrefix(milk1, "toolcall-")
	if _, err := s.Owner.Exec(ctx, `SELECT audit_log_partition($1::date)`, old); err != nil {
		t.Fatal(err)
	}
	tag, err := s.Owner.Exec(ctx, `INSERT INTO audit_log (at, event, reason, tool, user_id, role, session_id, conversation_id, args, resource_kind, resource_id,
		value_cents, workflow_id, run_id, event_key, approver_id, approver_role, message, result, approver_issuer, approver_subject, approver_acr, approver_auth_time)
		SELECT at - interval '3 months', event, reason, tool, user_id, role, session_id, conversation_id, args, resource_kind, resource_id,
		value_cents, $2, run_id, event_key, approver_id, approver_role, message, result, approver_issuer, approver_subject, approver_acr, approver_auth_time
		FROM audit_log WHERE workflow_id = $1 ORDER BY id`, milk1, moved)
	if err != nil || tag.RowsAffected() < 3 {
		t.Fatalf("moving the transfer's rows back: %v, %d rows", err, tag.RowsAffected())
	}
	if _, err := s.Owner.Exec(ctx, `UPDATE audit_retention SET keep = interval '1 month'`); err != nil {
		t.Fatal(err)
	}
	var inMonth int64
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE at >= date_trunc('month', $1::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
		AND at < (date_trunc('month', $1::timestamptz AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC'`, old).Scan(&inMonth)

	// No service may record an archive or drop a month: not even try.
	for _, service := range []string{"worker", "approvals", "upstream", "mcp", "auditor"} {
		pool := testenv.ServicePool(t, s.DatabaseURL, service)
		for _, sql := range []string{`SELECT audit_archive_record($1, 1, repeat('0', 64), repeat('0', 64), 'x')`, `SELECT audit_partition_drop($1, repeat('0', 64))`} {
			_, err := pool.Exec(ctx, sql, partition)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("%s: %s: %v, want permission denied", service, sql, err)
			}
		}
	}

	dir := t.TempDir()
	var out strings.Builder
	if err := run([]string{"retention", "drop", "--month", month, "--dir", dir}, &out); err == nil || !strings.Contains(err.Error(), "has no archive") {
		t.Fatalf("a month dropped before it was archived: %v", err)
	}
	if err := run([]string{"retention", "archive", "--month", time.Now().UTC().Format("2006-01"), "--dir", dir}, &out); err == nil || !strings.Contains(err.Error(), "has not ended") {
		t.Fatalf("this month archived: %v", err)
	}
	if err := run([]string{"retention", "archive", "--month", month, "--dir", dir}, &out); err != nil {
		t.Fatal(err)
	}
	path := insights.ArchivePath(dir, partition)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	var recorded string
	var rows int64
	if err := s.Owner.QueryRow(ctx, `SELECT sha256, rows FROM audit_archives WHERE partition = $1`, partition).Scan(&recorded, &rows); err != nil {
		t.Fatal(err)
	}
	side, _ := os.ReadFile(path + ".sha256")
	if hex.EncodeToString(sum[:]) != recorded || string(side) != recorded+"  "+filepath.Base(path)+"\n" || rows != inMonth || rows == 0 {
		t.Fatalf("the archive: file SHA-256 %x, recorded %s, .sha256 %q; %d rows recorded, the month held %d", sum, recorded, side, rows, inMonth)
	}

	// A tampered archive drops nothing.
	tampered := t.TempDir()
	a, _, err := insights.ReadArchive(path, "")
	if err != nil || a.Rows != rows || a.SHA256 != recorded {
		t.Fatalf("reading the archive back: %v, %d rows, SHA-256 %s", err, a.Rows, a.SHA256)
	}
	zr, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	lines := strings.Split(strings.TrimSuffix(string(plain), "\n"), "\n")
	if len(lines) != int(rows) {
		t.Fatalf("the archive holds %d lines, recorded %d rows", len(lines), rows)
	}
	// The same rows, one reason reworded, gzipped whole: a readable archive
	// that is not the one recorded.
	var forged bytes.Buffer
	zw := gzip.NewWriter(&forged)
	for i, line := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			row["reason"] = "forged"
		}
		b, _ := json.Marshal(row)
		zw.Write(append(b, '\n')) //nolint:errcheck // a bytes.Buffer
	}
	zw.Close() //nolint:errcheck // a bytes.Buffer
	if err := os.WriteFile(insights.ArchivePath(tampered, partition), forged.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"retention", "drop", "--month", month, "--dir", tampered}, &out); err == nil || !strings.Contains(err.Error(), "nothing dropped") {
		t.Fatalf("a tampered archive: %v", err)
	}
	if err := run([]string{"retention", "drop", "--month", time.Now().UTC().Format("2006-01"), "--dir", dir}, &out); err == nil {
		t.Fatal("this month was dropped")
	}
	// Last month has ended, but less than the month the log is kept.
	last := thisMonth.AddDate(0, -1, 0)
	if _, err := s.Owner.Exec(ctx, `SELECT audit_log_partition($1::date)`, last); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"retention", "archive", "--month", last.Format("2006-01"), "--dir", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"retention", "drop", "--month", last.Format("2006-01"), "--dir", dir}, &out); err == nil || !strings.Contains(err.Error(), "less than the 1 mon the log is kept") {
		t.Fatalf("a month younger than the log is kept: %v", err)
	}
	// The database checks the checksum itself, whoever calls it.
	retention := testenv.ServicePool(t, s.DatabaseURL, "retention")
	if _, err := retention.Exec(ctx, `SELECT audit_partition_drop($1, repeat('0', 64))`, partition); err == nil || !strings.Contains(err.Error(), "it is not the archive") {
		t.Fatalf("a drop naming another checksum: %v", err)
	}
	out.Reset()
	if err := run([]string{"retention", "drop", "--month", month, "--dir", dir}, &out); err != nil {
		t.Fatal(err)
	}
	var exists bool
	var left, drops int64
	var dropped *time.Time
	_ = s.Owner.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, partition).Scan(&exists)
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workflow_id = $1`, moved).Scan(&left)
	_ = s.Owner.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE event = 'partition_dropped' AND result->>'partition' = $1 AND result->>'sha256' = $2
		AND (result->>'rows')::bigint = $3 AND user_id = 'toolgate_retention'`, partition, recorded, rows).Scan(&drops)
	_ = s.Owner.QueryRow(ctx, `SELECT dropped_at FROM audit_archives WHERE partition = $1`, partition).Scan(&dropped)
	if exists || left != 0 || drops != 1 || dropped == nil {
		t.Fatalf("after the drop: the month exists %v, %d of its rows left, %d drop rows in the log, dropped at %v", exists, left, drops, dropped)
	}
	// Archiving the dropped month again leaves its archive as it was.
	if err := run([]string{"retention", "archive", "--month", month, "--dir", dir}, &out); err == nil || !strings.Contains(err.Error(), "was dropped") {
		t.Fatalf("a dropped month archived again: %v", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, file) {
		t.Fatal("archiving a dropped month again changed its archive")
	}

	if err := run([]string{"explain", "--workflow-id", moved}, &out); err == nil || !strings.Contains(err.Error(), "archived and dropped") || !strings.Contains(err.Error(), "--archive DIR") {
		t.Fatalf("a dropped month's call without its archive: %v", err)
	}
	if err := run([]string{"explain", "--workflow-id", moved, "--archive", tampered}, &out); err == nil || !strings.Contains(err.Error(), "it is not that archive") {
		t.Fatalf("a dropped month's call from a tampered archive: %v", err)
	}
	out.Reset()
	if err := run([]string{"explain", "--workflow-id", moved, "--archive", dir}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"Read from the archive of a month dropped from the audit log: " + path, "approved (ok) $384.00 by ama (store_manager)",
		"it ran once upstream, with Idempotency-Key " + moved + ": transfer TR-"} {
		if !strings.Contains(text, want) {
			t.Errorf("the archived call's story lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := run([]string{"explain", "--workflow-id", milk1, "--archive", dir}, &out); err != nil || strings.Contains(out.String(), "Read from the archive") {
		t.Fatalf("a call still in the log: %v\n%s", err, out.String())
	}
}
