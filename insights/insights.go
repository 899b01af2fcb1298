// Package insights reads the audit log for the people who answer for
// toolgate: the insights page's charts (decisions, refusals, approvers and
// their rubber-stamp signals, expiries, limits, upstream failures and
// latency), one call's whole story (starter explain), and the evals export
// (starter export-evals). It reads through the auditor's login, which may
// SELECT audit_log and nothing else (migration 019), so nothing here can
// write.
package insights

import (
	"context"
	"fmt"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/policy"
)

// Rubber-stamp thresholds: an approver is flagged when at least half of
// their decisions (and at least MinFastDecisions) took under FastDecision,
// when they approve at least HighApproveRate of ManyCards or more, or when
// they approve a card whose dry run someone else's edit changed within
// FastDecision of the change.
const (
	FastDecision     = 5 * time.Second
	MinFastDecisions = 2
	HighApproveRate  = 0.95
	ManyCards        = 10
)

// DefaultPeriod is how far back the page looks when no period is given.
const DefaultPeriod = 30 * 24 * time.Hour

// Filter narrows every query: a period, and optionally a resource, a tool
// and a user (the requester or the approver). Scope, when not nil, is the
// resources the reader may see (rows without a resource are shown too).
type Filter struct {
	From, To time.Time
	Resource policy.ResourceRef
	Tool     string
	User     string
	Scope    policy.Resources
}

// ParseFilter reads a filter from a query string (from, to as
// YYYY-MM-DD, inclusive; a resource as its kind's name, e.g. portal=PRT-1;
// tool; user). Its error says what to fix.
func (r Reader) ParseFilter(q url.Values, now time.Time, scope policy.Resources) (Filter, error) {
	f := Filter{To: now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour), Scope: scope}
	f.From = f.To.Add(-DefaultPeriod)
	if v := strings.TrimSpace(q.Get("from")); v != "" {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return f, fmt.Errorf("from: %q is not a date; use YYYY-MM-DD, e.g. %s", clip(v), now.UTC().Format(time.DateOnly))
		}
		f.From = d
	}
	if v := strings.TrimSpace(q.Get("to")); v != "" {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return f, fmt.Errorf("to: %q is not a date; use YYYY-MM-DD, e.g. %s", clip(v), now.UTC().Format(time.DateOnly))
		}
		f.To = d.Add(24 * time.Hour)
	}
	if !f.From.Before(f.To) {
		return f, fmt.Errorf("the period is empty: from (%s) must not be after to", f.From.Format(time.DateOnly))
	}
	for _, k := range r.Policy.ResourceKinds() {
		if v := strings.TrimSpace(q.Get(k.Name)); v != "" {
			if err := r.Policy.CheckResource(k.Name, v); err != nil {
				return f, fmt.Errorf("%s: %w", k.Name, err)
			}
			f.Resource = policy.ResourceRef{Kind: k.Name, ID: v}
		}
	}
	if v := strings.TrimSpace(q.Get("tool")); v != "" {
		if _, ok := r.Policy.Spec(v); !ok {
			return f, fmt.Errorf("tool: %q is not a tool; use one of %s", clip(v), strings.Join(r.Policy.Names(), ", "))
		}
		f.Tool = v
	}
	if v := strings.TrimSpace(q.Get("user")); v != "" {
		if !policy.ValidID(v) {
			return f, fmt.Errorf("user: %q is not a user ID (1 to %d letters, digits or . _ @ -)", clip(v), policy.MaxIDLength)
		}
		f.User = v
	}
	return f, nil
}

// Query is the filter as a query string, for links that keep it.
func (f Filter) Query() string {
	q := url.Values{"from": {f.From.Format(time.DateOnly)}, "to": {f.To.Add(-24 * time.Hour).Format(time.DateOnly)}}
	if f.Resource.Kind != "" {
		q.Set(f.Resource.Kind, f.Resource.ID)
	}
	if f.Tool != "" {
		q.Set("tool", f.Tool)
	}
	if f.User != "" {
		q.Set("user", f.User)
	}
	return q.Encode()
}

// where is the filter as SQL on the audit_log alias a, its values
// appended to args.
func (f Filter) where(args *[]any) string {
	add := func(v any) string {
		*args = append(*args, v)
		return fmt.Sprintf("$%d", len(*args))
	}
	return strings.Join(append([]string{"a.at >= " + add(f.From), "a.at < " + add(f.To)}, f.rowConds(args, true)...), " AND ")
}

