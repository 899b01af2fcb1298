package insights

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
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
// one JSON object a line (the row as PostgreSQL's to_jsonb writes it, less
// the columns of migration 033 where the row names no person: audit_row_text), in
// the order written, gzipped, in <partition>.jsonl.gz, beside a
// <partition>.jsonl.gz.sha256 that sha256sum -c checks. audit_archives
// records each file's rows and SHA-256 before the month may be dropped.

// Archive is one month's archive file.
type Archive struct {
	// Partition is the month's table, audit_log_YYYY_MM.
	Partition string `json:"partition"`
	Path      string `json:"path"`
	Rows      int64  `json:"rows"`
	// SHA256 is the file's; RowsSHA256 the rows' digest, which the
	// database computes from the month itself (audit_rows_digest).
	SHA256     string `json:"sha256"`
	RowsSHA256 string `json:"rowsSha256"`
}

// digestChunk is how many rows' hashes the rows' digest hashes together
// (audit_rows_digest's 100,000).
const digestChunk = 100_000

// rowsDigest is audit_rows_digest over lines: each line's SHA-256, each
// digestChunk of them hashed together, and those hashed together.
type rowsDigest struct {
	top, chunk hash.Hash
	n          int64
}

func newRowsDigest() *rowsDigest { return &rowsDigest{top: sha256.New(), chunk: sha256.New()} }

func (d *rowsDigest) add(line []byte) {
	h := sha256.Sum256(line)
	d.chunk.Write(h[:])
	if d.n++; d.n%digestChunk == 0 {
		d.top.Write(d.chunk.Sum(nil))
		d.chunk.Reset()
	}
}

func (d *rowsDigest) sum() string {
	if d.n%digestChunk != 0 {
		d.top.Write(d.chunk.Sum(nil))
	}
	return hex.EncodeToString(d.top.Sum(nil))
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
// and its .sha256 beside it. record is called with the archive before the
// file takes its name: a file already there is replaced only once the new
// one is whole and recorded, and is left as it was when record fails (a
// month already dropped, or whose rows changed while they were read).
func WriteArchive(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, month time.Time, dir string, record func(Archive) error) (Archive, error) {
	a := Archive{Partition: Month(month), Path: ArchivePath(dir, Month(month))}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	tmp, err := os.CreateTemp(dir, a.Partition+".*.partial")
	if err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone once renamed
	sum, rows := sha256.New(), newRowsDigest()
	zw := gzip.NewWriter(io.MultiWriter(tmp, sum))
	start := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	err = func() error {
		defer tmp.Close()
		lines, err := q.Query(ctx, `SELECT audit_row_text(a) FROM audit_log a WHERE a.at >= $1 AND a.at < $2 ORDER BY a.id`, start, start.AddDate(0, 1, 0))
		if err != nil {
			return err
		}
		defer lines.Close()
		for lines.Next() {
			var line []byte
			if err := lines.Scan(&line); err != nil {
				return err
			}
			rows.add(line)
			if _, err := zw.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		return errors.Join(lines.Err(), zw.Close(), tmp.Sync())
	}()
	if err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	a.Rows, a.SHA256, a.RowsSHA256 = rows.n, hex.EncodeToString(sum.Sum(nil)), rows.sum()
	if err := record(a); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	if err := os.Rename(tmp.Name(), a.Path); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	if err := os.WriteFile(a.Path+".sha256", []byte(a.SHA256+"  "+filepath.Base(a.Path)+"\n"), 0o640); err != nil {
		return a, fmt.Errorf("archive %s: %w", a.Partition, err)
	}
	return a, nil
}

// ReadArchive reads an archive file back: its SHA-256, rows and rows'
// digest, and the rows of workflowID when it is not "" (none are kept
// otherwise, so a month of any size is read in constant memory).
func ReadArchive(path, workflowID string) (Archive, []map[string]any, error) {
	a := Archive{Path: path, Partition: strings.TrimSuffix(filepath.Base(path), ".jsonl.gz")}
	f, err := os.Open(path)
	if err != nil {
		return a, nil, fmt.Errorf("archive %s: %w", path, err)
	}
	defer f.Close()
	sum := sha256.New()
	file := io.TeeReader(f, sum)
	zr, err := gzip.NewReader(file)
	if err != nil {
		return a, nil, fmt.Errorf("archive %s: not a gzipped archive: %w", path, err)
	}
	digest := newRowsDigest()
	var rows []map[string]any
	lines := bufio.NewReader(zr)
	// A line that cannot hold the ID is skipped unread, when the ID is
	// written the same way in JSON whoever escapes it.
	skip := workflowID != "" && strings.IndexFunc(workflowID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@", r))
	}) < 0
	for {
		line, err := lines.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil {
			return a, nil, fmt.Errorf("archive %s, after line %d: %w", path, digest.n, err)
		}
		line = line[:len(line)-1]
		digest.add(line)
		if workflowID == "" || skip && !bytes.Contains(line, []byte(workflowID)) {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			return a, nil, fmt.Errorf("archive %s, line %d: %w", path, digest.n, err)
		}
		if row["workflow_id"] == workflowID {
			rows = append(rows, row)
		}
	}
	if _, err := io.Copy(io.Discard, file); err != nil { // any bytes after the gzip stream count too
		return a, nil, fmt.Errorf("archive %s: %w", path, err)
	}
	a.Rows, a.SHA256, a.RowsSHA256 = digest.n, hex.EncodeToString(sum.Sum(nil)), digest.sum()
	return a, rows, nil
}

// Matches says whether an archive read back is the one audit_archives
// recorded for its month, and if not, what differs.
func (a Archive) Matches(rows int64, sha, rowsSHA string) error {
	if a.Rows != rows || a.SHA256 != sha || a.RowsSHA256 != rowsSHA {
		return fmt.Errorf("%s holds %d rows, SHA-256 %s, rows' digest %s; %s was archived with %d rows, SHA-256 %s, rows' digest %s: it is not that archive",
			a.Path, a.Rows, a.SHA256, a.RowsSHA256, a.Partition, rows, sha, rowsSHA)
	}
	return nil
}

// Dropped is a month dropped from the log, as audit_archives records it.
type Dropped struct {
	Partition  string
	Starts     time.Time
	Ends       time.Time
	Rows       int64
	SHA256     string
	RowsSHA256 string
	Location   string
}

// dropped lists the months dropped from the log, oldest first.
func (r Reader) dropped(ctx context.Context) ([]Dropped, error) {
	rows, err := r.Pool.Query(ctx, `SELECT partition, starts, ends, rows, sha256, rows_sha256, location FROM audit_archives WHERE dropped_at IS NOT NULL ORDER BY starts`)
	if err != nil {
		return nil, fmt.Errorf("the archived months: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Dropped, error) {
		var d Dropped
		return d, row.Scan(&d.Partition, &d.Starts, &d.Ends, &d.Rows, &d.SHA256, &d.RowsSHA256, &d.Location)
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
		if err := a.Matches(d.Rows, d.SHA256, d.RowsSHA256); err != nil {
			return nil, "", fmt.Errorf("archive %w", err)
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
		Via          *string         `json:"approver_via"`
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
		Issuer: s(a.Issuer), ACR: s(a.ACR), AuthTime: a.AuthTime, Via: s(a.Via), Claimed: s(a.Claimed), Message: s(a.Message), Result: raw(a.Result)}
	if a.Kind != nil && a.ID != nil {
		e.Resource = &policy.ResourceRef{Kind: *a.Kind, ID: *a.ID}
	}
	r.describeValue(&e)
	return e, nil
}
