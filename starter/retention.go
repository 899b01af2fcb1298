// starter's retention commands: which months of the audit log may go, a
// month archived to a file, and an archived month dropped.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/config"
)

const retentionUsage = "retention: give plan, archive --month YYYY-MM --dir DIR, or drop --month YYYY-MM --dir DIR"

// retentionCmd keeps the audit log as long as the deployment must and
// trims it lawfully: a whole month, once older than audit_retention.keep,
// archived to a file whose SHA-256 the database records, then dropped by
// the retention login (which no service holds), the drop itself a row of
// the log (docs/operating.md, Keeping the audit log).
func retentionCmd(cfg config.Config, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(retentionUsage)
	}
	fs := flag.NewFlagSet("retention "+args[0], flag.ContinueOnError)
	month := fs.String("month", "", "the month, YYYY-MM (UTC)")
	dir := fs.String("dir", "", "the folder of the archive files")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := cfg.OpenPool(ctx, "retention")
	if err != nil {
		return fmt.Errorf("the retention login (RETENTION_DATABASE_URL, default DATABASE_URL as toolgate_retention): %w", err)
	}
	defer pool.Close()
	if args[0] == "plan" {
		return retentionPlan(ctx, pool, out)
	}
	if args[0] != "archive" && args[0] != "drop" {
		return errors.New(retentionUsage)
	}
	m, err := insights.ParseMonth(*month)
	if err != nil {
		return fmt.Errorf("retention %s: --%w", args[0], err)
	}
	if *dir == "" {
		return fmt.Errorf("retention %s: --dir is required: the folder the month's archive is written to and read from", args[0])
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("retention %s: --dir: %w", args[0], err)
	}
	partition := insights.Month(m)
	var rows int64
	var sha, rowsSHA string
	var dropped *time.Time
	err = pool.QueryRow(ctx, `SELECT rows, sha256, rows_sha256, dropped_at FROM audit_archives WHERE partition = $1`, partition).Scan(&rows, &sha, &rowsSHA, &dropped)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("retention %s: %w", args[0], err)
	}
	if dropped != nil {
		return fmt.Errorf("retention %s: %s was dropped at %s; its archive is what is left of it: nothing done", args[0], partition, dropped.UTC().Format(time.RFC3339))
	}
	if args[0] == "archive" {
		a, err := insights.WriteArchive(ctx, pool, m, abs, func(a insights.Archive) error {
			_, err := pool.Exec(ctx, `SELECT audit_archive_record($1, $2, $3, $4, $5)`, a.Partition, a.Rows, a.SHA256, a.RowsSHA256, a.Path)
			return err
		})
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		fmt.Fprintf(out, "archived %s: %d rows in %s, SHA-256 %s\n", a.Partition, a.Rows, a.Path, a.SHA256)
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("retention drop: %s has no archive; run starter retention archive --month %s --dir DIR first", partition, m.Format("2006-01"))
	}
	a, _, err := insights.ReadArchive(insights.ArchivePath(abs, partition), "")
	if err != nil {
		return fmt.Errorf("retention drop: %w", err)
	}
	if err := a.Matches(rows, sha, rowsSHA); err != nil {
		return fmt.Errorf("retention drop: %w: nothing dropped", err)
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT audit_partition_drop($1, $2)`, partition, a.SHA256).Scan(&n); err != nil {
		return fmt.Errorf("retention drop: %w", err)
	}
	fmt.Fprintf(out, "dropped %s: %d rows, kept in %s (SHA-256 %s); the log records the drop (event partition_dropped)\n", partition, n, a.Path, a.SHA256)
	return nil
}

// retentionPlan lists the log's months: their rows (PostgreSQL's estimate),
// whether each is archived, and whether it is old enough to drop.
func retentionPlan(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
	var keep string
	var dropBefore time.Time // as audit_partition_drop reckons it, in calendar months
	if err := pool.QueryRow(ctx, `SELECT keep::text, now() - keep FROM audit_retention`).Scan(&keep, &dropBefore); err != nil {
		return fmt.Errorf("retention plan: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT c.relname, greatest(c.reltuples, 0)::bigint, coalesce(a.rows, -1), coalesce(a.sha256, ''), coalesce(a.location, '')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid LEFT JOIN audit_archives a ON a.partition = c.relname
		WHERE i.inhparent = 'public.audit_log'::regclass ORDER BY c.relname`)
	if err != nil {
		return fmt.Errorf("retention plan: %w", err)
	}
	defer rows.Close()
	fmt.Fprintf(out, "the audit log is kept %s (audit_retention.keep); a month may be dropped once it ended that long ago\n", keep)
	fmt.Fprintf(out, "%-18s %12s  %-10s  %s\n", "month", "rows (est.)", "may drop", "archive")
	for rows.Next() {
		var name, sha, where string
		var est, archived int64
		if err := rows.Scan(&name, &est, &archived, &sha, &where); err != nil {
			return fmt.Errorf("retention plan: %w", err)
		}
		start, err := time.Parse("audit_log_2006_01", name)
		if err != nil {
			continue
		}
		may := "no"
		if ends := start.AddDate(0, 1, 0); !ends.After(dropBefore) {
			may = "yes"
		}
		archive := "none"
		if archived >= 0 {
			archive = fmt.Sprintf("%d rows in %s, SHA-256 %s", archived, where, sha[:min(12, len(sha))]+"…")
		}
		fmt.Fprintf(out, "%-18s %12d  %-10s  %s\n", name, est, may, archive)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("retention plan: %w", err)
	}
	return nil
}

// archivesFlag is explain's --archive: the folder of dropped months' archives.
func archivesFlag(fs *flag.FlagSet) *string {
	return fs.String("archive", "", "the folder of the archives of months dropped from the log (starter retention): a call not in the log is read from them")
}