// rowConds are the filter's conditions on a row other than its time, on
// alias a; withUser leaves out the user's, which a day's counts cannot
// answer.
func (f Filter) rowConds(args *[]any, withUser bool) []string {
	add := func(v any) string {
		*args = append(*args, v)
		return fmt.Sprintf("$%d", len(*args))
	}
	var conds []string
	if f.Scope != nil {
		conds = append(conds, "(a.resource_kind IS NULL OR a.resource_kind || '/' || a.resource_id = ANY("+add(f.Scope.Labels())+"))")
	}
	if f.Resource.Kind != "" {
		conds = append(conds, "a.resource_kind = "+add(f.Resource.Kind)+" AND a.resource_id = "+add(f.Resource.ID))
	}
	if f.Tool != "" {
		conds = append(conds, "a.tool = "+add(f.Tool))
	}
	if f.User != "" && withUser {
		p := add(f.User)
		conds = append(conds, "(a.user_id = "+p+" OR a.approver_id = "+p+")")
	}
	return conds
}

// counted is the period as rows of (day, tool, resource_kind, resource_id,
// event, reason, n) under alias a: the run of whole days of the period
// already counted (audit_daily, filled by the worker once a day has
// closed) and the rest from the log itself, a row at a time. So a chart of
// thirty days reads thirty days' counts and today's rows, whatever the log
// holds. A filter by user reads the log alone: a day's counts are not by
// person.
func (r Reader) counted(ctx context.Context, f Filter, args *[]any) (string, error) {
	add := func(v any) string {
		*args = append(*args, v)
		return fmt.Sprintf("$%d", len(*args))
	}
	day := 24 * time.Hour
	first, end := f.From.UTC().Truncate(day), f.To.UTC().Truncate(day)
	if first.Before(f.From) {
		first = first.Add(day)
	}
	var lo, hi time.Time
	if f.User == "" && first.Before(end) {
		var err error
		if lo, hi, err = r.countedDays(ctx, first, end); err != nil {
			return "", err
		}
	}
	logRows := fmt.Sprintf(`SELECT (l.at AT TIME ZONE 'UTC')::date AS day, l.tool, l.resource_kind, l.resource_id, l.event, l.reason, 1::bigint AS n
  FROM audit_log l WHERE l.at >= %s AND l.at < %s`, add(f.From), add(f.To))
	if lo.Before(hi) {
		logRows += fmt.Sprintf(" AND (l.at < %s OR l.at >= %s)", add(lo), add(hi))
	}
	if f.User != "" {
		p := add(f.User)
		logRows += " AND (l.user_id = " + p + " OR l.approver_id = " + p + ")"
	}
	if !lo.Before(hi) {
		return "(" + logRows + ") a", nil
	}
	return fmt.Sprintf(`(SELECT d.day, d.tool, d.resource_kind, d.resource_id, d.event, d.reason, d.n FROM audit_daily d WHERE d.day >= %s AND d.day < %s
  UNION ALL
  %s) a`, add(lo), add(hi), logRows), nil
}

// countedDays is the first run of counted days in [first, end), as
// [lo, hi); lo equals hi when none is counted.
func (r Reader) countedDays(ctx context.Context, first, end time.Time) (lo, hi time.Time, err error) {
	var l, h *time.Time
	err = r.Pool.QueryRow(ctx, `WITH c AS (SELECT day FROM audit_days WHERE day >= $1::date AND day < $2::date), s AS (SELECT min(day) AS lo FROM c)
		SELECT s.lo::timestamp AT TIME ZONE 'UTC',
		       (SELECT coalesce(min(g.day::date), $2::date) FROM generate_series(s.lo, $2::date - 1, interval '1 day') g(day)
		        WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.day = g.day::date))::timestamp AT TIME ZONE 'UTC'
		FROM s`, first, end).Scan(&l, &h)
	if err != nil {
		return first, first, fmt.Errorf("insights: the counted days: %w", err)
	}
	if l == nil || h == nil {
		return first, first, nil
	}
	return l.UTC(), h.UTC(), nil
}

