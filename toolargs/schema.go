package toolargs

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Schema derives a JSON Schema (draft 2020-12 subset) from an args struct's
// json, validate and desc tags, a pack's format as its pattern. A list's
// rules before dive bound its items' count, those after it each item.
// additionalProperties is always false.
func (c *Codec) Schema(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	fs := Fields(t)
	for _, f := range fs {
		rules, itemRules, listed := strings.Split(f.Validate, ","), []string(nil), f.Type.Kind() == reflect.Slice
		if i := slices.Index(rules, "dive"); i >= 0 {
			rules, itemRules = rules[:i], rules[i+1:]
		}
		var p map[string]any
		if listed {
			p = map[string]any{"type": "array", "items": c.valueSchema(f.Type.Elem(), itemRules)}
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
			p = c.valueSchema(f.Type, rules)
		}
		if f.Desc != "" {
			p["description"] = f.Desc
		}
		for _, rule := range rules {
			name, param, _ := strings.Cut(rule, "=")
			switch name {
			case "required":
				required = append(required, f.Name)
			case "required_without":
				// Model providers refuse anyOf at a tool schema's top level,
				// so the rule is said where the model reads each field.
				if o, ok := sibling(f, param, fs); ok {
					p["description"] = strings.TrimSpace(f.Desc + " Required when " + o.Name + " is left out.")
				}
			}
		}
		if f.Title != "" {
			p["title"] = f.Title
		}
		if f.Default != "" && !listed {
			n, nerr := strconv.ParseInt(f.Default, 10, 64)
			b, berr := strconv.ParseBool(f.Default)
			switch {
			case nerr == nil && p["type"] == "integer":
				p["default"] = n
			case berr == nil && p["type"] == "boolean":
				p["default"] = b
			default:
				p["default"] = f.Default
			}
		}
		props[f.Name] = p
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
func (c *Codec) valueSchema(t reflect.Type, rules []string) map[string]any {
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
			if f, ok := c.formats[name]; ok && name != SealedTag {
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
