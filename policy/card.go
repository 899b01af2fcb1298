package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/toolgate/toolgate/toolargs"
)

// CardText is what a card says for a tool without a dry run: the exact
// action that would run, its canonical args field by field in the args'
// order, each under its schema title (its name when it has none) and the
// value arg written in the pack's unit, e.g. "replace_card · Account
// ACC-4471 · Reason stolen · Fee £25.00". Absent optional args are left
// out; a nested value is written as its JSON and a string as CardValue
// writes it. "" for an unknown tool or args that are not an object.
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
	for _, f := range toolargs.Fields(spec.Args) {
		raw, ok := named[f.Name]
		if !ok || string(raw) == "null" {
			continue
		}
		label := f.Title
		if label == "" {
			label = f.Name
		}
		var text string
		var n int64
		var s string
		switch {
		case f.Name == spec.ValueArg && json.Unmarshal(raw, &n) == nil:
			text = p.FormatValue(tool, n)
		case json.Unmarshal(raw, &s) == nil:
			text = CardValue(s)
		default:
			text = CardJSON(string(raw))
		}
		parts = append(parts, fmt.Sprintf("%s %s", label, text))
	}
	return strings.Join(parts, cardSeparator)
}

// cardSeparator parts a card's fields. No value holds it: a string value
// that could read as more than itself is written by CardValue as its JSON,
// the separator's dot escaped.
const cardSeparator = " · "

// CardFields splits a card's text into its fields, for a page that shows
// each as its own element.
func CardFields(card string) []string { return strings.Split(card, cardSeparator) }

// CardValue is how a card shows a string it did not write (an arg, an
// upstream's answer): as it is when every character reads as itself, and
// otherwise as its JSON with each character that may not escaped (\uXXXX),
// so no value passes for another field, a line of its own, or reverses the
// fields after it. A value may not be empty or start or end with a space;
// it may not hold a character that is not graphic (a control, format,
// line or paragraph separator, private-use or unassigned one: U+2028 and
// the bidi overrides among them), a space other than U+0020, or a dot that
// passes for the separator's; nor start with a combining mark, which would
// join the space before it.
func CardValue(s string) string {
	if s != "" && s == strings.TrimSpace(s) && !strings.ContainsFunc(s, posing) && !startsWithMark(s) {
		return s
	}
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = appendShown(b, r)
		}
	}
	return string(append(b, '"'))
}

// CardJSON is how a card shows a JSON text it did not write: each character
// CardValue would not show as it is, escaped; the same JSON. Outside its
// strings a JSON text holds ASCII alone, so only its strings change.
func CardJSON(text string) string {
	if !strings.ContainsFunc(text, posing) {
		return text
	}
	var b []byte
	for _, r := range text {
		b = appendShown(b, r)
	}
	return string(b)
}

// appendShown appends r, or its \u escape (a surrogate pair past U+FFFF)
// when it is posing.
func appendShown(b []byte, r rune) []byte {
	switch {
	case !posing(r):
		return utf8.AppendRune(b, r)
	case r > 0xffff:
		hi, lo := utf16.EncodeRune(r)
		return appendEscape(appendEscape(b, hi), lo)
	default:
		return appendEscape(b, r)
	}
}

func appendEscape(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// posing reports whether r could make a value read as more than itself.
func posing(r rune) bool {
	return !unicode.IsGraphic(r) || r != ' ' && unicode.Is(unicode.Zs, r) || slices.Contains(separatorDots, r)
}

// separatorDots are the middle dot of cardSeparator and the dots that pass
// for it.
var separatorDots = []rune{'\u00b7', '\u0387', '\u1427', '\u16eb', '\u2022', '\u2024', '\u2027', '\u2219', '\u22c5',
	'\u2981', '\u2e31', '\u2e33', '\u30fb', '\u318d', '\ua78f', '\uff65', '\U00010101'}

func startsWithMark(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.Is(unicode.M, r)
}
