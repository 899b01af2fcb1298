package policy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"
)

// validArgs builds the smallest valid args for a tool from its own field
// rules, so a new tool needs no test edits.
func validArgs(t *testing.T, spec policy.ToolSpec) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, f := range toolargs.Fields(spec.Args) {
		if !strings.Contains(f.Validate, "required") {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int64, reflect.Int:
			out[f.Name] = 40211
			if _, after, ok := strings.Cut(f.Validate, "max="); ok && len(strings.Split(after, ",")[0]) <= 5 {
				out[f.Name] = 1 // a small bounded number such as a quantity
			}
		case reflect.String:
			switch {
			case strings.Contains(f.Validate, "grnid"):
				out[f.Name] = "GRN-88213"
			case strings.Contains(f.Validate, "oneof="):
				out[f.Name] = strings.Fields(strings.SplitN(strings.SplitN(f.Validate, "oneof=", 2)[1], ",", 2)[0])[0]
			default:
				out[f.Name] = "check the cooler"
			}
		default:
			t.Fatalf("validArgs: teach me %s", f.Type)
		}
	}
	return out
}

func storeScoped(spec policy.ToolSpec) bool { return spec.Resource.Kind != "" }

// reachable returns a copy of the row that every step can be reached
// through: listed roles, a non-deny decision, a hard limit and one limit of
// each scope. Rows already limited keep their own numbers.
func reachable(row policy.Row) policy.Row {
	r := row
	r.Roles = []policy.Role{mangrove.RoleStoreManager, mangrove.RoleAreaManager}
	if r.Decision == policy.DecisionDeny {
		r.Decision = policy.DecisionApprove
	}
	if r.HardLimitCents == 0 {
		r.HardLimitCents = 1000
	}
	if len(r.Limits) == 0 {
		r.Limits = []policy.Limit{{Scope: policy.PerResource, Window: policy.Day, MaxCalls: 3, MaxCents: 2500}, {Scope: policy.PerUser, Window: policy.Hour, MaxCalls: 2}}
	}
	if len(r.Approvers) == 0 {
		r.Approvers = []policy.Approver{{Role: mangrove.RoleStoreManager}}
	}
	return r
}

