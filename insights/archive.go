package insights

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
)

// An archive is one month of the audit log as a file, kept when the month
// is dropped (migration 028, docs/operating.md): every row of the month as
// one JSON object a line (the row as PostgreSQL's to_jsonb writes it), in
// the order written, gzipped, in <partition>.jsonl.gz, beside a
// <partition>.jsonl.gz.sha256 that sha256sum -c checks. audit_archives
// records each file's rows and SHA-256 before the month may be dropped.

// Archive is one month's archive file.
type Archive struct {
	// Partition is the month's table, audit_log_YYYY_MM.
	Partition string `json:"partition"`
	Path      string `json:"path"`
	Rows      int64  `json:"rows"`
	SHA256    string `json:"sha256"`
}

// Month is the partition that holds the month of t (UTC).
func Month(t time.Time) string { return "audit_log_" + t.UTC().Format("2006_01") }

// ParseMonth reads a month as YYYY-MM, and says what to write otherwise.
func ParseMonth(s string) (time.Time, error) {
	m, err := time.Parse("2006-01", strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("month %q: write it as YYYY-MM, e.g. 2026-01", s)
	}
	return m, nil
}

// ArchivePath is where the month's archive lives in dir.
func ArchivePath(dir, partition string) string { return filepath.Join(dir, partition+".jsonl.gz") }

// WriteArchive writes the month of the audit log that starts at month to
// its file in dir, through q (the retention login, which reads the log),
// and its .sha256 beside it. A file already there is replaced only once
// the new one is whole.
func WriteArchive(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, month time.Time, dir string) (Archive, error) {
	a := Archive{Partition: Month(month), Path: ArchivePath(dir, Month(month))}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	tmp, err := os.CreateTemp(dir, a.Partition+".*.partial")
	if err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone once renamed
	sum := sha256.New()
	zw := gzip.NewWriter(io.MultiWriter(tmp, sum))
	start := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	rows, err := q.Query(ctx, `SELECT to_jsonb(a)::text FROM audit_log a WHERE a.at >= $1 AND a.at < $2 ORDER BY a.id`, start, start.AddDate(0, 1, 0))
	if err != nil {
		tmp.Close()
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			tmp.Close()
			return a, fmt.Errorf("archive %s: %w", a.Partition, err)
		}
		if _, err := io.WriteString(zw, line+"\n"); err != nil {
			rows.Close()
			tmp.Close()
			return a, fmt.Errorf("archive %s: %w", a.Partition, err)
		}
		a.Rows++
	}
	rows.Close()
	if err := errors.Join(rows.Err(), zw.Close(), tmp.Sync(), tmp.Close()); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	a.SHA256 = hex.EncodeToString(sum.Sum(nil))
	if err := os.Rename(tmp.Name(), a.Path); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	if err := os.WriteFile(a.Path+".sha256", []byte(a.SHA256+"  "+filepath.Base(a.Path)+"\n"), 0o640); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	return a, nil
}

