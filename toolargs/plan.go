package toolargs

import (
	"encoding"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/sanitize"
)

// A plan is an args type's tags compiled once into data: the fields, their
// kinds and their rules. With it the common call decodes, validates and
// encodes in one pass over the bytes, without encoding/json's or the
// validator's reflection. The plan only ever says yes to input the reflective
// path (Decode's checkKeys, encoding/json, the validator) also accepts, with
// the same value; anything else (an escape, a null, a float, a failed rule)
// makes it give up, and the reflective path decides and words the refusal.
// FuzzPlanAgrees holds the two together.
type plan struct {
	fields []planField
}

type planKind uint8

const (
	kindString planKind = iota + 1
	kindInt             // int64 or int
	kindIntPtr          // *int64
)

type planField struct {
	name  string
	quote string // `"name":`, as encoding/json writes it
	index []int
	kind  planKind
	// omitEmpty is the json tag's: zero values are left out when encoding.
	omitEmpty bool
	redact    bool
	rules     planRules
}

// planRules are the validate tag's rules the plan understands.
type planRules struct {
	omitempty, required bool
	min, max            *int64
	oneof               []string
	numeric             bool
	// format is a pack's format (Pack.Formats) the value must match.
	format *regexp.Regexp
}

// planOf returns the args type's plan, or nil when it has none.
// Plans are the codec's, since a format is its packs'.
func (c *Codec) planOf(t reflect.Type) *plan {
	if p, ok := c.plans.Load(t); ok {
		return p.(*plan)
	}
	p, ok := compilePlan(t, c.formats)
	if !ok {
		p = nil
	}
	c.plans.Store(t, p)
	return p
}

// Encode is the canonical encoding of decoded args: encoding/json's
// Marshal, written by the plan when it can.
func (c *Codec) Encode(args any) ([]byte, error) {
	if t := reflect.TypeOf(args); t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		if p := c.planOf(t.Elem()); p != nil {
			if out, ok := p.encode(args); ok {
				return out, nil
			}
		}
	}
	return json.Marshal(args)
}

// compilePlan compiles an args type, or reports false when a field's kind or
// a rule is one the plan does not know (that type always takes the
// reflective path).
func compilePlan(t reflect.Type, formats map[string]Format) (*plan, bool) {
	for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return nil, false
		}
	}
	p := &plan{}
	if !p.add(t, nil, formats) {
		return nil, false
	}
	if len(p.fields) > 64 {
		return nil, false // duplicates are tracked in one 64-bit word
	}
	return p, true
}

func (p *plan) add(t reflect.Type, prefix []int, formats map[string]Format) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		index := append(append([]int(nil), prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if !p.add(f.Type, index, formats) {
				return false
			}
			continue
		}
		name := jsonName(f)
		if name == "" || !f.IsExported() {
			if f.Tag.Get("validate") != "" {
				return false // the validator checks fields JSON never fills
			}
			continue
		}
		if p.field([]byte(name)) >= 0 {
			return false // encoding/json's rules for clashing names are not the plan's
		}
		pf := planField{name: name, quote: strconv.Quote(name) + ":", index: index, redact: f.Tag.Get("redact") == "pii"}
		_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		pf.omitEmpty = opts == "omitempty"
		if opts != "" && opts != "omitempty" {
			return false
		}
		// Only the predeclared types: a named one could bring its own
		// (un)marshalling.
		switch f.Type {
		case reflect.TypeFor[string]():
			pf.kind = kindString
		case reflect.TypeFor[int64](), reflect.TypeFor[int]():
			pf.kind = kindInt
		case reflect.TypeFor[*int64]():
			pf.kind = kindIntPtr
		default:
			return false
		}
		if pf.redact && pf.kind != kindString {
			return false
		}
		rules, ok := compileRules(f.Tag.Get("validate"), formats)
		if !ok {
			return false
		}
		pf.rules = rules
		p.fields = append(p.fields, pf)
	}
	return true
}

func compileRules(tag string, formats map[string]Format) (planRules, bool) {
	var r planRules
	if tag == "" {
		return r, true
	}
	for _, rule := range strings.Split(tag, ",") {
		key, param, hasParam := strings.Cut(rule, "=")
		switch {
		case key == "omitempty" && !hasParam:
			r.omitempty = true
		case key == "required" && !hasParam:
			r.required = true
		case key == "numeric" && !hasParam:
			r.numeric = true
		case !hasParam && formats[key].Pattern != nil:
			r.format = formats[key].Pattern
		case key == "oneof" && hasParam:
			r.oneof = strings.Fields(param)
		case (key == "min" || key == "max") && hasParam:
			n, err := strconv.ParseInt(param, 10, 64)
			if err != nil {
				return r, false
			}
			if key == "min" {
				r.min = &n
			} else {
				r.max = &n
			}
		default:
			return r, false
		}
	}
	return r, true
}

