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
func searchPack(args reflect.Type) policy.Domain {
	return policy.Domain{
		Name: "finder", System: "the finder",
		Roles:   []policy.RoleSpec{{Name: "member", Label: "Member"}},
		Formats: []policy.Format{{Tag: "pin", Pattern: regexp.MustCompile(`^[0-9]{6}$`), Rule: "must be exactly six digits"}},
		Tools: []policy.ToolSpec{{Name: "find", Description: "Find.", Args: args, Tier: policy.TierRead, Idempotent: true, Timeout: time.Second,
			Route: policy.Route{Method: "GET", Path: "/find"}}},
		Rows: []policy.Row{{Tool: "find", Roles: []policy.Role{"member"}, Decision: policy.DecisionAllow}},
	}
}

// TestOneOfTwoFieldsIsRequired: required_without makes a pair of which at
// least one is given. Neither is invalid_arguments naming both; the schema
// the model reads says anyOf; either alone, or both, pass, each still held
// to its own rule.
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
	got, _ := json.Marshal(schema["anyOf"])
	if string(got) != `[{"required":["city"]},{"required":["pin_code"]}]` || len(schema["required"].([]string)) != 0 {
		t.Errorf("the schema: anyOf %s, required %v", got, schema["required"])
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
