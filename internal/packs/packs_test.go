package packs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/policy"
)

// TestAPackFileIsAPack: the handbook file loads beside Mangrove, and its
// tools are judged by the same chain: an allowed read, strict args with the
// schema's bounds and pattern, a redacted note, an approve row routed to
// its editor, and the schema the model is offered says what is enforced.
func TestAPackFileIsAPack(t *testing.T) {
	set, err := packs.Load("mangrove, ../../examples/packs/handbook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := set.Policy
	reader := policy.Session{UserID: "ama", Role: "reader", SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
	check := func(tool, args string) policy.Verdict {
		return p.Check(policy.Request{Tool: tool, Args: json.RawMessage(args), Session: reader}, nil)
	}
	if v := check("search_handbook", `{"query":"cold chain"}`); v.Decision != policy.DecisionAllow || string(v.Args) != `{"query":"cold chain"}` || v.Tool.Timeout.String() != "5s" {
		t.Fatalf("a handbook search: %+v %s", v, v.Args)
	}
	for args, want := range map[string]string{
		`{"query":"x"}`:                   `Field "query" must be at least 2 characters long`,
		`{"query":"cold","cursor":"abc"}`: `Field "cursor" must match the pattern ^[0-9]{1,6}$`,
		`{"query":"cold","page":"x"}`:     `Unknown field "page"`,
		`{"cursor":"1"}`:                  `Field "query" is required`,
		`{"query":"cold","cursor":12}`:    `Field "cursor" must be a string`,
	} {
		if v := check("search_handbook", args); v.Code != policy.CodeInvalidArguments || !strings.Contains(v.Message, want) {
			t.Errorf("%s: %s %q, want %q", args, v.Code, v.Message, want)
		}
	}
	v := check("suggest_edit", `{"page":"cold-chain","change":"Call me on +44 7700 900123.","urgent":false}`)
	if v.Decision != policy.DecisionApprove || v.ApproverRole != "editor" || v.Evidence == nil || v.Evidence.ACR != policy.ACRPassword ||
		strings.Contains(string(v.Args), "7700") || !strings.Contains(string(v.Args), `"urgent":false`) {
		t.Fatalf("a suggested edit: %+v %s", v, v.Args)
	}
	if v := check("get_stock", `{"articleId":40211}`); v.Code != policy.CodeRole {
		t.Fatalf("a handbook reader calling Mangrove: %s", v.Code)
	}
	defs := p.DefinitionsFor("reader")
	if len(defs) != 2 {
		t.Fatalf("a reader is offered %d tools, want the handbook's two", len(defs))
	}
	schema, _ := json.Marshal(defs[0].InputSchema)
	for _, want := range []string{`"pattern":"^[0-9]{1,6}$"`, `"maxLength":200`, `"required":["query"]`, `"additionalProperties":false`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("the offered schema %s lacks %s", schema, want)
		}
	}
}

// TestABadPackFileSaysWhereAndWhat: each mistake in a pack file stops the
// start with the file, the line and the field, and what to write.
func TestABadPackFileSaysWhereAndWhat(t *testing.T) {
	good, err := os.ReadFile("../../examples/packs/handbook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ from, to, want string }{
		{"    tier: read\n", "    tierr: read\n", `:13: tools[0].tierr: unknown field; the fields here are name, description, tier`},
		{"decision: allow", "decision: maybe", `:26: tools[0].policy.decision: "maybe": use allow, approve or deny`},
		{"tier: write\n", "tier: dangerous\n", `:30: tools[1].tier: "dangerous" is not a tier`},
		{"timeout: 5s", "timeout: soon", `:15: tools[0].timeout: "soon" is not a duration`},
		{`path: "/v1/handbook/{page}/suggestions"`, `path: "/v1/handbook/{slug}/suggestions"`, `:44: tools[1].route.path: {slug} is not one of the args (change, page, urgent)`},
		{"body: [change, urgent]", "body: [change, reason]", `tools[1].route.body[1]: "reason" is not one of the args`},
		{"{type: boolean, title: Urgent,", "{type: number,", `:42: tools[1].args.properties.urgent.type: "number": an arg is a string, an integer`},
		{`, title: Query, description: "What to look for, in plain words."}`, "}", `:20: tools[0].args.properties.query.description: required: the model needs to know what query is`},
		{"pattern: \"^[0-9]{1,6}$\"", "pattern: \"^[0-9\"", `:21: tools[0].args`},
		{"minLength: 2,", "minLength: 2, format: email,", `:20: tools[0].args.properties.query.format: not supported`},
		{"      required: [query]\n", "      required: [query, q]\n", `:22: tools[0].args.required: "q" is not one of the properties`},
		{"approvers: [{role: editor}]", "approvers: []", `:48: tools[1].policy.approvers: a card of this tool (an approve row, or a write tool, which a person always approves) needs its approvers`},
		{"roles: [reader]\n", "roles: [writer]\n", `the row of suggest_edit names the role "writer", which the pack does not declare`},
		{"maxAge: 8h", "maxAge: a while", `:49: tools[1].policy.evidence[0].maxAge: "a while" is not a duration`},
		{"scope: user", "scope: store", `:27: tools[0].policy.limits[0].scope: "store": use user`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		if !strings.Contains(string(good), c.from) {
			t.Fatalf("the good file has no %q", c.from)
		}
		path := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := packs.Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q → %q: %v\nwant %s", c.from, c.to, err, c.want)
		}
	}
	if _, err := packs.Load("nowhere.yaml"); err == nil || !strings.Contains(err.Error(), "nowhere.yaml") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := packs.Load("mangrove,warehouse"); err == nil || !strings.Contains(err.Error(), `"warehouse" is neither a built-in pack (mangrove, northgate, plancover) nor a pack file`) {
		t.Errorf("an unknown pack: %v", err)
	}
}

// refunds is examples/packs/refunds.yaml: an approve tool whose value is
// an arg in euros, routed by a rule before its bounds.
var refunds = func() string {
	b, err := os.ReadFile("../../examples/packs/refunds.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// TestAFilePackHasItsOwnMoneyAndRules: values are the pack's currency in
// every message, an arg gives the value, and a rule routes before the
// bounds; a rule that is not true-or-false stops the start at its tool.
func TestAFilePackHasItsOwnMoneyAndRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refunds.yaml")
	if err := os.WriteFile(path, []byte(refunds), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := packs.Load("mangrove," + path)
	if err != nil {
		t.Fatal(err)
	}
	agent := policy.Session{UserID: "ama", Role: "agent", SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
	check := func(args string) policy.Verdict {
		return set.Policy.Check(policy.Request{Tool: "refund_order", Args: json.RawMessage(args), Session: agent}, nil)
	}
	for args, want := range map[string]policy.Role{
		`{"orderId":"O-1","amount":1500,"reason":"late"}`:       "supervisor",
		`{"orderId":"O-1","amount":90000,"reason":"damaged"}`:   "fraud_officer",
		`{"orderId":"O-1","amount":1500,"reason":"chargeback"}`: "fraud_officer",
	} {
		if v := check(args); v.Decision != policy.DecisionApprove || v.ApproverRole != want || v.ValueCents == nil || v.Currency != "EUR" {
			t.Errorf("%s: %+v, want a card for the %s", args, v, want)
		}
	}
	v := check(`{"orderId":"O-1","amount":400000,"reason":"late"}`)
	if v.Code != policy.CodeOverLimit || !strings.Contains(v.Message, "worth €4,000.00, above the limit of €3,000.00") {
		t.Fatalf("a refund over the hard limit: %s %q", v.Code, v.Message)
	}
	bad := strings.Replace(refunds, `when: "args.reason == 'chargeback'"`, `when: "args.amount + 1"`, 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := packs.Load(path); err == nil || !strings.Contains(err.Error(), path+":12: tools[0]:") || !strings.Contains(err.Error(), "not true or false") {
		t.Fatalf("a rule that is a number: %v", err)
	}
	bad = strings.Replace(refunds, "valueArg: amount", "valueArg: reason", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := packs.Load(path); err == nil || !strings.Contains(err.Error(), `ValueArg "reason" must name a required integer arg`) {
		t.Fatalf("a value arg that is a string: %v", err)
	}
	bad = strings.Replace(refunds, "currency: EUR", "currency: EURO", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := packs.Load(path); err == nil || !strings.Contains(err.Error(), `the currency "EURO" is not an ISO 4217 code`) {
		t.Fatalf("a currency that is not one: %v", err)
	}
}

// TestAPackFileCannotWriteARuleThatIsNotKept: what a hostile review found
// a file could say and toolgate would not hold; each is refused at start.
func TestAPackFileCannotWriteARuleThatIsNotKept(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) error {
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := packs.Load(path)
		return err
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"a negative value":        {"minimum: 1, maximum: 500000", "maximum: 500000", `ValueArg "amount" must not be negative: give it a minimum of 0 or more`},
		"a quote in an enum":      {"enum: [damaged, late, chargeback]", `enum: [damaged, "it's", chargeback]`, `each value is one word of letters, digits and _ . : -`},
		"a dotted pack name":      {"pack: refunds", "pack: refunds.eu", ""},
		"the auditor's role":      {"{name: supervisor, label: Supervisor}", "{name: auditor, label: Auditor}", `the role "auditor" is the card UI's own`},
		"an optional placeholder": {"required: [orderId, amount, reason]", "required: [amount, reason]", `{orderId} is filled from an optional arg; make orderId required`},
		"a read that posts":       {"tier: write", "tier: read", `is a read, so its route is a GET`},
		"no credential":           {"valueArg: amount", "valueArg: amount\n    credential: false", "every tool runs as the signed-in person"},
	} {
		if !strings.Contains(refunds, c.from) {
			t.Fatalf("%s: the refunds file has no %q", name, c.from)
		}
		err := load(strings.Replace(refunds, c.from, c.to, 1))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
	// A dotted pack name with a pattern loads (its format tags are its own), and judges.
	if err := load(strings.Replace(refunds, "pack: refunds", "pack: refunds.eu@x", 1)); err != nil {
		t.Fatalf("a pack name with . and @: %v", err)
	}
	two := strings.Replace(refunds, "pack: refunds", "pack: refunds2", 1)
	two = strings.Replace(two, "name: refund_order", "name: refund_order2", 1)
	first := filepath.Join(dir, "a.yaml")
	second := filepath.Join(dir, "b.yaml")
	_ = os.WriteFile(first, []byte(refunds), 0o600)
	_ = os.WriteFile(second, []byte(two), 0o600)
	if _, err := packs.Load(first + "," + second); err == nil || !strings.Contains(err.Error(), `the role "agent" is declared by packs refunds and refunds2`) {
		t.Errorf("one role in two packs: %v", err)
	}
}

// TestEscalationFollowsTheRules: an unanswered card is offered only to a
// later approver whose bound and rule would have taken it.
func TestEscalationFollowsTheRules(t *testing.T) {
	body := strings.Replace(refunds, "        - {role: fraud_officer}\n", "        - {role: fraud_officer}\n        - {role: head, when: \"value > 100000\"}\n", 1)
	body = strings.Replace(body, "  - {name: fraud_officer, label: Fraud officer}\n", "  - {name: fraud_officer, label: Fraud officer}\n  - {name: head, label: Head of desk}\n", 1)
	path := filepath.Join(t.TempDir(), "refunds.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := packs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	agent := policy.Session{UserID: "ama", Role: "agent", SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
	for args, want := range map[string][2]policy.Role{
		`{"orderId":"O-1","amount":1500,"reason":"late"}`:       {"supervisor", "fraud_officer"},
		`{"orderId":"O-1","amount":90000,"reason":"damaged"}`:   {"fraud_officer", ""},
		`{"orderId":"O-1","amount":150000,"reason":"damaged"}`:  {"fraud_officer", "head"},
		`{"orderId":"O-1","amount":1500,"reason":"chargeback"}`: {"fraud_officer", ""},
	} {
		v := set.Policy.Check(policy.Request{Tool: "refund_order", Args: json.RawMessage(args), Session: agent}, nil)
		if v.ApproverRole != want[0] || v.EscalateTo != want[1] {
			t.Errorf("%s: routed to %q, escalating to %q; want %q then %q", args, v.ApproverRole, v.EscalateTo, want[0], want[1])
		}
	}
}

// TestWhatAFileSaysIsWhatIsKept: a title reaches the model, a boolean
// default stays a boolean, and a limit on a value the tool does not have,
// or a write with nobody to approve it, is refused at start.
func TestWhatAFileSaysIsWhatIsKept(t *testing.T) {
	set, err := packs.Load("../../examples/packs/handbook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defs := set.Policy.DefinitionsFor("reader")
	schema, _ := json.Marshal(defs[1].InputSchema)
	if !strings.Contains(string(schema), `"title":"Page"`) {
		t.Errorf("the edit's schema %s lacks its titles", schema)
	}
	good, _ := os.ReadFile("../../examples/packs/handbook.yaml")
	dir := t.TempDir()
	for name, c := range map[string]struct{ from, to, want string }{
		"a boolean default":       {`{type: boolean, title: Urgent,`, `{type: boolean, default: false, title: Urgent,`, ""},
		"a hard limit on nothing": {"      decision: approve\n", "      decision: approve\n      hardLimit: 1000\n", "hardLimit, maxValue and quorum judge a call's value, and this tool has none"},
		"a quorum on nothing":     {"      decision: approve\n", "      decision: approve\n      quorum: [{above: 0, approvals: 2}]\n", "hardLimit, maxValue and quorum judge a call's value, and this tool has none"},
		"a denied call confirmed": {"      decision: approve\n      approvers: [{role: editor}]\n", "      decision: deny\n      confirmInClient: true\n", "policy.confirmInClient: a deny row puts up no card to confirm"},
		"an edit of no arg":       {"      decision: approve\n", "      decision: approve\n      editable: [title]\n", `editable: "title" is not one of the tool's args`},
		"a write nobody approves": {"      decision: approve\n      approvers: [{role: editor}]\n", "      decision: allow\n", "a write tool, which a person always approves) needs its approvers"},
		"a receipt's path":        {"    tier: write\n", "    tier: write\n    receipt: {name: edit, field: edit.id}\n", `tools[1].receipt: a receipt "edit" in field "edit.id"`},
		"an object title":         {"      type: object\n      properties:\n        page:", "      type: object\n      title: Edit\n      properties:\n        page:", "tools[1].args.title: not supported"},
	} {
		if !strings.Contains(string(good), c.from) {
			t.Fatalf("%s: the handbook has no %q", name, c.from)
		}
		path := filepath.Join(dir, "h.yaml")
		_ = os.WriteFile(path, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o600)
		set, err := packs.Load(path)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %s", name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		schema, _ := json.Marshal(set.Policy.DefinitionsFor("reader")[1].InputSchema)
		if !strings.Contains(string(schema), `"default":false`) {
			t.Errorf("%s: %s", name, schema)
		}
	}
}

// TestAPackFilesPluralIsSaidAsWritten: a pack file's plural is free text,
// and a refusal of an account the caller does not hold says it as written,
// a percent sign too (it is never read as a verb of the sentence's format).
func TestAPackFilesPluralIsSaidAsWritten(t *testing.T) {
	b, err := os.ReadFile("../../examples/packs/carddesk.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "plural: accounts, claim: carddesk_accounts, conceal: true,", `plural: "accounts (100% yours)", claim: carddesk_accounts,`, 1)
	if text == string(b) {
		t.Fatal("the card desk's resource line has changed; update this test")
	}
	file := filepath.Join(t.TempDir(), "carddesk.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := packs.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	cara := policy.Session{UserID: "cara", Role: "card_agent", Resources: policy.Resources{"account": {"ACC-4471"}}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-cara"}
	v := set.Policy.Check(policy.Request{Tool: "get_card", Args: json.RawMessage(`{"accountRef":"ACC-5120"}`), Session: cara}, nil)
	if want := "Account ACC-5120 is not one of the signed-in person's accounts (100% yours) (ACC-4471)."; v.Code != policy.CodeResourceScope || !strings.HasPrefix(v.Message, want) {
		t.Fatalf("another's account: %s %q, want %q", v.Code, v.Message, want)
	}
}
