package policy_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
)

// backgroundField is one parameter of a tool as the Mangrove background text defines it
// (../shared/background/designing-tools-and-permissions.txt).
type backgroundField struct {
	typ      string
	required bool
	enum     []string
	min, max int64 // numeric bounds, or string length when typ is string; 0 means none
	def      any
}

var storeField = backgroundField{typ: "integer", min: 1, max: 99999}

// backgroundTools is the table of the background text's parameter sets. A tool's schema
// must have exactly these fields, with these types, enums and bounds.
var backgroundTools = map[string]map[string]backgroundField{
	"search_procedures": {
		"query":  {typ: "string", required: true, min: 2, max: 200},
		"cursor": {typ: "string", max: 6},
	},
	"get_stock": {
		"storeId":   storeField,
		"articleId": {typ: "integer", required: true, min: 1, max: 99999999},
	},
	"get_deliveries": {
		"storeId": storeField,
		"day":     {typ: "string", enum: []string{"yesterday", "today", "tomorrow"}, def: "today"},
		"status":  {typ: "string", enum: []string{"expected", "on_the_way", "arrived", "received", "delayed"}},
		"limit":   {typ: "integer", min: 1, max: 20, def: int64(10)},
		"cursor":  {typ: "string", max: 6},
	},
	"get_grn": {
		"storeId": storeField,
		"grnId":   {typ: "string", required: true},
	},
	"create_task": {
		"storeId":   storeField,
		"kind":      {typ: "string", required: true, enum: []string{"recount", "shelf_check", "expiry_check", "call_supplier", "pricing_desk"}},
		"articleId": {typ: "integer", min: 1, max: 99999999},
		"dueBy":     {typ: "string", required: true, enum: []string{"today", "tomorrow", "this_week"}},
		"note":      {typ: "string", max: 200},
	},
	"request_stock_transfer": {
		"storeId":   storeField,
		"articleId": {typ: "integer", required: true, min: 1, max: 99999999},
		"quantity":  {typ: "integer", required: true, min: 1, max: 500},
		"reason":    {typ: "string", required: true, enum: []string{"stockout_risk", "festival_peak", "damaged_delivery"}},
		// The assistant's own words for the approver, never part of what runs.
		"justification": {typ: "string", max: 280},
	},
	"change_price": {
		"storeId":       storeField,
		"articleId":     {typ: "integer", required: true, min: 1, max: 99999999},
		"newPriceCents": {typ: "integer", required: true, min: 1, max: 10000000},
	},
}

// TestSchemasAreTheBackgroundsParameterSets checks every tool's JSON Schema,
// as starter tools prints it, field by field against the background text's table.
func TestSchemasAreTheBackgroundsParameterSets(t *testing.T) {
	if len(backgroundTools) != len(mangrove.Tools) {
		t.Fatalf("the background text's table has %d tools, the registry %d", len(backgroundTools), len(mangrove.Tools))
	}
	for _, spec := range mangrove.Tools {
		want, ok := backgroundTools[spec.Name]
		if !ok {
			t.Errorf("%s is not a tool of the background text", spec.Name)
			continue
		}
		// Through JSON, as a model receives it.
		raw, _ := json.Marshal(mangrovePolicy().Schema(spec.Args))
		var s struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
			Additional *bool                     `json:"additionalProperties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s.Type != "object" || s.Additional == nil || *s.Additional {
			t.Errorf("%s: not a closed object (additionalProperties: false)", spec.Name)
		}
		var got, exp []string
		for k := range s.Properties {
			got = append(got, k)
		}
		for k := range want {
			exp = append(exp, k)
		}
		sort.Strings(got)
		sort.Strings(exp)
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			t.Errorf("%s: fields %v, the background text's are %v", spec.Name, got, exp)
			continue
		}
		for name, f := range want {
			p := s.Properties[name]
			check := func(what string, ok bool) {
				if !ok {
					t.Errorf("%s.%s: %s is %v", spec.Name, name, what, p)
				}
			}
			check("type", p["type"] == f.typ)
			check("required", slices.Contains(s.Required, name) == f.required)
			var enum []string
			for _, e := range asSlice(p["enum"]) {
				enum = append(enum, e.(string))
			}
			check("enum", strings.Join(enum, ",") == strings.Join(f.enum, ","))
			lo, hi := "minimum", "maximum"
			if f.typ == "string" {
				lo, hi = "minLength", "maxLength"
			}
			check("lower bound", num(p[lo]) == f.min)
			check("upper bound", num(p[hi]) == f.max)
			if f.def != nil {
				check("default", p["default"] == f.def || num(p["default"]) == num(f.def))
			}
			check("description", p["description"] != "" && p["description"] != nil)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	}
	return 0
}
