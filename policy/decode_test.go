package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeNamesFieldRuleAndAllowedValues(t *testing.T) {
	p := Default()
	cases := []struct {
		tool, args string
		want       []string
	}{
		{"get_stock", `{"articleId":40211,"extra":1}`, []string{`"extra"`, "articleId, storeId"}},
		{"get_stock", `{"ArticleId":40211}`, []string{`"ArticleId"`, "case-sensitive"}},
		{"get_stock", `{"articleId":"40211"}`, []string{`"articleId"`, "whole number", "string"}},
		{"get_stock", `{"articleId":40211.5}`, []string{`"articleId"`, "whole number"}},
		{"get_stock", `{}`, []string{`"articleId"`, "required"}},
		{"get_stock", `{"articleId":-4}`, []string{`"articleId"`, "at least 1"}},
		{"get_stock", `{"articleId":1,"articleId":2}`, []string{"twice"}},
		{"get_stock", `[1]`, []string{"one JSON object", "articleId"}},
		{"get_stock", `{"articleId":1} {}`, []string{"extra data"}},
		{"get_stock", `{"articleId":NaN}`, []string{`"articleId"`, "not valid JSON"}},
		{"create_task", `{"title":"Fix it","priority":"urgent"}`, []string{`"priority"`, "one of: low, normal, high"}},
		{"create_task", `{"title":"x"}`, []string{`"title"`, "at least 3 characters"}},
		{"create_task", `{"title":"Fix it","dueDate":"tomorrow"}`, []string{`"dueDate"`, "YYYY-MM-DD"}},
		{"get_grn", `{"grnNumber":"88213"}`, []string{`"grnNumber"`, `"GRN-"`}},
		{"get_stock", `{"articleId":1,"role":"area_manager"}`, []string{`"role"`}},
		{"get_stock", `{"articleId":1,"storeId":112,"x":"` + strings.Repeat("a", MaxArgsBytes) + `"}`, []string{"bytes"}},
	}
	for _, c := range cases {
		spec, _ := p.Spec(c.tool)
		_, err := Decode(spec, json.RawMessage(c.args))
		if err == nil {
			t.Errorf("%s %.60s: decoded, want an error", c.tool, c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %.60s: message %q lacks %q", c.tool, c.args, err, w)
			}
		}
	}
}

func TestDecodeAcceptsValidArgs(t *testing.T) {
	spec, _ := Default().Spec("create_task")
	v, err := Decode(spec, json.RawMessage(`{"title":"Check cooler 3","priority":"high","storeId":112,"dueDate":"2026-12-01"}`))
	if err != nil {
		t.Fatal(err)
	}
	a := v.(*CreateTaskArgs)
	if a.Title != "Check cooler 3" || *a.StoreID != 112 || a.Priority != "high" {
		t.Fatalf("decoded %+v", a)
	}
	if _, err := Decode(spec, nil); err == nil || !strings.Contains(err.Error(), `"title"`) {
		t.Fatalf("empty args: %v", err)
	}
}

func TestSchemaFollowsTheGoTypes(t *testing.T) {
	for _, spec := range Tools {
		s := Schema(spec.Args)
		if s["additionalProperties"] != false || s["type"] != "object" {
			t.Errorf("%s: schema must be a closed object", spec.Name)
		}
		props := s["properties"].(map[string]any)
		for _, f := range fieldsOf(spec.Args) {
			if _, ok := props[f.name]; !ok {
				t.Errorf("%s: schema lacks %s", spec.Name, f.name)
			}
			if f.desc == "" {
				t.Errorf("%s.%s: every arg needs a description for the model", spec.Name, f.name)
			}
		}
		for _, banned := range []string{"userId", "role", "credentialRef", "sessionId", "storeIds", "user", "token"} {
			if _, ok := props[banned]; ok {
				t.Errorf("%s: tool schemas never carry identity (%s)", spec.Name, banned)
			}
		}
	}
	spec, _ := Default().Spec("create_task")
	pr := Schema(spec.Args)["properties"].(map[string]any)["priority"].(map[string]any)
	if enum, _ := pr["enum"].([]string); strings.Join(enum, ",") != "low,normal,high" {
		t.Fatalf("priority enum %v", pr["enum"])
	}
}

func TestDefinitionsNeverOfferDeniedTools(t *testing.T) {
	p := Default()
	for _, role := range []Role{RoleStoreManager, RoleAreaManager, "cashier", ""} {
		defs := p.DefinitionsFor(role)
		for _, d := range defs {
			if d.Name == "change_price" || p.Effective(d.Name) == DecisionDeny {
				t.Errorf("%s was offered to %q", d.Name, role)
			}
		}
		if role == RoleStoreManager && len(defs) != 6 {
			t.Errorf("store_manager is offered %d tools, want 6", len(defs))
		}
	}
}

// TestEveryToolHasAValidExample: each tool's example passes strict decoding.
func TestEveryToolHasAValidExample(t *testing.T) {
	for _, spec := range Tools {
		if spec.Example == "" {
			t.Errorf("%s has no example", spec.Name)
			continue
		}
		if _, err := Decode(spec, json.RawMessage(spec.Example)); err != nil {
			t.Errorf("%s: example %s: %v", spec.Name, spec.Example, err)
		}
	}
}
