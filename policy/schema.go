package policy

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Definition is a tool as offered to a model: its name, when to use it, and
// the JSON Schema of its arguments.
type Definition struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Tier        Tier           `json:"tier"`
	Idempotent  bool           `json:"idempotent"`
}

// Offered lists, in registry order, the tools a role may be offered: those
// whose row names the role and whose effective decision is not deny.
func (p *Policy) Offered(role Role) []string {
	var out []string
	for _, n := range p.names {
		if p.Effective(n) != DecisionDeny && containsRole(p.rows[n].Roles, role) {
			out = append(out, n)
		}
	}
	return out
}

// DefinitionsFor returns the definitions of the tools a role may be offered.
func (p *Policy) DefinitionsFor(role Role) []Definition {
	var out []Definition
	for _, n := range p.Offered(role) {
		s := p.specs[n]
		out = append(out, Definition{Name: s.Name, Description: s.Description, InputSchema: p.Schema(s.Args), Tier: s.Tier, Idempotent: s.Idempotent})
	}
	return out
}

func containsRole(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// Schema derives a JSON Schema (draft 2020-12 subset) from an args struct's
// json, validate and desc tags, a pack's format as its pattern. A list's
// rules before dive bound its items' count, those after it each item.
// additionalProperties is always false.
func (pol *Policy) Schema(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	fs := fieldsOf(t)
	for _, f := range fs {
		rules, itemRules, listed := strings.Split(f.validate, ","), []string(nil), f.typ.Kind() == reflect.Slice
		if i := slices.Index(rules, "dive"); i >= 0 {
			rules, itemRules = rules[:i], rules[i+1:]
		}
		var p map[string]any
		if listed {
			p = map[string]any{"type": "array", "items": pol.valueSchema(f.typ.Elem(), itemRules)}
			for _, rule := range rules {
				name, param, _ := strings.Cut(rule, "=")
				n, _ := strconv.ParseInt(param, 10, 64)
				switch name {
				case "min":
					p["minItems"] = n
				case "max":
					p["maxItems"] = n
				}
			}
		} else {
			p = pol.valueSchema(f.typ, rules)
		}
		if f.desc != "" {
			p["description"] = f.desc
		}
		for _, rule := range rules {
			name, param, _ := strings.Cut(rule, "=")
			switch name {
			case "required":
				required = append(required, f.name)
			case "required_without":
				// Model providers refuse anyOf at a tool schema's top level,
				// so the rule is said where the model reads each field.
				if o, ok := sibling(f, param, fs); ok {
					p["description"] = strings.TrimSpace(f.desc + " Required when " + o.name + " is left out.")
				}
			}
		}
		if f.title != "" {
			p["title"] = f.title
		}
		if f.def != "" && !listed {
			n, nerr := strconv.ParseInt(f.def, 10, 64)
			b, berr := strconv.ParseBool(f.def)
			switch {
			case nerr == nil && p["type"] == "integer":
				p["default"] = n
			case berr == nil && p["type"] == "boolean":
				p["default"] = b
			default:
				p["default"] = f.def
			}
		}
		props[f.name] = p
	}
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// valueSchema is one value's type and the rules on it: a field's, or each
// item's of a list.
func (pol *Policy) valueSchema(t reflect.Type, rules []string) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := map[string]any{}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		p["type"] = "integer"
	case reflect.Float32, reflect.Float64:
		p["type"] = "number"
	case reflect.Bool:
		p["type"] = "boolean"
	default:
		p["type"] = "string"
	}
	isString := t.Kind() == reflect.String
	for _, rule := range rules {
		name, param, _ := strings.Cut(rule, "=")
		switch name {
		case "min", "max":
			n, err := strconv.ParseInt(param, 10, 64)
			var v any = n
			if err != nil {
				f, _ := strconv.ParseFloat(param, 64)
				v = f
			}
			key := map[string]string{"min": "minimum", "max": "maximum"}[name]
			if isString {
				key = map[string]string{"min": "minLength", "max": "maxLength"}[name]
			}
			p[key] = v
		case "oneof":
			p["enum"] = strings.Fields(param)
		case "datetime":
			p["format"] = "date"
		case "numeric":
			p["pattern"] = "^[0-9]+$"
		case "startswith":
			p["pattern"] = "^" + regexpQuote(param)
		default:
			// A sealed arg's pattern is the front door's to meet, not the
			// model's: the model passes the factor as the caller said it.
			if f, ok := pol.formats[name]; ok && name != SealedTag {
				p["pattern"] = f.Pattern.String()
			}
		}
	}
	return p
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
