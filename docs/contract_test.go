package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// contract is docs/contract.md, and the text of its section headed title
// (up to the next heading of the same or a higher level).
func section(t *testing.T, title string) string {
	t.Helper()
	raw, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n"+title+"\n")
	if i < 0 {
		t.Fatalf("docs/contract.md has no section %q", title)
	}
	level := title[:strings.IndexByte(title, ' ')+1]
	rest := s[i+len(title)+2:]
	for _, h := range []string{"\n# ", "\n## ", "\n### "} {
		if len(h)-1 > len(level) {
			continue
		}
		if j := strings.Index(rest, h); j >= 0 {
			rest = rest[:j]
		}
	}
	return rest
}

// backticked are the `names` of a text, in order.
var backticked = regexp.MustCompile("`([^`]+)`")

// TestTheContractListsTheCodes: the closed set of codes, as the contract
// lists it, is policy.Codes, in the same order, and every code its table
// describes is one of them.
func TestTheContractListsTheCodes(t *testing.T) {
	text := section(t, "### The closed set of codes")
	list, table, _ := strings.Cut(text, "The model-facing message")
	var listed []string
	for _, m := range backticked.FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	var codes []string
	for _, c := range policy.Codes {
		codes = append(codes, string(c))
	}
	if !slices.Equal(listed, codes) {
		t.Errorf("the contract lists the codes\n%v\nthe code has\n%v", listed, codes)
	}
	for _, row := range strings.Split(table, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_]+)` \\|").FindStringSubmatch(row); m != nil && !slices.Contains(codes, m[1]) {
			t.Errorf("the contract's table describes %q, which is no code", m[1])
		}
	}
}

// TestTheContractListsMangrovesTools: the tools table names exactly the
// Mangrove pack's tools, each with its tier.
func TestTheContractListsMangrovesTools(t *testing.T) {
	rows := map[string]string{}
	for _, row := range strings.Split(section(t, "## Tools (the Mangrove pack)"), "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_]+)` \\| ([a-z_]+),").FindStringSubmatch(row); m != nil {
			rows[m[1]] = m[2]
		}
	}
	d := mangrove.Policy()
	for _, s := range d.Tools {
		if tier, ok := rows[s.Name]; !ok {
			t.Errorf("the contract's tools table lacks %s", s.Name)
		} else if tier != string(s.Tier) {
			t.Errorf("the contract says %s is %s; its spec says %s", s.Name, tier, s.Tier)
		}
		delete(rows, s.Name)
	}
	for name := range rows {
		t.Errorf("the contract's tools table names %s, which Mangrove has not", name)
	}
}

// TestTheConfigurationPageNamesEverySetting: the configuration page's
// table has a row for every environment variable a process reads
// (config.Vars; a row may name several, and X_* names every X_ one), and
// no row for one that nothing here reads (no code, script or Makefile).
func TestTheConfigurationPageNamesEverySetting(t *testing.T) {
	raw, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, row := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(row, "| `") {
			continue
		}
		first := strings.SplitN(row, "|", 3)[1]
		for _, m := range backticked.FindAllStringSubmatch(first, -1) {
			if regexp.MustCompile(`^[A-Z][A-Z0-9_]*\*?$`).MatchString(m[1]) {
				rows = append(rows, m[1])
			}
		}
	}
	named := func(v string) bool {
		return slices.ContainsFunc(rows, func(r string) bool {
			return r == v || strings.HasSuffix(r, "*") && strings.HasPrefix(v, strings.TrimSuffix(r, "*"))
		})
	}
	for _, v := range config.Vars {
		if !named(v) {
			t.Errorf("docs/configuration.md has no row for %s, which a process reads", v)
		}
	}
	files, err := exec.Command("git", "-C", "..", "ls-files", "*.go", "*.sh", "Makefile", "*.py", "*.yml").Output()
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, f := range strings.Fields(string(files)) {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	for _, v := range rows {
		if !strings.Contains(code.String(), strings.TrimSuffix(v, "*")) {
			t.Errorf("docs/configuration.md has a row for %s, which nothing here reads", v)
		}
	}
}

// TestTheContractNamesTheWireNames: the task queue, workflow type,
// messages, statuses, search attributes, metrics, audit events and MCP
// names are the code's.
func TestTheContractNamesTheWireNames(t *testing.T) {
	raw, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{workflows.TaskQueue, workflows.WorkflowType, workflows.StatusQuery, workflows.ApprovalSignal, workflows.FirstOutcomeUpdate,
		workflows.CredentialSignal, mcpgate.Path, mcpgate.IdempotencyKeyMeta, mcpgate.ConversationMeta, mcpgate.StatusTool, mcpgate.WithdrawTool, mcpgate.BackChannelLogoutPath}
	for _, s := range []workflows.CallStatus{workflows.StatusDeciding, workflows.StatusPendingApproval, workflows.StatusAwaitingSignIn, workflows.StatusExecuting,
		workflows.StatusExecuted, workflows.StatusDenied, workflows.StatusRejected, workflows.StatusExpired, workflows.StatusFailed} {
		names = append(names, string(s))
	}
	for _, sa := range workflows.SearchAttributes() {
		names = append(names, sa.Name)
	}
	names = append(names, workflows.MetricDecisions, workflows.MetricApprovals, workflows.MetricTimeToDecision,
		activities.MetricAdmissionLockWait, activities.MetricAdmissionCount)
	for _, e := range []activities.Event{activities.EventAllowed, activities.EventNeedsApproval, activities.EventDenied, activities.EventApprovalRefused,
		activities.EventApproved, activities.EventRejected, activities.EventExpired, activities.EventExecuted, activities.EventFailed, activities.EventEscalated,
		activities.EventApprovalCounted, activities.EventEdited, activities.EventAwaitingSignIn, activities.EventReleased, activities.EventPartitionDropped} {
		names = append(names, string(e))
	}
	for _, n := range names {
		if !regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(n) + `([^A-Za-z0-9_]|$)`).Match(raw) {
			t.Errorf("docs/contract.md never names %q", n)
		}
	}
}
