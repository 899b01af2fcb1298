package insights_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/synth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
)

// TestCountedDaysChartTheLog: the page drawn from the days the worker has
// counted (audit_daily) is the page drawn from the log itself, for a whole
// period, a period starting mid-day, and each filter; a filter by user
// reads the log alone.
func TestCountedDaysChartTheLog(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	shape := synth.Retail
	shape.CallsPerDay = 2_000
	now := time.Now().UTC()
	if _, err := shape.LoadCalls(ctx, testenv.OwnerPool(t, url), now.Add(-time.Hour), 0, 24_000); err != nil {
		t.Fatal(err)
	}
	r := insights.Reader{Pool: testenv.ServicePool(t, url, "auditor"), Policy: testenv.Policy}
	to := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	filters := map[string]insights.Filter{
		"thirty days":          {From: to.Add(-30 * 24 * time.Hour), To: to},
		"from mid-day":         {From: to.Add(-5*24*time.Hour - 3*time.Hour), To: to},
		"a week ago":           {From: to.Add(-9 * 24 * time.Hour), To: to.Add(-2 * 24 * time.Hour)},
		"an area":              {From: to.Add(-30 * 24 * time.Hour), To: to, Scope: area},
		"a store":              {From: to.Add(-30 * 24 * time.Hour), To: to, Resource: policy.ResourceRef{Kind: "store", ID: shape.HotStore}},
		"a tool":               {From: to.Add(-30 * 24 * time.Hour), To: to, Tool: "get_stock"},
		"a user, from the log": {From: to.Add(-30 * 24 * time.Hour), To: to, User: "user-7"},
	}
	before := map[string]insights.Page{}
	for name, f := range filters {
		p, err := r.Page(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c := p.Chart("decisions"); c == nil || c.Empty || strings.Contains(c.SQL, "audit_daily") {
			t.Fatalf("%s, nothing counted yet: the decisions chart is empty or reads counts", name)
		}
		before[name] = p
	}
	var days int
	if err := testenv.AppPool(t, url).QueryRow(ctx, `SELECT audit_log_count_days()`).Scan(&days); err != nil || days < 10 {
		t.Fatalf("the worker counted %d days (%v); the history has 12", days, err)
	}
	for name, f := range filters {
		p, err := r.Page(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		counts := strings.Contains(p.Chart("decisions").SQL, "audit_daily")
		if counts == (f.User != "") {
			t.Errorf("%s: the decisions chart reads the day counts: %v\n%s", name, counts, p.Chart("decisions").SQL)
		}
		b := before[name]
		for _, c := range b.Charts {
			if got := p.Chart(c.ID); got == nil || got.SVG != c.SVG {
				t.Errorf("%s: the %s chart differs once the days are counted", name, c.ID)
			}
		}
		if !slices.EqualFunc(p.Approvers, b.Approvers, func(x, y insights.Approver) bool { return x.UserID == y.UserID && x.Decisions == y.Decisions }) ||
			!slices.Equal(p.Slowest, b.Slowest) {
			t.Errorf("%s: the approvers or the slowest calls differ", name)
		}
	}
}