// Reader reads the audit log through the auditor's login.
type Reader struct {
	Pool *pgxpool.Pool
	// Policy is the packs the deployment gates: the tools a filter may name.
	Policy *policy.Policy
	// Archives, when set, is the folder of the archives of months dropped
	// from the log (WriteArchive): a call not in the log is read from them.
	Archives string
}

// Chart is one figure: its title, what it shows, the SVG, and the query
// behind it with its values.
type Chart struct {
	ID, Title, About string
	SVG              template.HTML
	SQL              string
	Args             []string
	Empty            bool
}

// Approver is one approver's decisions and their rubber-stamp signals.
type Approver struct {
	UserID    string
	Decisions int
	Approved  int
	Rejected  int
	// Seconds are the times from the card (version) going up to each decision.
	Seconds []float64
	// Fast counts decisions under FastDecision; ChangedFast counts
	// approvals of a card an edit re-priced, within FastDecision of the edit.
	Fast, ChangedFast int
	Signals           []string
}

// Flagged says whether any rubber-stamp signal fired.
func (a Approver) Flagged() bool { return len(a.Signals) > 0 }

// ApproveRate is the share of decisions that approved.
func (a Approver) ApproveRate() float64 {
	if a.Decisions == 0 {
		return 0
	}
	return float64(a.Approved) / float64(a.Decisions)
}

// Median and P90 of the time to decision.
func (a Approver) Median() time.Duration { return quantile(a.Seconds, 0.5) }

// P90 is the 90th percentile of the time to decision.
func (a Approver) P90() time.Duration { return quantile(a.Seconds, 0.9) }

func quantile(s []float64, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(q*float64(len(c)-1) + 0.5)
	return time.Duration(c[i] * float64(time.Second)).Round(time.Millisecond)
}

// SlowCall is one upstream call and how long it took, start to outcome.
type SlowCall struct {
	WorkflowID, Tool, Outcome string
	Seconds                   float64
}

// Page is everything the insights page shows.
type Page struct {
	Filter    Filter
	Charts    []Chart
	Approvers []Approver
	Slowest   []SlowCall
	SlowSQL   string
}

// Chart returns the page's chart with the ID, or nil.
func (p Page) Chart(id string) *Chart {
	for i := range p.Charts {
		if p.Charts[i].ID == id {
			return &p.Charts[i]
		}
	}
	return nil
}

// canonicalReason is a row's reason as the closed set says it now: a
// refusal recorded store_scope (policy.CodeStoreScope) groups with
// resource_scope.
const canonicalReason = `CASE a.reason WHEN '` + string(policy.CodeStoreScope) + `' THEN '` + string(policy.CodeResourceScope) + `' ELSE a.reason END`

// outcomes are the decision events a day's bar counts, in order.
var outcomes = []string{"allowed", "needs_approval", "denied", "approved", "rejected", "expired", "executed", "failed"}

