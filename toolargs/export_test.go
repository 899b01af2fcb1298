package toolargs

import "reflect"

// The internals the external tests (package toolargs_test) reach.

// CompilePlan compiles an args type's plan with no pack formats.
func CompilePlan(t reflect.Type) (*Plan, bool) { return compilePlan(t, nil) }

// PlanOf is the args type's plan, nil when it has none.
func (c *Codec) PlanOf(t reflect.Type) *Plan { return c.planOf(t) }

// Plan is a compiled args plan.
type Plan = plan

// Decode is the plan's decoder.
func (pl *Plan) Decode(t reflect.Type, b []byte) (any, bool) { return pl.decode(t, b) }

// Encode is the plan's encoder.
func (pl *Plan) Encode(args any) ([]byte, bool) { return pl.encode(args) }
