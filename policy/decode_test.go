package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"

	"github.com/toolgate/toolgate/packs/mangrove"
)

func TestDecodeNamesFieldRuleAndAllowedValues(t *testing.T) {
	p := mangrovePolicy()
	cases := []struct {
		tool, args string
		want       []string
	}{
		{"get_stock", `{"articleId":40211,"extra":1}`, []string{`"extra"`, "storeId, articleId"}},
		{"get_stock", `{"ArticleId":40211}`, []string{`"ArticleId"`, "case-sensitive"}},
		{"get_stock", `{"articleId":"40211"}`, []string{`"articleId"`, "whole number", "string"}},
		{"get_stock", `{"articleId":40211.5}`, []string{`"articleId"`, "whole number"}},
		{"get_stock", `{}`, []string{`"articleId"`, "required"}},
		{"get_stock", `{"articleId":-4}`, []string{`"articleId"`, "at least 1"}},
		{"get_stock", `{"articleId":1,"articleId":2}`, []string{"twice"}},
		{"get_stock", `[1]`, []string{"one JSON object", "articleId"}},
		{"get_stock", `{"articleId":1} {}`, []string{"extra data"}},
		{"get_stock", `{"articleId":NaN}`, []string{`"articleId"`, "not valid JSON"}},
		{"create_task", `{"kind":"clean","dueBy":"today"}`, []string{`"kind"`, "one of: recount, shelf_check, expiry_check, call_supplier, pricing_desk"}},
		{"create_task", `{"kind":"recount","dueBy":"2026-12-01"}`, []string{`"dueBy"`, "one of: today, tomorrow, this_week"}},
		{"create_task", `{"kind":"recount","dueBy":"today","note":"` + strings.Repeat("n", 201) + `"}`, []string{`"note"`, "at most 200 characters"}},
		{"create_task", `{"title":"Check cooler 3","dueBy":"today"}`, []string{`"title"`, "kind, articleId, dueBy, note"}},
		{"create_task", `{"dueBy":"today"}`, []string{`"kind"`, "required"}},
		{"get_deliveries", `{"day":"someday"}`, []string{`"day"`, "one of: yesterday, today, tomorrow"}},
		{"get_deliveries", `{"status":"lost"}`, []string{`"status"`, "one of: expected, on_the_way, arrived, received, delayed"}},
		{"get_deliveries", `{"limit":50}`, []string{`"limit"`, "at most 20"}},
		{"get_deliveries", `{"date":"2026-12-01"}`, []string{`"date"`, "day, status, limit, cursor"}},
		{"get_grn", `{"grnId":"88213"}`, []string{`"grnId"`, `"GRN-88213"`}},
		{"request_stock_transfer", `{"articleId":40211,"quantity":501,"reason":"stockout_risk"}`, []string{`"quantity"`, "at most 500"}},
		{"request_stock_transfer", `{"articleId":40211,"quantity":5,"reason":"promotion"}`, []string{`"reason"`, "one of: stockout_risk, festival_peak, damaged_delivery"}},
		{"get_stock", `{"articleId":1,"role":"area_manager"}`, []string{`"role"`}},
		{"get_stock", `{"articleId":1,"storeId":112,"x":"` + strings.Repeat("a", toolargs.MaxArgsBytes) + `"}`, []string{"bytes"}},
	}
	for _, c := range cases {
		spec, _ := p.Spec(c.tool)
		_, err := mangrovePolicy().Decode(spec, json.RawMessage(c.args))
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
	spec, _ := mangrovePolicy().Spec("create_task")
	v, err := mangrovePolicy().Decode(spec, json.RawMessage(`{"kind":"recount","articleId":40211,"dueBy":"today","storeId":112,"note":"Night shift, aisle 4"}`))
	if err != nil {
		t.Fatal(err)
	}
	a := v.(*mangrove.CreateTaskArgs)
	if a.Kind != mangrove.TaskRecount || *a.StoreID != 112 || a.ArticleID != 40211 || a.DueBy != mangrove.DayToday {
		t.Fatalf("decoded %+v", a)
	}
	if _, err := mangrovePolicy().Decode(spec, nil); err == nil || !strings.Contains(err.Error(), `"kind"`) {
		t.Fatalf("empty args: %v", err)
	}
}

func TestSchemaFollowsTheGoTypes(t *testing.T) {
	for _, spec := range mangrove.Tools {
		s := mangrovePolicy().Schema(spec.Args)
		if s["additionalProperties"] != false || s["type"] != "object" {
			t.Errorf("%s: schema must be a closed object", spec.Name)
		}
		props := s["properties"].(map[string]any)
		for _, f := range toolargs.Fields(spec.Args) {
			if _, ok := props[f.Name]; !ok {
				t.Errorf("%s: schema lacks %s", spec.Name, f.Name)
			}
			if f.Desc == "" {
				t.Errorf("%s.%s: every arg needs a description for the model", spec.Name, f.Name)
			}
		}
		for _, banned := range []string{"userId", "role", "credentialRef", "sessionId", "storeIds", "user", "token"} {
			if _, ok := props[banned]; ok {
				t.Errorf("%s: tool schemas never carry identity (%s)", spec.Name, banned)
			}
		}
	}
}

func TestDefinitionsNeverOfferDeniedTools(t *testing.T) {
	p := mangrovePolicy()
	for _, role := range []policy.Role{mangrove.RoleStoreManager, mangrove.RoleAreaManager, "cashier", ""} {
		defs := p.DefinitionsFor(role)
		for _, d := range defs {
			if d.Name == "change_price" || p.Effective(d.Name) == policy.DecisionDeny {
				t.Errorf("%s was offered to %q", d.Name, role)
			}
		}
		if role == mangrove.RoleStoreManager && len(defs) != 6 {
			t.Errorf("store_manager is offered %d tools, want 6", len(defs))
		}
	}
}

// TestEveryToolHasAValidExample: each tool's example passes strict decoding.
func TestEveryToolHasAValidExample(t *testing.T) {
	for _, spec := range mangrove.Tools {
		if spec.Example == "" {
			t.Errorf("%s has no example", spec.Name)
			continue
		}
		if _, err := mangrovePolicy().Decode(spec, json.RawMessage(spec.Example)); err != nil {
			t.Errorf("%s: example %s: %v", spec.Name, spec.Example, err)
		}
	}
}

// TestRedactPII: clients redact a task's note before starting a call; other
// fields, other tools and args the chain would refuse pass unchanged.
func TestRedactPII(t *testing.T) {
	in := `{"kind":"call_supplier","dueBy":"today","note":"ring +233 24 555 0123, kwame@volta.example"}`
	out := string(mangrovePolicy().RedactPII("create_task", json.RawMessage(in)))
	if strings.Contains(out, "555 0123") || strings.Contains(out, "kwame@") || !strings.Contains(out, `"kind":"call_supplier"`) {
		t.Fatalf("redacted: %s", out)
	}
	for tool, args := range map[string]string{
		"create_task":       `{"kind":"recount","dueBy":"today","note":"aisle 4"}`,
		"search_procedures": `{"query":"call kwame@volta.example"}`,
		"nope":              `{"note":"kwame@volta.example"}`,
		"get_stock":         `not json`,
	} {
		if got := string(mangrovePolicy().RedactPII(tool, json.RawMessage(args))); got != args {
			t.Errorf("%s %s changed to %s", tool, args, got)
		}
	}
	dup := `{"kind":"recount","dueBy":"today","note":"kwame@volta.example","note":"x"}`
	if got := string(mangrovePolicy().RedactPII("create_task", json.RawMessage(dup))); got != dup {
		t.Errorf("args with a duplicate key were rewritten (the chain must still refuse them): %s", got)
	}
}
