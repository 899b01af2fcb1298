package toolargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/sentences"
)

// MaxArgsBytes bounds the raw args a model may send.
const MaxArgsBytes = 16 << 10

// newValidator builds a codec's validator: safe for concurrent use, it
// caches struct metadata and holds no state that changes a result, so
// sharing it keeps decoding deterministic. It knows the packs' formats.
func newValidator(formats map[string]Format) *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string { return jsonName(f) })
	for tag, f := range formats {
		pattern := f.Pattern
		_ = v.RegisterValidation(tag, func(fl validator.FieldLevel) bool { return pattern.MatchString(fl.Field().String()) })
	}
	return v
}

// Check refuses, at start, an args type the chain could not judge: a
// validate rule that is neither built in nor a pack's format (the
// validator would panic on it at the first call, and the schema the model
// sees would not say it), or a format on a field that is not a string.
func (c *Codec) Check(spec Tool) error {
	if spec.Args.Kind() != reflect.Struct {
		return fmt.Errorf("its args type %s is not a struct", spec.Args)
	}
	fs := Fields(spec.Args)
	for _, f := range fs {
		if f.Validate == "" {
			continue
		}
		rules, itemRules := strings.Split(f.Validate, ","), []string(nil)
		if i := slices.Index(rules, "dive"); i >= 0 {
			if f.Type.Kind() != reflect.Slice {
				return fmt.Errorf("field %q: the rule dive is for lists, not %s", f.Name, f.Type)
			}
			rules, itemRules = rules[:i], rules[i+1:]
		}
		for _, rule := range rules {
			if err := c.checkRule(f, rule, fs); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
		}
		if f.Type.Kind() == reflect.Slice {
			item := f
			item.Type = f.Type.Elem()
			for _, rule := range itemRules {
				if err := c.checkRule(item, rule, nil); err != nil {
					return fmt.Errorf("field %q, each item: %w", f.Name, err)
				}
			}
		}
	}
	return nil
}

// checkRule refuses a rule the validator would panic on at the first call
// (a missing or non-numeric parameter, a rule on a kind it does not take),
// and a required_without naming no sibling field of fs.
func (c *Codec) checkRule(f Field, rule string, fs []Field) error {
	key, param, hasParam := strings.Cut(rule, "=")
	str, num := f.Type.Kind() == reflect.String, IsInt(f.Type)
	real, list := f.Type.Kind() == reflect.Float64, f.Type.Kind() == reflect.Slice
	switch key {
	case "required", "omitempty", "omitnil":
		if hasParam {
			return fmt.Errorf("the rule %q takes no parameter", key)
		}
	case "required_without":
		if _, ok := sibling(f, param, fs); !ok {
			return fmt.Errorf("the rule %q needs the Go name of another field of the same struct, e.g. required_without=City, not %q", key, param)
		}
	case "min", "max":
		if _, err := strconv.ParseFloat(param, 64); real && hasParam && err == nil {
			return nil
		}
		if _, err := strconv.ParseInt(param, 10, 64); !hasParam || err != nil {
			return fmt.Errorf("the rule %q needs a whole number, e.g. %s=1", key, key)
		}
		if !str && !num && !list {
			return fmt.Errorf("the rule %q bounds a string's length, a list's items or a number, not %s", key, f.Type)
		}
	case "oneof", "datetime", "startswith":
		if !hasParam || strings.TrimSpace(param) == "" {
			return fmt.Errorf("the rule %q needs a parameter", key)
		}
		if !str {
			return fmt.Errorf("the rule %q is for strings, not %s", key, f.Type)
		}
	case "numeric":
		if hasParam || !str {
			return fmt.Errorf("the rule %q takes no parameter and is for strings", key)
		}
	default:
		if _, ok := c.formats[key]; !ok {
			return fmt.Errorf("the rule %q is neither built in (%s) nor one of the packs' formats", key, strings.Join(BuiltinTags, ", "))
		}
		if hasParam || !str {
			return fmt.Errorf("the format %q takes no parameter and is for strings", key)
		}
	}
	return nil
}

// Decode strictly decodes raw args into a new value of the tool's args type
// and validates it. Unknown fields (including case variants), duplicate
// fields, wrong types, trailing data and failed rules are errors whose text
// names the field, the rule and the allowed values.
func (c *Codec) Decode(spec Tool, raw json.RawMessage) (any, error) {
	return c.decode(spec, raw, true)
}