// Page reads everything the page shows for f.
func (r Reader) Page(ctx context.Context, f Filter) (Page, error) {
	p := Page{Filter: f}
	type job struct {
		id, title, about, sql string
		legend                []string
		build                 func(rows pgx.Rows) ([]Bar, error)
	}
	jobs := []job{
		{"decisions", "Decisions per day, by outcome", "Every decision event of the period, a bar a day.",
			`SELECT to_char(a.day, 'YYYY-MM-DD') AS day, a.event, sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = ANY('{` + strings.Join(outcomes, ",") + `}')
GROUP BY 1, 2 ORDER BY 1, 2`, outcomes, stacked(outcomes)},
		{"refusals", "Refusals by code and tool", "Where the model misunderstands its tools: each denied call, by the code it got.",
			`SELECT ` + canonicalReason + ` || ' · ' || a.tool, 'denied', sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = 'denied'
GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 20`, []string{"denied"}, stacked([]string{"denied"})},
		{"expiries", "Expiries", "Cards nobody decided in time, by day and tool.",
			`SELECT to_char(a.day, 'YYYY-MM-DD') || ' · ' || a.tool, 'expired', sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = 'expired'
GROUP BY 1 ORDER BY 1`, []string{"expired"}, stacked([]string{"expired"})},
		{"limits", "Limits hit", "Calls refused by a rate, spend or hard limit, by tool and resource.",
			`SELECT a.tool || ' · ' || coalesce(a.resource_kind || ' ' || a.resource_id, '?'), a.reason, sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = 'denied' AND a.reason IN ('rate_limit', 'over_limit')
GROUP BY 1, 2 ORDER BY 1, 2`, []string{"rate_limit", "over_limit"}, stacked([]string{"rate_limit", "over_limit"})},
		{"changed", "MCP tools whose definition changed", "Calls refused unsent because a team's MCP server now defines the tool otherwise than an operator accepted it: read the new definition, then accept it (starter accept-mcp --write) or leave the tool out.",
			`SELECT a.tool, 'definition_changed', sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = 'failed' AND a.reason = 'definition_changed'
GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 20`, []string{"definition_changed"}, stacked([]string{"definition_changed"})},
		{"failures", "Most-failed upstream calls", "Calls that reached the upstream and failed, by tool and code.",
			`SELECT a.tool, a.reason, sum(a.n)::bigint
FROM {counted}
WHERE {filter} AND a.event = 'failed'
GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 20`, []string{"timeout", "upstream_unavailable", "upstream_error", "credential_unavailable", "step_up_required"},
			stacked([]string{"timeout", "upstream_unavailable", "upstream_error", "credential_unavailable", "step_up_required"})},
	}
	for _, j := range jobs {
		var args []any
		from, err := r.counted(ctx, f, &args)
		if err != nil {
			return p, err
		}
		filter := strings.Join(append([]string{"true"}, f.rowConds(&args, false)...), " AND ")
		sql := strings.NewReplacer("{counted}", from, "{filter}", filter).Replace(j.sql)
		rows, err := r.Pool.Query(ctx, sql, args...)
		if err != nil {
			return p, fmt.Errorf("insights %s: %w", j.id, err)
		}
		bars, err := j.build(rows)
		if err != nil {
			return p, fmt.Errorf("insights %s: %w", j.id, err)
		}
		p.Charts = append(p.Charts, Chart{ID: j.id, Title: j.title, About: j.about, SVG: HBars(j.title, bars, j.legend, ""),
			SQL: sql, Args: showArgs(args), Empty: len(bars) == 0})
	}
	approvers, chart, err := r.approvers(ctx, f)
	if err != nil {
		return p, err
	}
	p.Approvers = approvers
	p.Charts = slices.Insert(p.Charts, 2, chart)
	if p.Slowest, p.SlowSQL, err = r.slowest(ctx, f); err != nil {
		return p, err
	}
	return p, nil
}

// stacked reads rows of (label, series, count) into bars, in row order.
func stacked(series []string) func(pgx.Rows) ([]Bar, error) {
	return func(rows pgx.Rows) ([]Bar, error) {
		defer rows.Close()
		var bars []Bar
		for rows.Next() {
			var label, s string
			var n int64
			if err := rows.Scan(&label, &s, &n); err != nil {
				return nil, err
			}
			if len(bars) == 0 || bars[len(bars)-1].Label != label {
				bars = append(bars, Bar{Label: label, Values: make([]float64, len(series))})
			}
			if i := slices.Index(series, s); i >= 0 {
				bars[len(bars)-1].Values[i] += float64(n)
			}
		}
		return bars, rows.Err()
	}
}

// decisionsSQL finds each verified decision with how long after its card
// version went up it came (seconds, written with the row), and whether
// that version was someone else's edit (its dry run changed under the
// approver).
const decisionsSQL = `SELECT a.approver_id, a.event, coalesce(a.seconds, 0),
       a.version_by IS NOT NULL AND a.version_by IS DISTINCT FROM a.approver_id
FROM audit_log a
WHERE {filter} AND a.event IN ('approved', 'rejected', 'approval_counted') AND a.approver_id IS NOT NULL AND a.seconds IS NOT NULL`

// buckets of the time-to-decision distribution.
var buckets = []struct {
	name string
	upTo float64
}{{"under 5 s", 5}, {"5–30 s", 30}, {"30 s–2 min", 120}, {"2–10 min", 600}, {"10 min or more", 0}}

