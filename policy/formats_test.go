package policy_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// keys returns an object's field names, sorted.
func keys(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %v", v)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestDefinitionFormats checks each format's field names against the API's
// documentation: OpenAI Chat Completions tools, Anthropic Messages tools,
// and MCP's tools/list result with its annotations.
func TestDefinitionFormats(t *testing.T) {
	p := mangrovePolicy()
	offered := p.Offered(mangrove.RoleStoreManager)
	for _, format := range []string{policy.FormatOpenAI, policy.FormatAnthropic, policy.FormatMCP} {
		v, err := p.DefinitionsAs(mangrove.RoleStoreManager, format)
		if err != nil {
			t.Fatal(err)
		}
		doc := roundTrip(t, v)
		var tools []any
		if format == policy.FormatMCP {
			if got := keys(t, doc); !slices.Equal(got, []string{"tools"}) {
				t.Fatalf("mcp result fields %v", got)
			}
			tools = doc.(map[string]any)["tools"].([]any)
		} else {
			tools = doc.([]any)
		}
		if len(tools) != len(offered) {
			t.Fatalf("%s: %d tools, want %d", format, len(tools), len(offered))
		}
		for i, tool := range tools {
			var name string
			var schema any
			switch format {
			case policy.FormatOpenAI:
				if got := keys(t, tool); !slices.Equal(got, []string{"function", "type"}) || tool.(map[string]any)["type"] != "function" {
					t.Fatalf("openai tool fields %v", got)
				}
				fn := tool.(map[string]any)["function"]
				if got := keys(t, fn); !slices.Equal(got, []string{"description", "name", "parameters"}) {
					t.Fatalf("openai function fields %v", got)
				}
				name, schema = fn.(map[string]any)["name"].(string), fn.(map[string]any)["parameters"]
			case policy.FormatAnthropic:
				if got := keys(t, tool); !slices.Equal(got, []string{"description", "input_schema", "name"}) {
					t.Fatalf("anthropic tool fields %v", got)
				}
				name, schema = tool.(map[string]any)["name"].(string), tool.(map[string]any)["input_schema"]
			case policy.FormatMCP:
				if got := keys(t, tool); !slices.Equal(got, []string{"annotations", "description", "inputSchema", "name"}) {
					t.Fatalf("mcp tool fields %v", got)
				}
				ann := tool.(map[string]any)["annotations"]
				if got := keys(t, ann); !slices.Equal(got, []string{"destructiveHint", "idempotentHint", "openWorldHint", "readOnlyHint"}) {
					t.Fatalf("mcp annotations %v", got)
				}
				name, schema = tool.(map[string]any)["name"].(string), tool.(map[string]any)["inputSchema"]
				spec, _ := p.Spec(name)
				a := ann.(map[string]any)
				if a["readOnlyHint"] != (spec.Tier == policy.TierRead) || a["idempotentHint"] != spec.Idempotent ||
					a["destructiveHint"] != (spec.Tier == policy.TierWrite || spec.Tier == policy.TierIrreversible) {
					t.Errorf("%s hints %v for tier %s idempotent %v", name, a, spec.Tier, spec.Idempotent)
				}
			}
			if name != offered[i] || name == "change_price" {
				t.Errorf("%s tool %d is %q, want %q", format, i, name, offered[i])
			}
			s := schema.(map[string]any)
			if s["type"] != "object" || s["additionalProperties"] != false {
				t.Errorf("%s %s: schema %v", format, name, s)
			}
			// Exactly the background text's parameter set (TestSchemasAreTheBackgroundsParameterSets checks each field).
			var fields, domain []string
			for k := range s["properties"].(map[string]any) {
				fields = append(fields, k)
			}
			for k := range backgroundTools[name] {
				domain = append(domain, k)
			}
			slices.Sort(fields)
			slices.Sort(domain)
			if !slices.Equal(fields, domain) {
				t.Errorf("%s %s: fields %v, the domain's %v", format, name, fields, domain)
			}
		}
	}
	if _, err := p.DefinitionsAs(mangrove.RoleStoreManager, "gemini"); err == nil {
		t.Fatal("an unknown format was accepted")
	}
}