// decode reads trimmed (one JSON object, already bounded, trimmed and valid
// UTF-8) into a new value of t. It returns nil, false when it gives up.
func (p *plan) decode(t reflect.Type, b []byte) (any, bool) {
	i := skipWS(b, 1)
	ptr := reflect.New(t)
	elem := ptr.Elem()
	var seen uint64
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			key, next, ok := plainString(b, i)
			if !ok {
				return nil, false
			}
			fi := p.field(key)
			if fi < 0 || seen&(1<<fi) != 0 {
				return nil, false
			}
			seen |= 1 << fi
			i = skipWS(b, next)
			if i >= len(b) || b[i] != ':' {
				return nil, false
			}
			i = skipWS(b, i+1)
			f := &p.fields[fi]
			if i, ok = f.set(elem, b, i); !ok {
				return nil, false
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return nil, false
		}
	}
	if skipWS(b, i) != len(b) {
		return nil, false
	}
	for fi := range p.fields {
		f := &p.fields[fi]
		v := elem.FieldByIndex(f.index)
		if !f.rules.pass(f.kind, v) {
			return nil, false
		}
		if f.redact {
			v.SetString(sanitize.Text(v.String()))
		}
	}
	return ptr.Interface(), true
}

func (p *plan) field(key []byte) int {
	for i := range p.fields {
		if p.fields[i].name == string(key) {
			return i
		}
	}
	return -1
}

// set reads one value at b[i:] into the field, returning the index after it.
func (f *planField) set(elem reflect.Value, b []byte, i int) (int, bool) {
	v := elem.FieldByIndex(f.index)
	switch f.kind {
	case kindString:
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		s, next, ok := plainString(b, i)
		if !ok {
			return 0, false
		}
		v.SetString(string(s))
		return next, true
	default:
		n, next, ok := plainInt(b, i)
		if !ok {
			return 0, false
		}
		if f.kind == kindIntPtr {
			p := new(int64)
			*p = n
			v.Set(reflect.ValueOf(p))
		} else {
			v.SetInt(n)
		}
		return next, true
	}
}

// pass applies the rules as the validator does, on the kinds the plan
// allows; a value the plan cannot be sure of fails, and the reflective
// path decides.
func (r *planRules) pass(kind planKind, v reflect.Value) bool {
	var n int64
	var s string
	zero := false
	switch kind {
	case kindString:
		s = v.String()
		zero = s == ""
	case kindInt:
		n = v.Int()
		zero = n == 0
	case kindIntPtr:
		if v.IsNil() {
			return !r.required
		}
		n = v.Elem().Int()
		if n == 0 {
			return false // a pointer to zero: leave the validator's rules for it to the validator
		}
	}
	return r.passValue(kind, n, s, zero)
}

// passValue is pass on the value itself: n for an integer kind, s for a
// string, zero when it is its kind's zero value.
func (r *planRules) passValue(kind planKind, n int64, s string, zero bool) bool {
	if zero && r.omitempty {
		return true
	}
	if zero && r.required {
		return false
	}
	size := n
	if kind == kindString {
		size = int64(utf8.RuneCountInString(s))
	}
	if r.min != nil && size < *r.min || r.max != nil && size > *r.max {
		return false
	}
	if r.oneof != nil {
		if kind != kindString {
			return false
		}
		found := false
		for _, o := range r.oneof {
			found = found || o == s
		}
		if !found {
			return false
		}
	}
	if r.numeric && (kind != kindString || !allDigits(s)) {
		return false
	}
	if r.format != nil && (kind != kindString || !r.format.MatchString(s)) {
		return false
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] (the quote) that needs no
// unescaping: no backslash, no control character.
func plainString(b []byte, i int) ([]byte, int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainInt reads a JSON integer of at most 18 digits: no fraction, no
// exponent, no leading zero, so it fits int64 without overflow checks.
func plainInt(b []byte, i int) (int64, int, bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || digits > 1 && b[start] == '0' {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, i, true
}

// encode writes args (a pointer to the plan's type) as encoding/json's
// Marshal would, or reports false when a value needs escaping (the caller
// then uses encoding/json).
func (p *plan) encode(args any) ([]byte, bool) {
	elem := reflect.ValueOf(args).Elem()
	out := make([]byte, 0, 128)
	out = append(out, '{')
	first := true
	for fi := range p.fields {
		f := &p.fields[fi]
		v := elem.FieldByIndex(f.index)
		var s string
		var n int64
		present := true
		switch f.kind {
		case kindString:
			s = v.String()
			present = s != "" || !f.omitEmpty
			if !plainJSON(s) {
				return nil, false
			}
		case kindInt:
			n = v.Int()
			present = n != 0 || !f.omitEmpty
		case kindIntPtr:
			if v.IsNil() {
				if !f.omitEmpty {
					return nil, false
				}
				present = false
			} else {
				n = v.Elem().Int()
			}
		}
		if !present {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, f.quote...)
		if f.kind == kindString {
			out = append(out, '"')
			out = append(out, s...)
			out = append(out, '"')
		} else {
			out = strconv.AppendInt(out, n, 10)
		}
	}
	return append(out, '}'), true
}

// plainJSON reports whether encoding/json writes s between quotes as it is:
// no quote, backslash, control character, HTML-escaped <, > or &, nor
// U+2028 or U+2029 (s is valid UTF-8, as decoding left it).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
			return false
		}
	}
	return utf8.ValidString(s)
}
