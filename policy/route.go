package policy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/toolgate/toolgate/toolargs"
)

// route is one approver's When rule, compiled once when the pack loads.
// CEL (github.com/google/cel-go) is evaluated without clock, randomness or
// I/O, and within a cost bound, so the same call routes the same way on
// every worker and in every replay.
type route struct {
	expr string
	prog cel.Program
}

// routeCost bounds one rule's evaluation: a rule is a comparison or two,
// never a loop over large data.
const routeCost = 10_000

// routeEnv is the environment every rule is compiled in: the call's
// canonical args as a map, and its value.
var routeEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)), cel.Variable("value", cel.IntType))
	if err != nil {
		panic(err) // a fixed declaration: it cannot fail at run time
	}
	return env
}()

// compile works out, once, what the chain needs of an entry's spec and row:
// the value arg's field and the approvers' rules. A rule that does not
// compile to a bool, or a value arg that is not a required integer, stops
// the pack from loading.
func (e *entry) compile() error {
	if a := e.spec.ValueArg; a != "" {
		if e.spec.DryRun {
			return fmt.Errorf("ValueArg %q and DryRun both give the value; keep one", a)
		}
		f, ok := fieldByName(e.spec.Args, a)
		if !ok || !toolargs.IsInt(f.Type) || !requiredRule(f.Validate) {
			return fmt.Errorf("ValueArg %q must name a required integer arg", a)
		}
		if min, ok := ruleParam(f.Validate, "min"); !ok || min < 0 {
			return fmt.Errorf("ValueArg %q must not be negative: give it a minimum of 0 or more", a)
		}
		e.value = f.Index
	}
	for _, a := range e.row.Approvers {
		if a.When == "" {
			e.routes = append(e.routes, nil)
			continue
		}
		ast, iss := routeEnv.Compile(a.When)
		if iss.Err() != nil {
			return fmt.Errorf("the approver rule %q for %s: %w", a.When, a.Role, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			return fmt.Errorf("the approver rule %q for %s is a %s, not true or false", a.When, a.Role, ast.OutputType())
		}
		prog, err := routeEnv.Program(ast, cel.CostLimit(routeCost))
		if err != nil {
			return fmt.Errorf("the approver rule %q for %s: %w", a.When, a.Role, err)
		}
		e.routes = append(e.routes, &route{expr: a.When, prog: prog})
	}
	return nil
}

// approverFor is the role that decides a card of this value and these
// args: the first approver whose bound covers the value and whose rule
// holds. A rule that cannot be evaluated is an error: the call is refused,
// never routed to whoever comes next.
func (e *entry) approverFor(value int64, args any) (Role, bool, error) {
	i, err := e.approverFrom(0, "", false, value, args)
	if err != nil || i < 0 {
		return "", false, err
	}
	return e.row.Approvers[i].Role, true, nil
}

// escalationFor is the role an unanswered card routed to role is also
// offered to: the next approver after it, of another role, whose bound
// and rule would have taken the card; a card a rule routed escalates only
// to an approver whose own rule holds too (a chargeback that goes to fraud
// officers never falls through to whoever handles the rest). "" when
// there is none.
func (e *entry) escalationFor(role Role, value int64, args any) Role {
	from := slices.IndexFunc(e.row.Approvers, func(a Approver) bool { return a.Role == role })
	if from < 0 {
		return ""
	}
	i, err := e.approverFrom(from+1, role, e.row.Approvers[from].When != "", value, args)
	if err != nil || i < 0 {
		return ""
	}
	return e.row.Approvers[i].Role
}

// approverFrom is the index of the first approver from start on, of
// another role than skip (and with a rule, when ruled), whose bound covers
// the value and whose rule holds; -1 when none does.
func (e *entry) approverFrom(start int, skip Role, ruled bool, value int64, args any) (int, error) {
	var vars map[string]any
	for i := start; i < len(e.row.Approvers); i++ {
		a := e.row.Approvers[i]
		if a.Role == skip || ruled && a.When == "" {
			continue
		}
		if a.UpToCents != 0 && value > a.UpToCents {
			continue
		}
		if i < len(e.routes) && e.routes[i] != nil {
			if vars == nil {
				vars = map[string]any{"args": argsMap(args), "value": value}
			}
			out, _, err := e.routes[i].prog.Eval(vars)
			if err != nil {
				return -1, fmt.Errorf("the rule %q: %w", e.routes[i].expr, err)
			}
			holds, ok := out.Value().(bool)
			if !ok {
				return -1, errors.New("the rule " + e.routes[i].expr + " is not true or false")
			}
			if !holds {
				continue
			}
		}
		return i, nil
	}
	return -1, nil
}

// argsMap is decoded args as CEL reads them: each present field by its
// JSON name (strings, integers, booleans), absent fields left out, so a
// rule asks has(args.x) of an optional one.
func argsMap(args any) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return out
	}
	for _, f := range toolargs.Fields(v.Type()) {
		fv := v.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		switch fv.Kind() {
		case reflect.String:
			if fv.String() != "" {
				out[f.Name] = fv.String()
			}
		case reflect.Int, reflect.Int32, reflect.Int64:
			out[f.Name] = fv.Int()
		case reflect.Bool:
			out[f.Name] = fv.Bool()
		}
	}
	return out
}

// intAt reads the integer field at index of decoded args.
func intAt(args any, index []int) (int64, bool) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	f := v.Elem().FieldByIndex(index)
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return 0, false
		}
		f = f.Elem()
	}
	if !f.CanInt() {
		return 0, false
	}
	return f.Int(), true
}

func fieldByName(t reflect.Type, name string) (toolargs.Field, bool) {
	for _, f := range toolargs.Fields(t) {
		if f.Name == name {
			return f, true
		}
	}
	return toolargs.Field{}, false
}

// ruleParam is the integer parameter of a validate rule, e.g. min=1.
func ruleParam(validate, rule string) (int64, bool) {
	for _, r := range strings.Split(validate, ",") {
		if k, v, ok := strings.Cut(r, "="); ok && k == rule {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func requiredRule(validate string) bool {
	for _, r := range strings.Split(validate, ",") {
		if r == "required" {
			return true
		}
	}
	return false
}