// DecodeReflective is Decode without the plan: the reflective path alone,
// the oracle FuzzPlanAgrees holds the plan to.
func (c *Codec) DecodeReflective(spec Tool, raw json.RawMessage) (any, error) {
	return c.decode(spec, raw, false)
}

// decode is Decode, with the plan when usePlan says so.
func (c *Codec) decode(spec Tool, raw json.RawMessage, usePlan bool) (any, error) {
	fields := Fields(spec.Args)
	if len(raw) > MaxArgsBytes {
		return nil, argError(sentences.ArgsTooLong, len(raw), MaxArgsBytes, listFields(fields))
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if !utf8.Valid(trimmed) {
		return nil, argError(sentences.ArgsNotUTF8)
	}
	if trimmed[0] != '{' {
		return nil, argError(sentences.ArgsNotAnObject, listFields(fields), example(spec))
	}
	if pl := c.planOf(spec.Args); pl != nil && usePlan {
		if v, ok := pl.decode(spec.Args, trimmed); ok {
			return v, nil
		}
	}
	if err := checkKeys(trimmed, fields); err != nil {
		return nil, err
	}
	ptr := reflect.New(spec.Args)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ptr.Interface()); err != nil {
		return nil, describeDecodeError(err, fields)
	}
	if err := c.v.Struct(ptr.Interface()); err != nil {
		return nil, c.describeValidation(err, spec)
	}
	redactFields(ptr.Elem())
	return ptr.Interface(), nil
}

// redactFields passes every string field tagged redact:"pii" (free text a
// person reads, such as a task's note) through the sanitizer, so the
// verdict, the card, the audit row, the history and the upstream all hold
// the redacted text.
func redactFields(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			redactFields(f)
		case sf.Tag.Get("redact") == "pii" && f.Kind() == reflect.String:
			f.SetString(sanitize.Text(f.String()))
		}
	}
}

// checkKeys rejects keys that are not exact field names and keys given
// twice; encoding/json would otherwise match case-insensitively and keep the
// last duplicate.
func checkKeys(raw []byte, fields []Field) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return argError(sentences.ArgsNotOneObject, err)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return argError(sentences.ArgsNotJSON, err)
		}
		key, _ := t.(string)
		if !slices.ContainsFunc(fields, func(f Field) bool { return f.Name == key }) {
			return argError(sentences.UnknownField, Clip(key), listFields(fields), Clip(key))
		}
		if seen[key] {
			return argError(sentences.FieldTwice, key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return argError(sentences.ValueNotJSON, key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return argError(sentences.ArgsNotJSONAgain, err)
	}
	if dec.More() {
		return argError(sentences.ExtraData)
	}
	return nil
}

func describeDecodeError(err error, fields []Field) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		name := te.Field
		if i := strings.LastIndex(name, "."); i >= 0 {
			name = name[i+1:]
		}
		want := sentences.Say(sentences.SomeOtherType)
		for _, f := range fields {
			if f.Name == name {
				want = f.Kind
			}
		}
		return argError(sentences.FieldWrongType, name, want, te.Value, name)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return argError(sentences.ArgsSyntax, se, se.Offset)
	}
	return argError(sentences.ArgsUnread, err, listFields(fields))
}

func (c *Codec) describeValidation(err error, spec Tool) error {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) || len(verrs) == 0 {
		return argError(sentences.ArgsInvalid, err)
	}
	fe := verrs[0]
	name := fe.Field()
	var rule string
	switch fe.Tag() {
	case "required":
		rule = sentences.Say(sentences.RuleRequired)
	case "required_without":
		other := fe.Param()
		for _, f := range Fields(spec.Args) {
			if f.GoName == fe.Param() {
				other = f.Name
			}
		}
		return argError(sentences.OneOfTwoRequired, name, other, spec.Name)
	case "min":
		switch fe.Kind() {
		case reflect.String:
			rule = sentences.Say(sentences.RuleMinLength, fe.Param())
		case reflect.Slice:
			rule = sentences.Say(sentences.RuleMinItems, fe.Param())
		default:
			rule = sentences.Say(sentences.RuleMin, fe.Param())
		}
	case "max":
		switch fe.Kind() {
		case reflect.String:
			rule = sentences.Say(sentences.RuleMaxLength, fe.Param())
		case reflect.Slice:
			rule = sentences.Say(sentences.RuleMaxItems, fe.Param())
		default:
			rule = sentences.Say(sentences.RuleMax, fe.Param())
		}
	case "oneof":
		rule = sentences.Say(sentences.RuleOneOf, strings.Join(strings.Fields(fe.Param()), ", "))
	case "datetime":
		rule = sentences.Say(sentences.RuleDate)
	case "numeric":
		rule = sentences.Say(sentences.RuleCursor)
	case "startswith":
		rule = sentences.Say(sentences.RuleStartsWith, fe.Param())
	default:
		rule = sentences.Say(sentences.RuleOther, fe.Tag())
		if f, ok := c.formats[fe.Tag()]; ok {
			rule = f.Rule
		}
	}
	return argError(sentences.FieldBreaksRule, name, rule, name, spec.Name)
}