func withRow(t *testing.T, row policy.Row) *policy.Policy {
	t.Helper()
	rows := slices.Clone(mangrove.Table)
	for i := range rows {
		if rows[i].Tool == row.Tool {
			rows[i] = row
		}
	}
	p, err := policy.New(withRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type call struct {
	tool  string // the registered tool, even after step 0 renames the call
	p     *policy.Policy
	req   policy.Request
	facts policy.Facts
}

func baseCall(t *testing.T, p *policy.Policy, tool string) call {
	spec, _ := p.Spec(tool)
	row, _ := p.Row(tool)
	args, _ := json.Marshal(validArgs(t, spec))
	usage := make([]policy.Usage, len(row.Limits))
	var value int64 = 100
	return call{tool: tool, p: p, req: policy.Request{Tool: tool, Args: args, Session: policy.Session{
		UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s1", ConversationID: "c1", CredentialRef: "cred-ama",
	}}, facts: policy.Facts{ValueCents: &value, Usage: usage}}
}

// breaks makes the call fail at one step and returns false when the step
// cannot fail for this tool (no store arg, no credential needed).
func breaks(t *testing.T, c *call, step policy.Step) bool {
	spec, _ := c.p.Spec(c.tool)
	row, _ := c.p.Row(c.tool)
	switch step {
	case policy.StepRegistered:
		c.req.Tool = "constructor"
	case policy.StepNotDenied:
		row.Decision = policy.DecisionDeny
		c.p = withRow(t, row)
	case policy.StepRole:
		c.req.Session.Role = "cashier"
	case policy.StepArguments:
		var m map[string]any
		_ = json.Unmarshal(c.req.Args, &m)
		m["userId"] = "kofi"
		c.req.Args, _ = json.Marshal(m)
	case policy.StepCredential:
		if !spec.RequiresCredential {
			return false
		}
		c.req.Session.CredentialRef = ""
	case policy.StepResourceScope:
		if !storeScoped(spec) {
			return false
		}
		var m map[string]any
		_ = json.Unmarshal(c.req.Args, &m)
		m["storeId"] = 118
		c.req.Args, _ = json.Marshal(m)
	case policy.StepHardLimit:
		over := row.HardLimitCents + 1
		c.facts.ValueCents = &over
	case policy.StepRateLimit:
		c.facts.Usage[0] = policy.Usage{Calls: row.Limits[0].MaxCalls, Cents: row.Limits[0].MaxCents}
	}
	return true
}

// TestEveryRowEveryStep loops over the policy table and the chain: for each
// row and step, a call broken at that step and at every later one fails
// with that step's code, and the unbroken call gets the row's decision.
func TestEveryRowEveryStep(t *testing.T) {
	for _, shipped := range mangrove.Table {
		row := reachable(shipped)
		p := withRow(t, row)
		t.Run(row.Tool, func(t *testing.T) {
			ok := baseCall(t, p, row.Tool)
			v := ok.p.Authorize(ok.req, ok.facts)
			if v.Code != policy.CodeOK || v.Decision != p.Effective(row.Tool) {
				t.Fatalf("valid call: got %s/%s %q, want ok/%s", v.Decision, v.Code, v.Message, p.Effective(row.Tool))
			}
			for _, step := range policy.Steps {
				c := baseCall(t, p, row.Tool)
				if !breaks(t, &c, step) {
					continue // e.g. a tool that names no store cannot fail resource_scope
				}
				t.Run(step.String(), func(t *testing.T) {
					for _, later := range policy.Steps[step+1:] {
						breaks(t, &c, later)
					}
					v := c.p.Authorize(c.req, c.facts)
					if v.Decision != policy.DecisionDeny || v.Code != step.Code() || v.Step != step {
						t.Fatalf("got %s/%s at step %d (%q), want deny/%s", v.Decision, v.Code, v.Step, v.Message, step.Code())
					}
					if v.Message == "" {
						t.Fatal("a refusal must tell the model what to do next")
					}
					if step == policy.StepCredential && !v.AuthRequired {
						t.Fatal("credential_unavailable must set authRequired")
					}
				})
			}
		})
	}
}

// TestShippedRows checks each shipped row as it is, without the reachable
// variant: denied rows deny, allowed rows pass with a real session.
func TestShippedRows(t *testing.T) {
	p := mangrovePolicy()
	for _, row := range mangrove.Table {
		c := baseCall(t, p, row.Tool)
		v := p.Authorize(c.req, c.facts)
		want := p.Effective(row.Tool)
		if v.Decision != want {
			t.Errorf("%s: got %s (%s), want %s", row.Tool, v.Decision, v.Code, want)
		}
		if want == policy.DecisionDeny && v.Code != policy.CodeToolDenied {
			t.Errorf("%s: denied row gave %s", row.Tool, v.Code)
		}
	}
}

// TestRiskTierFloor: a row can raise the decision but never lower it below the tier.
func TestRiskTierFloor(t *testing.T) {
	for _, spec := range mangrove.Tools {
		for _, d := range []policy.Decision{policy.DecisionAllow, policy.DecisionApprove, policy.DecisionDeny} {
			row, _ := mangrovePolicy().Row(spec.Name)
			row = reachable(row)
			row.Decision = d
			p := withRow(t, row)
			got := p.Effective(spec.Name)
			if policy.Stricter(got, spec.Tier.Floor()) != got || policy.Stricter(got, d) != got {
				t.Errorf("%s tier %s row %s: effective %s is below the floor or the row", spec.Name, spec.Tier, d, got)
			}
			c := baseCall(t, p, spec.Name)
			if v := p.Authorize(c.req, c.facts); v.Decision != got {
				t.Errorf("%s tier %s row %s: Authorize gave %s, want %s", spec.Name, spec.Tier, d, v.Decision, got)
			}
		}
	}
	if policy.Stricter(policy.DecisionAllow, policy.TierWrite.Floor()) != policy.DecisionApprove || policy.Stricter(policy.DecisionAllow, policy.TierIrreversible.Floor()) != policy.DecisionApprove {
		t.Fatal("write and irreversible must be at least approve")
	}
	if policy.Tier("mystery").Floor() != policy.DecisionDeny {
		t.Fatal("an unclassified tier must deny")
	}
}

func TestUnknownToolNames(t *testing.T) {
	p := mangrovePolicy()
	for _, name := range []string{"constructor", "__proto__", "", "toString", "hasOwnProperty", "GET_STOCK", "get_stock ", "get\u200bstock", "gеt_stock" /* Cyrillic е */} {
		c := baseCall(t, p, "get_stock")
		c.req.Tool = name
		if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeUnknownTool {
			t.Errorf("%q: got %s, want unknown_tool", name, v.Code)
		}
	}
}

func TestStoreDefaultsToSessionFirstStore(t *testing.T) {
	p := mangrovePolicy()
	c := baseCall(t, p, "get_stock")
	c.req.Session.Resources = mangrove.Stores(112, 118)
	v := p.Authorize(c.req, c.facts)
	if v.Resource != (policy.ResourceRef{Kind: "store", ID: "112"}) || !strings.Contains(string(v.Args), `"storeId":112`) {
		t.Fatalf("got store %v args %s, want 112 filled in", v.Resource, v.Args)
	}
	c.req.Session.Resources = nil
	if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeResourceScope {
		t.Fatalf("no stores: got %s, want resource_scope", v.Code)
	}
}

func TestLimitsCountUpToTheEdge(t *testing.T) {
	p := mangrovePolicy()
	row, _ := p.Row("create_task")
	c := baseCall(t, p, "create_task")
	for used := 0; used <= row.Limits[0].MaxCalls; used++ {
		c.facts.Usage = []policy.Usage{{Calls: used}}
		v := p.Authorize(c.req, c.facts)
		admitted := v.Code == policy.CodeOK
		if admitted != (used < row.Limits[0].MaxCalls) {
			t.Fatalf("with %d used: got %s", used, v.Code)
		}
	}
	c.facts.Usage = nil
	if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeRateLimit {
		t.Fatalf("missing usage must fail closed, got %s", v.Code)
	}
	if got := c.facts; got.Usage != nil {
		t.Fatal("unreachable")
	}
	if v := p.Authorize(c.req, policy.Facts{Usage: []policy.Usage{{}}}); v.Limits[0].Key != "create_task/store/112/86400" {
		t.Fatalf("limit key %q", v.Limits[0].Key)
	}
}

// TestNewRefusesBrokenTables: a pack that does not hold together stops the
// process at start, and the refusal names the pack and what to fix.
func TestNewRefusesBrokenTables(t *testing.T) {
	cases := map[string]struct {
		rows []policy.Row
		want string
	}{
		"missing row":   {mangrove.Table[1:], `tool "search_procedures" has no policy row`},
		"unknown tool":  {append(slices.Clone(mangrove.Table), policy.Row{Tool: "launch_rocket", Decision: policy.DecisionAllow}), `row for unregistered tool "launch_rocket"`},
		"duplicate row": {append(slices.Clone(mangrove.Table), mangrove.Table[0]), `tool "search_procedures" has two rows`},
		"bad decision":  {append(slices.Clone(mangrove.Table[1:]), policy.Row{Tool: mangrove.Table[0].Tool, Decision: "maybe"}), `unknown decision "maybe"`},
		"unknown tier":  {append(slices.Clone(mangrove.Table[1:]), policy.Row{Tool: mangrove.Table[0].Tool, Decision: policy.DecisionAllow, RequesterTier: "gold"}), `requester tier "gold"`},
		"undeclared role": {append(slices.Clone(mangrove.Table[1:]), policy.Row{Tool: mangrove.Table[0].Tool, Roles: []policy.Role{"cashier"}, Decision: policy.DecisionAllow}),
			`the row of search_procedures names the role "cashier", which the pack does not declare`},
	}
	for name, c := range cases {
		_, err := policy.New(withRows(c.rows))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pack mangrove") {
			t.Errorf("%s: New said %v, want an error naming pack mangrove and %s", name, err, c.want)
		}
	}
	packs := map[string]struct {
		edit func(*policy.Pack)
		want string
	}{
		"unused role": {func(d *policy.Pack) { d.Roles = append(d.Roles, policy.RoleSpec{Name: "cashier", Label: "Cashier"}) }, `the role "cashier" is declared but no row names it`},
		"no route":    {func(d *policy.Pack) { d.Tools = slices.Clone(d.Tools); d.Tools[1].Route = policy.Route{} }, `tool "get_stock" may run but has no upstream route`},
		"no system":   {func(d *policy.Pack) { d.System = "" }, "System must name its upstream"},
		"receipt path": {func(d *policy.Pack) {
			d.Tools = slices.Clone(d.Tools)
			d.Tools[1].Receipt = &policy.Receipt{Name: "count", Field: "stock.count"}
		}, `tool "get_stock" has a receipt "count" in field "stock.count"`},
		"receipt markup": {func(d *policy.Pack) {
			d.Tools = slices.Clone(d.Tools)
			d.Tools[1].Receipt = &policy.Receipt{Name: "<b>count</b>", Field: "count"}
		}, `has a receipt "<b>count</b>"`},
		"edit of no arg": {func(d *policy.Pack) {
			d.Rows = slices.Clone(d.Rows)
			d.Rows[5].Editable = []string{"fromStoreId"}
		}, `lets approvers edit "fromStoreId", which is not one of its args`},
		"no name": {func(d *policy.Pack) { d.Name = "" }, "a pack needs a name"},
		"window past the ledger": {func(d *policy.Pack) {
			d.Rows = slices.Clone(d.Rows)
			d.Rows[5].Limits = []policy.Limit{{Scope: policy.PerResource, Window: policy.MaxWindow + 1, MaxCalls: 5}}
		}, "a limit's window is 2678401 seconds; give one from a second to 31 days"},
		"no window": {func(d *policy.Pack) {
			d.Rows = slices.Clone(d.Rows)
			d.Rows[5].Limits = []policy.Limit{{Scope: policy.PerResource, MaxCalls: 5}}
		}, "a limit's window is 0 seconds"},
		"lost format": {func(d *policy.Pack) { d.Formats = nil }, `field "grnId": the rule "grnid" is neither built in`},
		"stray rule": {func(d *policy.Pack) {
			d.Evidence = append(slices.Clone(d.Evidence), policy.EvidenceRule{Tool: "launch_rocket", ACR: policy.ACRMFA})
		}, `an evidence rule names "launch_rocket"`},
		"builtin name": {func(d *policy.Pack) {
			d.Formats = append(slices.Clone(d.Formats), policy.Format{Tag: "min", Pattern: mangrove.GRNID, Rule: "x"})
		}, `format "min" takes the name of a built-in rule`},
	}
	for name, c := range packs {
		d := mangrove.Policy()
		c.edit(&d)
		if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New said %v, want %s", name, err, c.want)
		}
	}
	other := mangrove.Policy()
	other.Name, other.Formats = "copy", nil
	if _, err := policy.New(mangrove.Policy(), other); err == nil || !strings.Contains(err.Error(), `tool "search_procedures" is already pack mangrove's`) {
		t.Errorf("two packs with one tool: New said %v", err)
	}
	if _, err := policy.New(mangrove.Policy(), mangrove.Policy()); err == nil || !strings.Contains(err.Error(), `pack "mangrove" is loaded twice`) {
		t.Errorf("one pack twice: New said %v", err)
	}
	if _, err := policy.New(); err == nil {
		t.Error("no pack: New accepted it")
	}
}