func (r Reader) approvers(ctx context.Context, f Filter) ([]Approver, Chart, error) {
	var args []any
	sql := strings.Replace(decisionsSQL, "{filter}", f.where(&args), 1)
	rows, err := r.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, Chart{}, fmt.Errorf("insights approvers: %w", err)
	}
	defer rows.Close()
	// Grouped here, not sorted by the database: a month's decisions are read
	// from their index alone (audit_log_decisions), in any order.
	byID := map[string]*Approver{}
	for rows.Next() {
		var who, event string
		var sec float64
		var changed bool
		if err := rows.Scan(&who, &event, &sec, &changed); err != nil {
			return nil, Chart{}, fmt.Errorf("insights approvers: %w", err)
		}
		a := byID[who]
		if a == nil {
			a = &Approver{UserID: who}
			byID[who] = a
		}
		a.Decisions++
		a.Seconds = append(a.Seconds, sec)
		fast := sec < FastDecision.Seconds()
		if fast {
			a.Fast++
		}
		if event == "rejected" {
			a.Rejected++
		} else {
			a.Approved++
			if changed && fast {
				a.ChangedFast++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, Chart{}, fmt.Errorf("insights approvers: %w", err)
	}
	out := make([]Approver, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, *byID[id])
	}
	var legend []string
	for _, b := range buckets {
		legend = append(legend, b.name)
	}
	var bars []Bar
	for i := range out {
		a := &out[i]
		if a.Fast >= MinFastDecisions && 2*a.Fast >= a.Decisions {
			a.Signals = append(a.Signals, fmt.Sprintf("%d of %d decisions in under %s", a.Fast, a.Decisions, FastDecision))
		}
		if a.Decisions >= ManyCards && a.ApproveRate() >= HighApproveRate {
			a.Signals = append(a.Signals, fmt.Sprintf("approves %.0f%% of %d cards", 100*a.ApproveRate(), a.Decisions))
		}
		if a.ChangedFast > 0 {
			a.Signals = append(a.Signals, fmt.Sprintf("approved %d card(s) within %s of an edit changing its dry run", a.ChangedFast, FastDecision))
		}
		b := Bar{Label: a.UserID, Values: make([]float64, len(buckets)), Flag: a.Flagged()}
		for _, s := range a.Seconds {
			b.Values[bucketOf(s)]++
		}
		bars = append(bars, b)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Flagged() && !out[j].Flagged() })
	return out, Chart{ID: "approvers", Title: "Time to decision, by approver",
		About: "From the card (or its latest version) going up to each approver's decision. ⚑ marks a rubber-stamp signal: see the table below.",
		SVG:   HBars("Time to decision, by approver", bars, legend, ""), SQL: sql, Args: showArgs(args), Empty: len(bars) == 0}, nil
}

func bucketOf(sec float64) int {
	for i, b := range buckets {
		if b.upTo == 0 || sec < b.upTo {
			return i
		}
	}
	return len(buckets) - 1
}

// slowSQL finds the period's slowest upstream outcomes by their seconds
// (from the admission of an allowed call, or the approval of a card,
// written with the row), from their index alone (audit_log_outcomes), and
// then reads those ten rows. Reads that succeed write no outcome row (their
// history has it), so they are not here.
const slowSQL = `WITH slowest AS (SELECT a.at, a.id, a.seconds FROM audit_log a
  WHERE {filter} AND a.event IN ('executed', 'failed') AND a.seconds IS NOT NULL ORDER BY a.seconds DESC, a.id LIMIT 10)
SELECT a.workflow_id, a.tool, a.event, s.seconds
FROM slowest s JOIN audit_log a ON a.at = s.at AND a.id = s.id AND a.event IN ('executed', 'failed')
ORDER BY s.seconds DESC, s.id`

func (r Reader) slowest(ctx context.Context, f Filter) ([]SlowCall, string, error) {
	var args []any
	sql := strings.Replace(slowSQL, "{filter}", f.where(&args), 1)
	rows, err := r.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, sql, fmt.Errorf("insights slowest: %w", err)
	}
	calls, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SlowCall, error) {
		var c SlowCall
		return c, row.Scan(&c.WorkflowID, &c.Tool, &c.Outcome, &c.Seconds)
	})
	if err != nil {
		return nil, sql, fmt.Errorf("insights slowest: %w", err)
	}
	return calls, sql, nil
}

func showArgs(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		v := fmt.Sprint(a)
		if t, ok := a.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339)
		}
		out[i] = fmt.Sprintf("$%d = %s", i+1, v)
	}
	return out
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