// ReadArchive reads an archive file back: its SHA-256 and its rows, those
// of workflowID alone when it is not "" (every row counted either way).
func ReadArchive(path, workflowID string) (Archive, []map[string]any, error) {
	a := Archive{Path: path, Partition: strings.TrimSuffix(filepath.Base(path), ".jsonl.gz")}
	f, err := os.Open(path)
	if err != nil {
		return a, nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	sum := sha256.New()
	zr, err := gzip.NewReader(io.TeeReader(f, sum))
	if err != nil {
		return a, nil, fmt.Errorf("archive %s: not a gzipped archive: %w", path, err)
	}
	var rows []map[string]any
	lines := bufio.NewScanner(zr)
	lines.Buffer(make([]byte, 0, 1<<20), 64<<20)
	// A line that cannot hold the ID is skipped unread, when the ID is
	// written the same way in JSON whoever escapes it.
	skip := workflowID != "" && strings.IndexFunc(workflowID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@", r))
	}) < 0
	for lines.Scan() {
		a.Rows++
		if skip && !strings.Contains(lines.Text(), workflowID) {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal(lines.Bytes(), &row); err != nil {
			return a, nil, fmt.Errorf("archive %s, line %d: %w", path, a.Rows, err)
		}
		if workflowID == "" || row["workflow_id"] == workflowID {
			rows = append(rows, row)
		}
	}
	if err := lines.Err(); err != nil {
		return a, nil, fmt.Errorf("archive %s: %w", path, err)
	}
	if _, err := io.Copy(io.Discard, f); err != nil { // the gzip trailer's bytes count too
		return a, nil, fmt.Errorf("archive %s: %w", path, err)
	}
	a.SHA256 = hex.EncodeToString(sum.Sum(nil))
	return a, rows, nil
}

// Dropped is a month dropped from the log, as audit_archives records it.
type Dropped struct {
	Partition string
	Starts    time.Time
	Ends      time.Time
	Rows      int64
	SHA256    string
	Location  string
}

// dropped lists the months dropped from the log, oldest first.
func (r Reader) dropped(ctx context.Context) ([]Dropped, error) {
	rows, err := r.Pool.Query(ctx, `SELECT partition, starts, ends, rows, sha256, location FROM audit_archives WHERE dropped_at IS NOT NULL ORDER BY starts`)
	if err != nil {
		return nil, fmt.Errorf("the archived months: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Dropped, error) {
		var d Dropped
		return d, row.Scan(&d.Partition, &d.Starts, &d.Ends, &d.Rows, &d.SHA256, &d.Location)
	})
}

// fromArchives reads a call's rows from the archives in dir of the months
// dropped from the log, each file checked against the SHA-256 and row count
// recorded when it was archived.
func (r Reader) fromArchives(ctx context.Context, dir, workflowID string) ([]Event, string, error) {
	months, err := r.dropped(ctx)
	if err != nil {
		return nil, "", err
	}
	var events []Event
	var from []string
	for _, d := range months {
		a, rows, err := ReadArchive(ArchivePath(dir, d.Partition), workflowID)
		if err != nil {
			return nil, "", err
		}
		if a.SHA256 != d.SHA256 || a.Rows != d.Rows {
			return nil, "", fmt.Errorf("archive %s holds %d rows with SHA-256 %s; %s was archived with %d rows and SHA-256 %s: it is not that archive",
				a.Path, a.Rows, a.SHA256, d.Partition, d.Rows, d.SHA256)
		}
		if len(rows) > 0 {
			from = append(from, a.Path)
		}
		for _, row := range rows {
			e, err := r.eventOf(row)
			if err != nil {
				return nil, "", fmt.Errorf("archive %s: %w", a.Path, err)
			}
			events = append(events, e)
		}
	}
	slices.SortStableFunc(events, func(x, y Event) int { return x.At.Compare(y.At) })
	return events, strings.Join(from, ", "), nil
}

// eventOf is an archived row as the story's event.
func (r Reader) eventOf(row map[string]any) (Event, error) {
	b, _ := json.Marshal(row)
	var a struct {
		At           time.Time       `json:"at"`
		RunID        string          `json:"run_id"`
		Event        string          `json:"event"`
		Reason       string          `json:"reason"`
		Tool         string          `json:"tool"`
		UserID       string          `json:"user_id"`
		Role         string          `json:"role"`
		SessionID    string          `json:"session_id"`
		Conversation string          `json:"conversation_id"`
		Kind         *string         `json:"resource_kind"`
		ID           *string         `json:"resource_id"`
		ValueCents   *int64          `json:"value_cents"`
		Args         json.RawMessage `json:"args"`
		Approver     *string         `json:"approver_id"`
		ApproverRole *string         `json:"approver_role"`
		Issuer       *string         `json:"approver_issuer"`
		ACR          *string         `json:"approver_acr"`
		AuthTime     *time.Time      `json:"approver_auth_time"`
		Claimed      *string         `json:"claimed_approver_id"`
		Message      *string         `json:"message"`
		Result       json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return Event{}, err
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	raw := func(m json.RawMessage) json.RawMessage {
		if string(m) == "null" {
			return nil
		}
		return m
	}
	e := Event{At: a.At, RunID: a.RunID, Event: a.Event, Reason: a.Reason, Tool: a.Tool, UserID: a.UserID, Role: a.Role, SessionID: a.SessionID,
		Conversation: a.Conversation, ValueCents: a.ValueCents, Args: raw(a.Args), Approver: s(a.Approver), ApproverRole: s(a.ApproverRole),
		Issuer: s(a.Issuer), ACR: s(a.ACR), AuthTime: a.AuthTime, Claimed: s(a.Claimed), Message: s(a.Message), Result: raw(a.Result)}
	if a.Kind != nil && a.ID != nil {
		e.Resource = &policy.ResourceRef{Kind: *a.Kind, ID: *a.ID}
	}
	r.describeValue(&e)
	return e, nil
}
