package insights_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/policy"
)

// TestChartsEscapeWhatTheModelWrote: a tool name is whatever the model
// sent (an unknown tool is audited as named), so a label made to break out
// of the SVG is drawn as text.
func TestChartsEscapeWhatTheModelWrote(t *testing.T) {
	svg := string(insights.HBars(`t"><script>`, []insights.Bar{{Label: `</text><script>x</script>`, Values: []float64{2}}}, []string{`<b>denied`}, ""))
	if strings.Contains(svg, "<script>") || strings.Contains(svg, "<b>") || !strings.Contains(svg, "&lt;script&gt;") {
		t.Fatalf("unescaped:\n%s", svg)
	}
}

// TestFiltersSayWhatToFix: each bad filter names its field and the fix;
// a good one round-trips through its query string.
func TestFiltersSayWhatToFix(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	for q, want := range map[string]string{
		"from=Friday":                   "from: \"Friday\" is not a date; use YYYY-MM-DD",
		"to=4/12/2026":                  "to: \"4/12/2026\" is not a date",
		"from=2026-12-05&to=2026-12-01": "the period is empty",
		"store=0":                       "store: \"0\" is not a store number",
		"tool=constructor":              "tool: \"constructor\" is not a tool; use one of search_procedures",
		"user=a%20b":                    "user: \"a b\" is not a user ID",
	} {
		v, _ := url.ParseQuery(q)
		if _, err := (insights.Reader{Policy: testenv.Policy}).ParseFilter(v, now, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", q, err, want)
		}
	}
	v, _ := url.ParseQuery("from=2026-12-01&to=2026-12-04&store=112&tool=get_stock&user=ama")
	f, err := (insights.Reader{Policy: testenv.Policy}).ParseFilter(v, now, policy.Resources{"store": {"112"}})
	if err != nil || f.From != time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) || f.To != time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC) || f.Query() != v.Encode() {
		t.Fatalf("%+v %v (query %s)", f, err, f.Query())
	}
	f, _ = (insights.Reader{Policy: testenv.Policy}).ParseFilter(url.Values{}, now, nil)
	if f.To.Sub(f.From) != insights.DefaultPeriod || !f.To.After(now) {
		t.Fatalf("the default period: %v to %v", f.From, f.To)
	}
}