// Field is one JSON field of an args struct, as its tags describe it.
type Field struct {
	// Name is the field's JSON name; Kind says its type in words ("a whole
	// number"); Desc, Validate, Default and Title are its desc, validate,
	// default and title tags.
	Name, Kind, Desc, Validate, Default, Title string
	// Type is the field's type (a pointer's element).
	Type reflect.Type
	// Index finds the field in the args struct (through embedded ones).
	Index []int
	// GoName is the struct field's own name, as validate rules that name
	// another field (required_without) name it.
	GoName string
}

// sibling finds the field of fs whose Go name is goName in the same struct
// as f (the one the validator looks in), other than f.
func sibling(f Field, goName string, fs []Field) (Field, bool) {
	for _, o := range fs {
		if o.GoName == goName && o.GoName != f.GoName && slices.Equal(o.Index[:len(o.Index)-1], f.Index[:len(f.Index)-1]) {
			return o, true
		}
	}
	return Field{}, false
}

// fieldCache holds Fields per args type; types never change at run time.
var fieldCache sync.Map

// Fields lists the JSON fields of an args struct, flattening embedded structs.
func Fields(t reflect.Type) []Field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]Field)
	}
	f := collectFields(t, nil)
	fieldCache.Store(t, f)
	return f
}

func collectFields(t reflect.Type, prefix []int) []Field {
	var out []Field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		index := append(append([]int(nil), prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, collectFields(f.Type, index)...)
			continue
		}
		name := jsonName(f)
		if name == "" || !f.IsExported() {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, Field{Name: name, Kind: kindWords(ft), Desc: f.Tag.Get("desc"), Validate: f.Tag.Get("validate"), Default: f.Tag.Get("default"), Title: f.Tag.Get("title"), Type: ft, Index: index, GoName: f.Name})
	}
	return out
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

func kindWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return sentences.Say(sentences.KindWhole)
	case reflect.Float32, reflect.Float64:
		return sentences.Say(sentences.KindNumber)
	case reflect.Bool:
		return sentences.Say(sentences.KindBool)
	case reflect.String:
		return sentences.Say(sentences.KindString)
	case reflect.Slice:
		return sentences.Say(sentences.KindList, kindWords(t.Elem()))
	}
	return sentences.Say(sentences.KindOther, t.Kind().String())
}

func listFields(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func example(spec Tool) string {
	parts := []string{}
	for _, f := range Fields(spec.Args) {
		if !strings.Contains(f.Validate, "required") {
			continue
		}
		switch f.Type.Kind() {
		case reflect.String:
			parts = append(parts, fmt.Sprintf("%q: \"...\"", f.Name))
		default:
			parts = append(parts, fmt.Sprintf("%q: 1", f.Name))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Clip keeps a hostile string from flooding a message: at most 40
// characters, marked where cut.
func Clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	r := []rune(s)
	if len(r) > 40 {
		r = r[:40]
	}
	return string(r) + "…"
}

// ArgError is a model-facing explanation of why args were refused: whole
// sentences naming the field, the rule and what to send instead.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return e.Msg }

func argError(k sentences.Key, params ...any) error {
	return &ArgError{Msg: sentences.Say(k, params...)}
}

// RedactPII returns args with the free-text fields tagged redact:"pii"
// passed through the sanitizer, for clients to apply before they start a
// call, so not even the workflow's input holds a phone number or an e-mail
// address in a task's note. Args that are not an object of the tool's
// fields come back unchanged: the chain refuses them anyway.
func RedactPII(spec Tool, args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&obj) != nil {
		return args
	}
	changed := false
	t := spec.Args
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Tag.Get("redact") != "pii" {
			continue
		}
		name := jsonName(sf)
		var s string
		if raw, ok := obj[name]; ok && json.Unmarshal(raw, &s) == nil {
			if clean := sanitize.Text(s); clean != s {
				obj[name], _ = json.Marshal(clean)
				changed = true
			}
		}
	}
	if !changed || checkKeys(bytes.TrimSpace(args), Fields(t)) != nil {
		return args
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return args
	}
	return out
}
