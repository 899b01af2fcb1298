// starter's commands for audit and insights: the action register, one call's or one resource's day's story, the evals export.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/register"
)

// registerCmd prints the action register, generated from the policy table,
// the tool registry and the guard-proof list.
func registerCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	format := fs.String("format", "markdown", "markdown or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := register.Default(cfg.Policy)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	switch *format {
	case "markdown":
		return register.Markdown(out, r)
	case "json":
		return printJSON(out, r)
	}
	return fmt.Errorf("register: --format %q: want markdown or json", *format)
}

// auditor opens the audit log as the auditor's login, which may read it and
// nothing else.
func auditor(ctx context.Context, cfg config.Config) (insights.Reader, func(), error) {
	pool, err := cfg.OpenPool(ctx, "auditor")
	if err != nil {
		return insights.Reader{}, nil, fmt.Errorf("the auditor's database login (AUDITOR_DATABASE_URL, default DATABASE_URL as toolgate_auditor): %w", err)
	}
	return insights.Reader{Pool: pool, Policy: cfg.Policy}, pool.Close, nil
}

// explainCmd prints one call's story, or every call that ran upstream for
// a store on a day with a verdict on what they mean.
func explainCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	id := fs.String("workflow-id", "", "the call, toolcall-<conversationId>-<toolCallId>")
	store := fs.Int64("store", 0, "with --day: every call that ran upstream for this store (the demo pack's; --resource store=N)")
	resource := fs.String("resource", "", "with --day: every call that ran upstream for this resource, kind=id")
	day := fs.String("day", "", "with --store or --resource: the day, YYYY-MM-DD (UTC)")
	tool := fs.String("tool", "", "with --store or --resource: only this tool")
	format := fs.String("format", "text", "text or json")
	archives := archivesFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("explain: --format %q: want text or json", *format)
	}
	var res policy.ResourceRef
	if *store != 0 {
		res = policy.ResourceRef{Kind: "store", ID: strconv.FormatInt(*store, 10)}
	}
	if *resource != "" {
		kind, rid, ok := strings.Cut(*resource, "=")
		if !ok || *store != 0 {
			return fmt.Errorf("explain: --resource %q: want kind=id, e.g. portal=PRT-40122, and no --store beside it", *resource)
		}
		res = policy.ResourceRef{Kind: kind, ID: rid}
	}
	if (*id == "") == (res.Kind == "") {
		return errors.New("explain: give --workflow-id ID, or --store N --day YYYY-MM-DD [--tool NAME]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, done, err := auditor(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	r.Archives = *archives
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ids := []string{*id}
	var verdict string
	if res.Kind != "" {
		d, err := time.Parse(time.DateOnly, *day)
		if err != nil {
			return fmt.Errorf("explain: --day %q: want YYYY-MM-DD", *day)
		}
		if *tool != "" {
			if _, ok := cfg.Policy.Spec(*tool); !ok {
				return fmt.Errorf("explain: --tool %q is not a tool; use one of %s", *tool, strings.Join(cfg.Policy.Names(), ", "))
			}
		}
		if ids, err = r.Executed(ctx, res, d, *tool); err != nil {
			return err
		}
		verdict = insights.Verdict(ids, *tool, res, d)
	}
	var stories []insights.Story
	for _, id := range ids {
		s, err := r.Explain(ctx, c, id)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		stories = append(stories, s)
	}
	if *format == "json" {
		if *store != 0 {
			return printJSON(out, map[string]any{"verdict": verdict, "calls": stories})
		}
		return printJSON(out, stories[0])
	}
	if verdict != "" {
		fmt.Fprintf(out, "%s\n", verdict)
	}
	for _, s := range stories {
		if verdict != "" {
			fmt.Fprintln(out)
		}
		if err := s.Text(out); err != nil {
			return err
		}
	}
	return nil
}

// exportEvalsCmd writes the evals export: one JSON line per model-facing
// decision since a date, a time or a duration ago.
func exportEvalsCmd(cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("export-evals", flag.ContinueOnError)
	since := fs.String("since", "", "YYYY-MM-DD, an RFC 3339 time, or a duration ago such as 24h")
	format := fs.String("format", "jsonl", "jsonl (one toolgate.evals/v1 object per line; docs/evals.schema.json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *format != "jsonl" {
		return fmt.Errorf("export-evals: --format %q: only jsonl", *format)
	}
	from, err := parseSince(*since, time.Now())
	if err != nil {
		return fmt.Errorf("export-evals: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, done, err := auditor(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	n, err := r.ExportEvals(ctx, from, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "export-evals: %d decisions since %s\n", n, from.UTC().Format(time.RFC3339))
	return nil
}

// parseSince reads --since: a date, an RFC 3339 time, or a duration ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, errors.New("--since is required: a date (2026-12-01), an RFC 3339 time, or a duration ago (24h)")
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a date (2026-12-01), an RFC 3339 time, or a positive duration ago (24h)", v)
}