func TestDollars(t *testing.T) {
	for cents, want := range map[int64]string{38400: "$384.00", 200000: "$2,000.00", 5: "$0.05", 123456789: "$1,234,567.89"} {
		if got := policy.Dollars(cents); got != want {
			t.Errorf("Dollars(%d) = %s, want %s", cents, got, want)
		}
	}
}

func ExampleDollars() {
	fmt.Println(policy.Dollars(38400))
	// Output: $384.00
}

// TestSpendLimits: for every row, each spend cap admits a call that lands
// exactly on the cap and refuses one cent more, independent of call caps.
func TestSpendLimits(t *testing.T) {
	for _, shipped := range mangrove.Table {
		row := reachable(shipped)
		p := withRow(t, row)
		for i, l := range row.Limits {
			if l.MaxCents == 0 {
				continue
			}
			c := baseCall(t, p, row.Tool)
			value := *c.facts.ValueCents
			c.facts.Usage[i] = policy.Usage{Cents: l.MaxCents - value}
			if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeOK {
				t.Errorf("%s limit %d: landing on the cap gave %s", row.Tool, i, v.Code)
			}
			c.facts.Usage[i] = policy.Usage{Cents: l.MaxCents - value + 1}
			if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeRateLimit || !strings.Contains(v.Message, policy.Dollars(l.MaxCents)) {
				t.Errorf("%s limit %d: one cent over gave %s %q", row.Tool, i, v.Code, v.Message)
			}
		}
	}
}

