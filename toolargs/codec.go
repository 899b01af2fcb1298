// Package toolargs reads what a model sends as one tool's arguments: strictly
// decoded into the tool's Go args type and checked by its json, validate and
// desc tags (Decode), encoded canonically (Encode), and described as the JSON
// Schema a model is offered (Schema). A refusal is an ArgError, whole
// sentences naming the field, the rule and what to send instead. The common
// call takes a plan, the tags compiled once into data, and never reflection.
// It is the chain's step 3 and knows nothing of packs, roles or limits: pure
// Go, no I/O, no clock.
package toolargs

import (
	"reflect"
	"regexp"
	"sync"

	"github.com/go-playground/validator/v10"
)

// Format is a validate tag of a pack's own: a string field tagged with it must
// match Pattern, and Rule completes the refusal the model reads (Field "x"
// …), saying what a valid value looks like.
type Format struct {
	Tag     string
	Pattern *regexp.Regexp
	Rule    string
}

// SealedTag is the validate tag of a verification tool's factor arg: the
// caller seals the factor before the call is started, and the schema the
// model reads does not show the sealed reference's pattern.
const SealedTag = "sealed"

// BuiltinTags are the validate tags the validator and the schema already
// know; a format may not take one of their names.
var BuiltinTags = []string{"required", "required_without", SealedTag, "omitempty", "min", "max", "oneof", "numeric", "datetime", "startswith"}

// Tool is what the codec needs of a tool: its name, which its sentences
// name, and its args type, a struct.
type Tool struct {
	Name string
	Args reflect.Type
}

// A Codec decodes, checks, encodes and describes args with a set of formats.
// It is safe for concurrent use: its validator caches struct metadata and
// holds no state that changes a result, and each args type's plan is
// compiled once.
type Codec struct {
	formats map[string]Format
	v       *validator.Validate
	// plans holds each args type's plan (nil when it has none).
	plans sync.Map
}

// New returns a codec that knows formats, by tag.
func New(formats map[string]Format) *Codec {
	return &Codec{formats: formats, v: newValidator(formats)}
}

// IsInt reports whether t is a whole number the chain reads (int, int32,
// int64).
func IsInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// A Rule is one validate tag compiled for single values, as a resource ID
// is checked: the plan's rules where they know the tag, the validator's
// otherwise. The zero Rule allows everything.
type Rule struct {
	tag   string
	rules planRules
	fast  bool
	c     *Codec
}

// Rule compiles tag.
func (c *Codec) Rule(tag string) Rule {
	rules, fast := compileRules(tag, c.formats)
	return Rule{tag: tag, rules: rules, fast: fast, c: c}
}

// Tag is the rule's validate tag.
func (r Rule) Tag() string { return r.tag }

// AllowsInt reports whether n meets the rule.
func (r Rule) AllowsInt(n int64) bool {
	return r.tag == "" || r.fast && r.rules.passValue(kindInt, n, "", n == 0) || r.c.v.Var(n, r.tag) == nil
}

// AllowsString reports whether s meets the rule.
func (r Rule) AllowsString(s string) bool {
	return r.tag == "" || r.fast && r.rules.passValue(kindString, 0, s, s == "") || r.c.v.Var(s, r.tag) == nil
}

// Allows reports whether v meets the rule, by the validator alone.
func (r Rule) Allows(v any) bool {
	return r.tag == "" || r.c.v.Var(v, r.tag) == nil
}
