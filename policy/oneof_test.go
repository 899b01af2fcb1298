package policy_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// hospitalArgs need a pin code or a city: either, both, never neither.
type hospitalArgs struct {
	PinCode string `json:"pin_code,omitempty" validate:"required_without=City,omitempty,pin" desc:"Six digits."`
	City    string `json:"city,omitempty" validate:"required_without=PinCode,omitempty,min=2,max=60" desc:"A city."`
}

// searchPack is a pack whose one read needs one of two fields.
func searchPack(args reflect.Type) policy.Pack {
	return policy.Pack{
		Name: "finder", System: "the finder",
		Roles:   []policy.RoleSpec{{Name: "member", Label: "Member"}},
		Formats: []policy.Format{{Tag: "pin", Pattern: regexp.MustCompile(`^[0-9]{6}$`), Rule: "must be exactly six digits"}},
		Tools: []policy.ToolSpec{{Name: "find", Description: "Find.", Args: args, Tier: policy.TierRead, Idempotent: true, Timeout: time.Second,
			Route: policy.Route{Method: "GET", Path: "/find"}}},
		Rows: []policy.Row{{Tool: "find", Roles: []policy.Role{"member"}, Decision: policy.DecisionAllow}},
	}
}

// TestOneOfTwoFieldsIsRequired: required_without makes a pair of which at
// least one is given. Neither is invalid_arguments naming both; either
// alone, or both, pass, each still held to its own rule. The schema the
// model reads says so in each field's description, with no combinator at
// its top level (model providers refuse one there) and neither required.
func TestOneOfTwoFieldsIsRequired(t *testing.T) {
	p, err := policy.New(searchPack(reflect.TypeFor[hospitalArgs]()))
	if err != nil {
		t.Fatal(err)
	}
	sess := policy.Session{UserID: "m1", Role: "member", SessionID: "s", ConversationID: "c"}
	for args, want := range map[string]policy.Code{
		`{}`:                                  policy.CodeInvalidArguments,
		`{"city":""}`:                         policy.CodeInvalidArguments,
		`{"pin_code":"56003"}`:                policy.CodeInvalidArguments,
		`{"pin_code":"5600344"}`:              policy.CodeInvalidArguments,
		`{"city":"B"}`:                        policy.CodeInvalidArguments,
		`{"pin_code":"560034"}`:               policy.CodeOK,
		`{"city":"Bengaluru"}`:                policy.CodeOK,
		`{"pin_code":"560034","city":"Pune"}`: policy.CodeOK,
	} {
		v := p.Authorize(policy.Request{Tool: "find", Args: json.RawMessage(args), Session: sess}, policy.Facts{})
		if v.Code != want {
			t.Errorf("%s: %s %q, want %s", args, v.Code, v.Message, want)
		}
	}
	v := p.Authorize(policy.Request{Tool: "find", Args: json.RawMessage(`{}`), Session: sess}, policy.Facts{})
	if !strings.Contains(v.Message, `"pin_code" or "city"`) && !strings.Contains(v.Message, `"city" or "pin_code"`) {
		t.Errorf("neither: the message names both fields: %q", v.Message)
	}
	schema := p.Schema(reflect.TypeFor[hospitalArgs]())
	props := schema["properties"].(map[string]any)
	pin, city := props["pin_code"].(map[string]any)["description"], props["city"].(map[string]any)["description"]
	if pin != "Six digits. Required when city is left out." || city != "A city. Required when pin_code is left out." || len(schema["required"].([]string)) != 0 {
		t.Errorf("the schema: pin_code %q, city %q, required %v", pin, city, schema["required"])
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, ok := schema[k]; ok {
			t.Errorf("the schema has %s at its top level: %v", k, schema)
		}
	}
}

// TestARequiredWithoutNamesASibling: a rule naming no other field of the
// args stops the pack at start, saying what to write.
func TestARequiredWithoutNamesASibling(t *testing.T) {
	type bad struct {
		PinCode string `json:"pin_code,omitempty" validate:"required_without=Town,omitempty"`
	}
	type self struct {
		PinCode string `json:"pin_code,omitempty" validate:"required_without=PinCode,omitempty"`
	}
	for name, args := range map[string]reflect.Type{"unknown": reflect.TypeFor[bad](), "itself": reflect.TypeFor[self]()} {
		_, err := policy.New(searchPack(args))
		if err == nil || !strings.Contains(err.Error(), "required_without=City") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestATierNeedsASignIn: a requester tier is held against the sign-in
// whose credential a call exchanges, so a tool that runs as no one cannot
// have one: the pack stops at start.
func TestATierNeedsASignIn(t *testing.T) {
	d := searchPack(reflect.TypeFor[hospitalArgs]())
	d.Rows[0].RequesterTier = policy.ACRMFA
	if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), `the row of "find" needs requester tier "mfa", but the tool runs as no one`) {
		t.Fatalf("a tier on a tool that runs as no one: %v", err)
	}
	d.Tools[0].RequiresCredential = true
	if _, err := policy.New(d); err != nil {
		t.Fatalf("a tier on a tool that runs as the person: %v", err)
	}
}

// TestAnUnavailableNoteIsARead: a write that may have run keeps the
// engine's warning not to call again, so only an idempotent tool may say
// what to do when its upstream is down.
func TestAnUnavailableNoteIsARead(t *testing.T) {
	d := searchPack(reflect.TypeFor[hospitalArgs]())
	d.Tools[0].Unavailable = "Do not answer from memory."
	if _, err := policy.New(d); err != nil {
		t.Fatalf("a read's note: %v", err)
	}
	d.Tools[0].Idempotent = false
	if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), `tool "find" says what to do when its upstream is down (Unavailable), but is not idempotent`) {
		t.Fatalf("a write's note: %v", err)
	}
}

// TestASessionScopedParameterIsAKindOfThePack: a query parameter filled
// from the session names one of the pack's resource kinds, and is not also
// filled from the args (which the model writes).
func TestASessionScopedParameterIsAKindOfThePack(t *testing.T) {
	d := searchPack(reflect.TypeFor[hospitalArgs]())
	d.Tools[0].Route.Session = map[string]string{"company": "company"}
	if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), `fills the query parameter "company" from the session's "company", which is not one of the pack's resource kinds`) {
		t.Fatalf("an undeclared kind: %v", err)
	}
	d.Resources = []policy.ResourceKind{{Name: "company", Claim: "finder_company"}}
	if _, err := policy.New(d); err != nil {
		t.Fatalf("a declared kind: %v", err)
	}
	d.Tools[0].Route.Query = map[string]string{"company": "city"}
	if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), "or is also filled from the args") {
		t.Fatalf("a parameter the args fill too: %v", err)
	}
}