// TestApproverRouting: every row that can approve routes every value up to
// its hard limit to exactly one role, and the shipped transfer row routes
// $500.00 to a store manager and a cent more to an area manager.
func TestApproverRouting(t *testing.T) {
	p := mangrovePolicy()
	for _, row := range mangrove.Table {
		if p.Effective(row.Tool) != policy.DecisionApprove {
			continue
		}
		if len(row.Approvers) == 0 {
			t.Errorf("%s decides approve but routes to no one", row.Tool)
			continue
		}
		for _, v := range []int64{0, 1, 50000, 50001, 96000, row.HardLimitCents} {
			if _, ok := row.ApproverFor(v); !ok {
				t.Errorf("%s: no approver for %s", row.Tool, policy.Dollars(v))
			}
		}
	}
	row, _ := p.Row("request_stock_transfer")
	for value, want := range map[int64]policy.Role{38400: mangrove.RoleStoreManager, 50000: mangrove.RoleStoreManager, 50001: mangrove.RoleAreaManager, 96000: mangrove.RoleAreaManager} {
		if got, _ := row.ApproverFor(value); got != want {
			t.Errorf("%s routes to %s, want %s", policy.Dollars(value), got, want)
		}
	}
}

// TestQuorums: every row's quorum is a real one (two or more approvers) on
// values the row can reach, routed to a role, and the verdict carries it
// above the threshold and not at it; the shipped transfer row needs two
// area managers above $1,500.00.
func TestQuorums(t *testing.T) {
	p := mangrovePolicy()
	for _, row := range mangrove.Table {
		for _, q := range row.Quorum {
			if q.Approvals < 2 || p.Effective(row.Tool) != policy.DecisionApprove || (row.HardLimitCents > 0 && q.AboveCents >= row.HardLimitCents) {
				t.Errorf("%s: quorum %+v is not a rule anyone can meet", row.Tool, q)
				continue
			}
			for value, want := range map[int64]int{q.AboveCents: 0, q.AboveCents + 1: q.Approvals} {
				c := baseCall(t, p, row.Tool)
				if v := p.Check(c.req, &value); v.Decision != policy.DecisionApprove || v.Approvals != want {
					t.Errorf("%s at %s: %s needing %d approvals, want approve needing %d", row.Tool, policy.Dollars(value), v.Decision, v.Approvals, want)
				}
			}
		}
	}
	row, _ := p.Row("request_stock_transfer")
	for value, want := range map[int64]int{96000: 1, 150000: 1, 150001: 2, 192000: 2} {
		if got := row.ApprovalsFor(value); got != want {
			t.Errorf("%s needs %d approvals, want %d", policy.Dollars(value), got, want)
		}
	}
	if role, _ := row.ApproverFor(150001); role != mangrove.RoleAreaManager {
		t.Errorf("the two-person rule applies to %s, want the area manager", role)
	}
}

