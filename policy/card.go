package policy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CardText is what a card says for a tool without a dry run: the exact
// action that would run, its canonical args field by field in the args'
// order, each under its schema title (its name when it has none) and the
// value arg written in the pack's unit, e.g. "replace_card · Account
// ACC-4471 · Reason stolen · Fee £25.00". Absent optional args are left
// out; a nested value, or a string that could read as more than itself,
// is written as its JSON. "" for an unknown tool or
// args that are not an object.
func (p *Policy) CardText(tool string, args json.RawMessage) string {
	spec, ok := p.specs[tool]
	if !ok {
		return ""
	}
	var named map[string]json.RawMessage
	if json.Unmarshal(args, &named) != nil || named == nil {
		return ""
	}
	parts := []string{tool}
	for _, f := range fieldsOf(spec.Args) {
		raw, ok := named[f.name]
		if !ok || string(raw) == "null" {
			continue
		}
		label := f.title
		if label == "" {
			label = f.name
		}
		var text string
		var n int64
		var s string
		switch {
		case f.name == spec.ValueArg && json.Unmarshal(raw, &n) == nil:
			text = p.FormatValue(tool, n)
		case json.Unmarshal(raw, &s) == nil && s != "" && s == strings.TrimSpace(s) && !strings.Contains(s, cardSeparator) && !strings.ContainsAny(s, "\n\r"):
			text = s
		default:
			text = string(raw)
		}
		parts = append(parts, fmt.Sprintf("%s %s", label, text))
	}
	return strings.Join(parts, cardSeparator)
}

// cardSeparator parts a card's fields. A string value that holds it, a
// line break or edge spaces, or is empty, is written as its JSON, so no
// value of the model's can pass for another field.
const cardSeparator = " · "
