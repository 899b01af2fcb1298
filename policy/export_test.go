package policy

import "reflect"

// The internals the external tests (package policy_test) reach.
var ACRRank = acrRank

// FieldView is one JSON field of an args type, as the chain reads it.
type FieldView struct {
	Name, Desc, Validate string
	Typ                  reflect.Type
}

// FieldsOf lists the JSON fields of an args type.
func FieldsOf(t reflect.Type) []FieldView {
	var out []FieldView
	for _, f := range fieldsOf(t) {
		out = append(out, FieldView{Name: f.name, Desc: f.desc, Validate: f.validate, Typ: f.typ})
	}
	return out
}

// CompilePlan compiles an args type's plan with no pack formats.
func CompilePlan(t reflect.Type) (*Plan, bool) { return compilePlan(t, nil) }

// FieldNames lists an args type's JSON field names.
func FieldNames(t reflect.Type) []string {
	var out []string
	for _, f := range fieldsOf(t) {
		out = append(out, f.name)
	}
	return out
}

// DecodeReflective is Decode without the plan: the oracle it is tested against.
func (p *Policy) DecodeReflective(spec ToolSpec, raw []byte) (any, error) {
	return p.decode(spec, raw, false)
}

// PlanOf is the args type's plan, nil when it has none.
func (p *Policy) PlanOf(t reflect.Type) *Plan { return p.planOf(t) }

// EncodeArgs is the canonical encoding of decoded args.
func (p *Policy) EncodeArgs(args any) ([]byte, error) { return p.encodeArgs(args) }

// Plan is a compiled args plan.
type Plan = plan

// Decode is the plan's decoder.
func (pl *Plan) Decode(t reflect.Type, b []byte) (any, bool) { return pl.decode(t, b) }

// Encode is the plan's encoder.
func (pl *Plan) Encode(args any) ([]byte, bool) { return pl.encode(args) }

// IsDecimal reports whether s is n as strconv.FormatInt writes it.
var IsDecimal = isDecimal