// TestConfirmInClientIsTheRowsOnACardOfOne: a row that allows a
// confirmation in the requester's client says so on its approve verdicts
// of one approver, never on a card two must approve (which takes none
// from its requester); the shipped row allows none; a deny row that
// claims one is refused at start.
func TestConfirmInClientIsTheRowsOnACardOfOne(t *testing.T) {
	rows := slices.Clone(mangrove.Table)
	for i := range rows {
		rows[i].ConfirmInClient = rows[i].Tool == mangrove.ToolRequestStockTransfer
	}
	p, err := policy.New(withRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[int64]bool{38400: true, 150000: true, 150001: false} {
		c := baseCall(t, p, mangrove.ToolRequestStockTransfer)
		if v := p.Check(c.req, &value); v.Decision != policy.DecisionApprove || v.ConfirmInClient != want {
			t.Errorf("%s: %s, confirm in the client %v, want %v", policy.Dollars(value), v.Decision, v.ConfirmInClient, want)
		}
	}
	c := baseCall(t, mangrovePolicy(), mangrove.ToolRequestStockTransfer)
	if v := mangrovePolicy().Check(c.req, c.facts.ValueCents); v.ConfirmInClient {
		t.Errorf("the shipped row allows a confirmation in the client")
	}
	for i := range rows {
		rows[i].ConfirmInClient = rows[i].Decision == policy.DecisionDeny
	}
	if _, err := policy.New(withRows(rows)); err == nil || !strings.Contains(err.Error(), "no card is put up to confirm in the client") {
		t.Errorf("a deny row that takes a confirmation in the client: %v", err)
	}
}

func TestDryRunToolsWaitForTheirValue(t *testing.T) {
	p := mangrovePolicy()
	c := baseCall(t, p, "request_stock_transfer")
	v := p.Check(c.req, nil)
	if !v.NeedsPreview || v.Code != policy.CodeOK || v.Resource.ID != "112" {
		t.Fatalf("before the preview: %+v", v)
	}
	if v := p.Authorize(c.req, policy.Facts{Usage: c.facts.Usage}); v.Code != policy.CodeOverLimit {
		t.Fatalf("Authorize without a value must fail closed, got %s", v.Code)
	}
	over := int64(250 * 960)
	if v := p.Check(c.req, &over); v.Code != policy.CodeOverLimit {
		t.Fatalf("250 cases: %s", v.Code)
	}
	value := int64(96000)
	if v := p.Check(c.req, &value); v.Decision != policy.DecisionApprove || v.ApproverRole != mangrove.RoleAreaManager {
		t.Fatalf("100 cases: %s routed to %s", v.Decision, v.ApproverRole)
	}
}

// TestSessionStoresMustBeValid: a session listing a store that is not a
// valid store number (found by FuzzAuthorize) is refused, never filled in.
func TestSessionStoresMustBeValid(t *testing.T) {
	p := mangrovePolicy()
	for _, bad := range []int64{-30, 0, 1_000_000} {
		c := baseCall(t, p, "get_stock")
		c.req.Session.Resources = mangrove.Stores(bad)
		if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeResourceScope {
			t.Errorf("session store %d: got %s (%s)", bad, v.Code, v.Args)
		}
	}
}

// TestMalformedSessionsStopAtStepTwo: every session field is checked for
// length and characters before anything is counted or stored.
func TestMalformedSessionsStopAtStepTwo(t *testing.T) {
	p := mangrovePolicy()
	for name, bad := range map[string]func(*policy.Session){
		"long user":          func(s *policy.Session) { s.UserID = strings.Repeat("a", policy.MaxIDLength+1) },
		"NUL in user":        func(s *policy.Session) { s.UserID = "ama\x00" },
		"space in session":   func(s *policy.Session) { s.SessionID = "s 1" },
		"slash in conv":      func(s *policy.Session) { s.ConversationID = "c/1" },
		"newline credential": func(s *policy.Session) { s.CredentialRef = "cred\n" },
		"too many stores": func(s *policy.Session) {
			s.Resources = policy.Resources{"store": make([]string, policy.MaxResources+1)}
		},
		"unicode in the user": func(s *policy.Session) { s.UserID = "аma" },
	} {
		c := baseCall(t, p, "get_stock")
		bad(&c.req.Session)
		if v := p.Authorize(c.req, c.facts); v.Code != policy.CodeRole || !strings.Contains(v.Message, "malformed") {
			t.Errorf("%s: got %s %q", name, v.Code, v.Message)
		}
	}
}

// TestEditableFields: every field a row lets an approver edit is a
// parameter of its tool, on an approve row, and never the store (an edit
// must not move a card out of its approver's scope); the shipped transfer
// row lets the quantity be edited and nothing else.
func TestEditableFields(t *testing.T) {
	p := mangrovePolicy()
	for _, row := range mangrove.Table {
		if len(row.Editable) == 0 {
			continue
		}
		def := func() *policy.Definition {
			for _, d := range p.DefinitionsFor(row.Roles[0]) {
				if d.Name == row.Tool {
					return &d
				}
			}
			return nil
		}()
		if def == nil || p.Effective(row.Tool) != policy.DecisionApprove {
			t.Errorf("%s: editable fields on a row that shows no card", row.Tool)
			continue
		}
		props, _ := def.InputSchema["properties"].(map[string]any)
		for _, f := range row.Editable {
			if _, ok := props[f]; !ok || f == "storeId" {
				t.Errorf("%s: %q is not an editable parameter", row.Tool, f)
			}
		}
	}
	row, _ := p.Row("request_stock_transfer")
	if len(row.Editable) != 1 || row.Editable[0] != "quantity" {
		t.Errorf("transfers: editable %v, want [quantity]", row.Editable)
	}
}

// TestTheRecordedScopeCodeReadsAsTodays: store_scope, recorded before the
// rename, is read as resource_scope and is not in the closed set; every
// code of the set reads as itself.
func TestTheRecordedScopeCodeReadsAsTodays(t *testing.T) {
	if policy.CodeStoreScope.Valid() || policy.CodeStoreScope.Canonical() != policy.CodeResourceScope {
		t.Fatalf("store_scope: valid %v, reads as %s", policy.CodeStoreScope.Valid(), policy.CodeStoreScope.Canonical())
	}
	for _, c := range policy.Codes {
		if c.Canonical() != c {
			t.Errorf("%s reads as %s", c, c.Canonical())
		}
	}
}
