package policy_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestUnitsWriteTheirOwnMoney(t *testing.T) {
	for _, c := range []struct {
		unit policy.Unit
		v    int64
		want string
	}{
		{policy.Unit{Currency: "USD"}, 38400, "$384.00"},
		{policy.Unit{Currency: "USD"}, 123456789, "$1,234,567.89"},
		{policy.Unit{Currency: "EUR"}, 1250, "€12.50"},
		{policy.Unit{Currency: "JPY"}, 500, "¥500"},
		{policy.Unit{Currency: "CHF"}, 1250, "CHF 12.50"},
		{policy.Unit{Currency: "KWD"}, 1250, "KWD 1.250"},
		{policy.Unit{}, 1234, "1,234"},
		{policy.Unit{Currency: "GBP"}, -5, "-£0.05"},
	} {
		if got := c.unit.Format(c.v); got != c.want {
			t.Errorf("%s %d: %q, want %q", c.unit.Currency, c.v, got, c.want)
		}
	}
}

// grantArgs are a test tool's: a grant to a country, in cents.
type grantArgs struct {
	Country string `json:"country,omitempty" validate:"omitempty,oneof=GB IE" desc:"Where."`
	Amount  int64  `json:"amount" validate:"required,min=1" desc:"How much, in cents."`
}

// TestARuleThatCannotBeEvaluatedRefuses: a routing rule that fails on the
// call (a field it reads without has()) refuses the call rather than
// route it to whoever comes next.
func TestARuleThatCannotBeEvaluatedRefuses(t *testing.T) {
	d := policy.Pack{Name: "grants", System: "the grants office", Unit: policy.Unit{Currency: "GBP"},
		Roles: []policy.RoleSpec{{Name: "clerk"}, {Name: "board"}},
		Tools: []policy.ToolSpec{{Name: "award_grant", Description: "Award a grant.", Args: reflect.TypeFor[grantArgs](), Tier: policy.TierWrite, ValueArg: "amount",
			Route: policy.Route{Method: "POST", Path: "/grants"}}},
		Rows: []policy.Row{{Tool: "award_grant", Roles: []policy.Role{"clerk"}, Decision: policy.DecisionApprove,
			Approvers: []policy.Approver{{Role: "board", When: `args.country == "IE"`}, {Role: "clerk"}}}}}
	p, err := policy.New(d)
	if err != nil {
		t.Fatal(err)
	}
	s := policy.Session{UserID: "u", Role: "clerk", SessionID: "s", ConversationID: "c"}
	v := p.Check(policy.Request{Tool: "award_grant", Args: json.RawMessage(`{"country":"IE","amount":100}`), Session: s}, nil)
	if v.ApproverRole != "board" {
		t.Fatalf("an Irish grant: %+v", v)
	}
	v = p.Check(policy.Request{Tool: "award_grant", Args: json.RawMessage(`{"amount":100}`), Session: s}, nil)
	if v.Decision != policy.DecisionDeny || !strings.Contains(v.Message, "could not be worked out") {
		t.Fatalf("a grant with no country, under a rule that reads it: %+v", v)
	}
	d.Rows[0].Approvers[0].When = `has(args.country) && args.country == "IE"`
	if p, err = policy.New(d); err != nil {
		t.Fatal(err)
	}
	if v = p.Check(policy.Request{Tool: "award_grant", Args: json.RawMessage(`{"amount":100}`), Session: s}, nil); v.ApproverRole != "clerk" {
		t.Fatalf("the rule asking has(): %+v", v)
	}
	d.Rows[0].Approvers[0].When = `args.country ==`
	if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), "pack grants: tool award_grant: the approver rule") {
		t.Fatalf("a rule that does not parse: %v", err)
	}
}

// TestNewRefusesRulesTheValidatorWouldPanicOn: a validate tag whose
// parameter or field kind the validator cannot take stops the pack at
// start, never the first call's workflow task.
func TestNewRefusesRulesTheValidatorWouldPanicOn(t *testing.T) {
	type badMin struct {
		N int64 `json:"n" validate:"min=abc" desc:"n"`
	}
	type oneofBool struct {
		B bool `json:"b" validate:"oneof=true" desc:"b"`
	}
	type bareMax struct {
		S string `json:"s" validate:"max" desc:"s"`
	}
	type dotted struct {
		S string `json:"s" validate:"acme.kb" desc:"s"`
	}
	for name, c := range map[string]struct {
		args    reflect.Type
		formats []policy.Format
		want    string
	}{
		"min=abc":      {reflect.TypeFor[badMin](), nil, `field "n": the rule "min" needs a whole number`},
		"oneof a bool": {reflect.TypeFor[oneofBool](), nil, `field "b": the rule "oneof" is for strings`},
		"a bare max":   {reflect.TypeFor[bareMax](), nil, `field "s": the rule "max" needs a whole number`},
		"a dotted tag": {reflect.TypeFor[dotted](), []policy.Format{{Tag: "acme.kb", Pattern: regexp.MustCompile(`^x$`), Rule: "is x"}}, `format "acme.kb" must be 1 to 64 lower-case letters`},
		"dive":         {reflect.TypeFor[bareMax](), []policy.Format{{Tag: "dive", Pattern: regexp.MustCompile(`^x$`), Rule: "is x"}}, `format "dive" takes the name of a built-in rule`},
	} {
		d := policy.Pack{Name: "t", System: "the test system", Roles: []policy.RoleSpec{{Name: "user"}}, Formats: c.formats,
			Tools: []policy.ToolSpec{{Name: "x", Description: "x", Args: c.args, Tier: policy.TierRead, Route: policy.Route{Method: "GET", Path: "/x"}}},
			Rows:  []policy.Row{{Tool: "x", Roles: []policy.Role{"user"}, Decision: policy.DecisionAllow}}}
		if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New said %v, want %s", name, err, c.want)
		}
	}
}

// TestAValueBelowZeroIsRefused: no call is worth less than nothing, so a
// negative value (a dry run's, or an arg's) cannot slip under a limit.
func TestAValueBelowZeroIsRefused(t *testing.T) {
	p := mangrovePolicy()
	req := policy.Request{Tool: "request_stock_transfer", Args: json.RawMessage(`{"articleId":40211,"quantity":40,"reason":"stockout_risk"}`),
		Session: policy.Session{UserID: "ama", Role: "store_manager", Resources: policy.Resources{"store": {"112"}}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}}
	minus := int64(-1)
	if v := p.Check(req, &minus); v.Code != policy.CodeOverLimit || !strings.Contains(v.Message, "below zero") {
		t.Fatalf("a transfer valued at -1 cent: %s %q", v.Code, v.Message)
	}
}
