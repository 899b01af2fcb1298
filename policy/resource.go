package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/toolargs"
)

// Resources are what a credential grants, by kind: {"portal": ["PRT-40122"]}.
// A call that names a resource of a kind acts on it only when the session
// holds it (step 5). IDs are strings whatever the pack's args hold.
type Resources map[string][]string

// Holds reports whether id of kind is among the resources.
func (r Resources) Holds(kind, id string) bool { return slices.Contains(r[kind], id) }

// first is the first resource of kind, "" when there is none.
func (r Resources) first(kind string) string {
	if ids := r[kind]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// Count is how many resources there are, over every kind.
func (r Resources) Count() int {
	n := 0
	//workflowcheck:ignore a sum is the same in any order
	for _, ids := range r {
		n += len(ids)
	}
	return n
}

// Clone copies the resources, so the copy can change alone.
func (r Resources) Clone() Resources {
	if r == nil {
		return nil
	}
	out := make(Resources, len(r))
	for k, ids := range r {
		out[k] = slices.Clone(ids)
	}
	return out
}

// Labels are the resources as "kind/id", the form one SQL compare matches a
// row's pair against (kinds hold no '/', IDs no '/'), sorted.
func (r Resources) Labels() []string {
	out := []string{}
	for _, kind := range sortedKinds(r) {
		for _, id := range r[kind] {
			out = append(out, kind+"/"+id)
		}
	}
	return out
}

// MaxResources bounds the resources a session or an approver may hold, over
// every kind.
const MaxResources = 64

// Problem says what is malformed in resources named field, or "". It runs
// on every call's session: a sound one costs no allocation.
func (r Resources) Problem(field string) string {
	if len(r) == 0 {
		return ""
	}
	sound, n := true, 0
	//workflowcheck:ignore a count and whether all are sound, the same in any order
	for kind, ids := range r {
		n += len(ids)
		sound = sound && kindOK(kind)
		for _, id := range ids {
			sound = sound && ValidID(id)
		}
	}
	if n > MaxResources {
		return fmt.Sprintf("%s lists %d resources; at most %d", field, n, MaxResources)
	}
	if sound {
		return ""
	}
	for _, kind := range sortedKinds(r) {
		ids := r[kind]
		if !kindName.MatchString(kind) {
			return fmt.Sprintf("%s has the kind %q; a kind is 1 to 32 lower-case letters, digits or _, starting with a letter", field, toolargs.Clip(kind))
		}
		for _, id := range ids {
			if !ValidID(id) {
				return fmt.Sprintf("%s.%s holds %q; an ID is 1 to %d letters, digits or . _ @ -", field, kind, toolargs.Clip(id), MaxIDLength)
			}
		}
	}
	return ""
}

// lookupKinds bounds the pack kinds sessionProblem looks up one by one
// before it ranges over the session's resources instead.
const lookupKinds = 8

// sessionProblem is s.problem() for the chain, which runs it on every call.
// Ranging over a map starts at a random place, which costs more than the
// rest of a decision, so the resources of the kinds the packs declare (a
// shape New checked) are looked up instead; only when that does not find
// every kind the session holds, or finds one unsound, does
// Resources.Problem judge them and word the refusal. It also returns the
// session's resources of kind (step 5's), looked up once.
func (p *Policy) sessionProblem(s *Session, kind string) (string, []string) {
	if why := s.idProblem(); why != "" {
		return why, nil
	}
	r := s.Resources
	held, found, n, sound := []string(nil), 0, 0, true
	if kind != "" {
		if ids, ok := r[kind]; ok {
			held, found, n, sound = ids, 1, len(ids), allValidIDs(ids)
		}
	}
	if len(p.kinds) <= lookupKinds {
		for i := 0; found < len(r) && i < len(p.kinds); i++ {
			if k := p.kinds[i]; k != kind {
				if ids, ok := r[k]; ok {
					found, n, sound = found+1, n+len(ids), sound && allValidIDs(ids)
				}
			}
		}
	}
	if found < len(r) || n > MaxResources || !sound {
		return r.Problem("session.resources"), held
	}
	return "", held
}

func allValidIDs(ids []string) bool {
	for _, id := range ids {
		if !ValidID(id) {
			return false
		}
	}
	return true
}

var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// kindOK is kindName without a regexp, for the hot path.
func kindOK(s string) bool {
	if len(s) < 1 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ResourceRef names the one resource a call acts on.
type ResourceRef struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// String writes the resource as "kind id", e.g. "portal PRT-40122"; "" for none.
func (r ResourceRef) String() string {
	if r.Kind == "" {
		return ""
	}
	return r.Kind + " " + r.ID
}

// ResourceKind is a kind of thing a pack's credentials grant (a portal,
// an account, a branch): how messages name it and which sign-in claim lists
// the ones a person holds.
type ResourceKind struct {
	// Name is the kind as sessions carry it, e.g. "portal".
	Name string
	// Plural names several in messages, e.g. "portals" (Name+"s" when empty).
	Plural string
	// Claim is the ID-token claim that lists a person's resources of this
	// kind, as strings or numbers, e.g. "toolgate_portals".
	Claim string
	// Conceal answers a resource the caller does not hold as not found,
	// naming none of theirs: nothing is said about whose it is.
	Conceal bool
	// Example is one valid ID, for docs and the pack test kit
	// (pack/packtest), e.g. "PRT-40122".
	Example string
}

func (k ResourceKind) plural() string {
	if k.Plural != "" {
		return k.Plural
	}
	return k.Name + "s"
}

// ResourceArg says which of a tool's args names the resource it acts on.
type ResourceArg struct {
	// Arg is the arg's JSON name, e.g. "portalRef". When the model leaves it
	// out, the session's first resource of Kind fills it.
	Arg string
	// Kind is one of the pack's ResourceKinds.
	Kind string
}

// resourcePlan is a tool's ResourceArg compiled against its args type.
type resourcePlan struct {
	kind  ResourceKind
	arg   string
	index []int
	// isInt says the arg holds a number, written in decimal as its ID.
	isInt bool
	// rule is the arg's validate rules but omitempty (presentRule), which
	// every ID must meet.
	rule toolargs.Rule
	// args is the pointer type Decode returns, and offset and direct where
	// and as what a value of it holds the arg (direct is 0 when the arg's
	// type is not one scopeAt knows): step 5 reads the arg on every call,
	// and reflect's walk to a field costs more than the rest of the step.
	args   reflect.Type
	offset uintptr
	direct directKind
	// Messages worded once, with the ID and the held list left to fill.
	noneHeld, invalid, notHeld string
}

// compileResource checks the tool's ResourceArg against its args and the
// pack's kinds.
func compileResource(spec ToolSpec, kinds []ResourceKind, codec *toolargs.Codec) (*resourcePlan, error) {
	ra := spec.Resource
	if ra.Arg == "" && ra.Kind == "" {
		return nil, nil
	}
	i := slices.IndexFunc(kinds, func(k ResourceKind) bool { return k.Name == ra.Kind })
	if i < 0 {
		return nil, fmt.Errorf("its resource arg %q is of kind %q, which the pack does not declare (Resources)", ra.Arg, ra.Kind)
	}
	f, ok := fieldByName(spec.Args, ra.Arg)
	if !ok {
		return nil, fmt.Errorf("its resource arg %q is not one of its args", ra.Arg)
	}
	t := f.Type // the field's type, a pointer's element
	if t.Kind() != reflect.String && !toolargs.IsInt(t) {
		return nil, fmt.Errorf("its resource arg %q must hold a string or an integer, not %s", ra.Arg, t)
	}
	// A string left out is "", which no ID is; a number left out must be a
	// nil pointer, to tell it from 0.
	if toolargs.IsInt(t) && spec.Args.FieldByIndex(f.Index).Type.Kind() != reflect.Pointer && !requiredRule(f.Validate) {
		return nil, fmt.Errorf("its resource arg %q may be left out, so it must be a pointer (to tell it from a zero value)", ra.Arg)
	}
	k := kinds[i]
	offset, direct := directField(spec.Args, f.Index)
	return &resourcePlan{kind: k, arg: ra.Arg, index: f.Index, isInt: toolargs.IsInt(t), rule: codec.Rule(presentRule(f.Validate)),
		args: reflect.PointerTo(spec.Args), offset: offset, direct: direct,
		noneHeld: sentences.Say(sentences.NoResourceHeld, k.Name),
		invalid:  sentences.Say(sentences.InvalidSessionResource, verbatim(k.Name), "%s"),
		notHeld:  sentences.Say(sentences.ResourceNotHeld, verbatim(sentences.Capital(k.Name)), "%s", verbatim(k.plural()), "%s", verbatim(ra.Arg)),
	}, nil
}

// verbatim is a pack's words as part of a format: a percent sign in them
// (a pack file's plural is free text) is said, never read as a verb.
func verbatim(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// directKind is the type of a resource arg that scopeAt judges without
// reflect.
type directKind uint8

const (
	directNone directKind = iota
	directInt64
	directInt64Ptr
	directString
	directStringPtr
)

// directField is where the field at index lies in a value of t, and its
// type as scopeAt knows it; directNone when it is another type or lies behind
// a pointer.
func directField(t reflect.Type, index []int) (uintptr, directKind) {
	var offset uintptr
	for _, x := range index {
		if t.Kind() != reflect.Struct {
			return 0, directNone
		}
		f := t.Field(x)
		offset += f.Offset
		t = f.Type
	}
	switch t {
	case reflect.TypeFor[int64]():
		return offset, directInt64
	case reflect.TypeFor[*int64]():
		return offset, directInt64Ptr
	case reflect.TypeFor[string]():
		return offset, directString
	case reflect.TypeFor[*string]():
		return offset, directStringPtr
	}
	return 0, directNone
}

// argAt is the address of the resource arg in args when args is the
// tool's own args pointer (rp.args) and the arg's type is one scopeAt
// knows; nil otherwise, and scope's reflection judges it. The type is
// checked first, so the address is the one reflect would reach: offset and
// type come from that very type.
func (rp *resourcePlan) argAt(args any) unsafe.Pointer {
	if rp.direct == directNone || reflect.TypeOf(args) != rp.args {
		return nil
	}
	base := reflect.ValueOf(args).UnsafePointer()
	if base == nil {
		return nil
	}
	return unsafe.Add(base, rp.offset)
}

// scopeAt is scope on the arg at at (argAt's): the same judgement, without
// reflect.
func (p *Policy) scopeAt(rp *resourcePlan, at unsafe.Pointer, held []string) (ResourceRef, string) {
	switch rp.direct {
	case directInt64:
		return rp.held(*(*int64)(at), "", held)
	case directInt64Ptr:
		if v := *(**int64)(at); v != nil {
			return rp.held(*v, "", held)
		}
	case directString:
		if v := *(*string)(at); v != "" {
			return rp.held(0, v, held)
		}
	case directStringPtr:
		if v := *(**string)(at); v != nil {
			return rp.held(0, *v, held)
		}
	}
	// Left out: the session's first, which must pass the arg's own rule.
	id, n, why := p.sessionsFirst(rp, held)
	if why != "" {
		return ResourceRef{}, why
	}
	switch rp.direct {
	case directInt64Ptr:
		v := new(int64)
		*v = n
		*(**int64)(at) = v
	case directString:
		*(*string)(at) = id
	case directStringPtr:
		v := new(string)
		*v = id
		*(**string)(at) = v
	}
	return ResourceRef{Kind: rp.kind.Name, ID: id}, ""
}

// sessionsFirst is the ID that fills a left-out resource arg of one of
// scopeAt's types: the session's first of the plan's kind (n, the number
// it spells, for a number arg), or why there is none. The session is the
// agent backend's, not the model's: the ID must still pass the arg's rule.
func (p *Policy) sessionsFirst(rp *resourcePlan, held []string) (id string, n int64, why string) {
	if len(held) == 0 {
		return "", 0, rp.noneHeld
	}
	id = held[0]
	if rp.isInt {
		// One spelling per number: "0112" is not a second 112.
		var err error
		if n, err = strconv.ParseInt(id, 10, 64); err != nil || !isDecimal(id, n) {
			return "", 0, fmt.Sprintf(rp.invalid, id)
		}
		if !rp.rule.AllowsInt(n) {
			return "", 0, fmt.Sprintf(rp.invalid, id)
		}
		return id, n, ""
	}
	if !rp.rule.AllowsString(id) {
		return "", 0, fmt.Sprintf(rp.invalid, id)
	}
	return id, 0, ""
}

// presentRule is a validate rule as it applies to a value that is there:
// without omitempty, which would let a zero through.
func presentRule(rule string) string {
	var keep []string
	for _, r := range strings.Split(rule, ",") {
		if r != "" && r != "omitempty" {
			keep = append(keep, r)
		}
	}
	return strings.Join(keep, ",")
}

// reservedKinds would read as something else: "user" is a limit key's
// other scope, and the rest are the insights page's own filters.
var reservedKinds = []string{"user", "tool", "from", "to"}

// checkKinds refuses a pack's resource kinds that cannot be told apart.
func checkKinds(d Pack) error {
	seen := map[string]bool{}
	for _, k := range d.Resources {
		if !kindName.MatchString(k.Name) {
			return fmt.Errorf("pack %s: resource kind %q must be 1 to 32 lower-case letters, digits or _, starting with a letter", d.Name, toolargs.Clip(k.Name))
		}
		if slices.Contains(reservedKinds, k.Name) {
			return fmt.Errorf("pack %s: resource kind %q is reserved (%s read as something else); name it otherwise", d.Name, k.Name, strings.Join(reservedKinds, ", "))
		}
		if seen[k.Name] {
			return fmt.Errorf("pack %s: resource kind %q is declared twice", d.Name, k.Name)
		}
		seen[k.Name] = true
	}
	return nil
}

// scope is step 5 on decoded args: the resource they name, or the
// session's first of its kind when they name none, must be the session's.
// held are the session's resources of the plan's kind. It returns the
// resource, or a refusal ("" when none). scopeAt judges the arg types it
// knows without reflect.
func (p *Policy) scope(rp *resourcePlan, args any, held []string) (ResourceRef, string) {
	f := reflect.ValueOf(args).Elem().FieldByIndex(rp.index)
	var id string
	if f.Kind() == reflect.String && f.String() == "" {
		if len(held) == 0 {
			return ResourceRef{}, rp.noneHeld
		}
		id = held[0]
		if !rp.rule.AllowsString(id) {
			return ResourceRef{}, fmt.Sprintf(rp.invalid, id)
		}
		f.SetString(id)
	} else if f.Kind() == reflect.Pointer && f.IsNil() {
		if len(held) == 0 {
			return ResourceRef{}, rp.noneHeld
		}
		// The session is the agent backend's, not the model's: the ID it
		// lists must still pass the arg's own rule.
		id = held[0]
		v := reflect.New(f.Type().Elem())
		if rp.isInt {
			// One spelling per number: "0112" is not a second 112.
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil || !isDecimal(id, n) {
				return ResourceRef{}, fmt.Sprintf(rp.invalid, id)
			}
			v.Elem().SetInt(n)
			// The rule judges what the arg holds, which a narrower int may
			// have wrapped.
			if !rp.rule.AllowsInt(v.Elem().Int()) {
				return ResourceRef{}, fmt.Sprintf(rp.invalid, id)
			}
		} else {
			v.Elem().SetString(id)
			if !rp.rule.Allows(v.Elem().Interface()) {
				return ResourceRef{}, fmt.Sprintf(rp.invalid, id)
			}
		}
		f.Set(v)
	} else {
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		if rp.isInt {
			return rp.held(f.Int(), "", held)
		}
		return rp.held(0, f.String(), held)
	}
	return ResourceRef{Kind: rp.kind.Name, ID: id}, ""
}

// held is step 5 on the resource the args name (n for a number arg, id
// otherwise): it must be one the session holds.
func (rp *resourcePlan) held(n int64, id string, held []string) (ResourceRef, string) {
	if rp.isInt {
		// The ID is the session's own string when held: no allocation.
		for _, h := range held {
			if isDecimal(h, n) {
				return ResourceRef{Kind: rp.kind.Name, ID: h}, ""
			}
		}
		id = strconv.FormatInt(n, 10)
	}
	if !slices.Contains(held, id) {
		if rp.kind.Conceal {
			return ResourceRef{}, sentences.Say(sentences.ResourceNotFound, strings.ReplaceAll(rp.kind.Name, "_", " "), toolargs.Clip(id), rp.arg, rp.arg)
		}
		return ResourceRef{}, fmt.Sprintf(rp.notHeld, id, joinHeld(held))
	}
	return ResourceRef{Kind: rp.kind.Name, ID: id}, ""
}

// isDecimal reports whether s is n as strconv.FormatInt writes it in base
// 10, without writing it: step 5 compares a number arg with the session's
// IDs on every call.
func isDecimal(s string, n int64) bool {
	if n >= 0 && len(s) > 0 && len(s) < 19 {
		// Up to 18 digits cannot overflow: parse and compare.
		if s[0] == '0' && len(s) > 1 {
			return false
		}
		var v int64
		for i := 0; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 {
				return false
			}
			v = v*10 + int64(d)
		}
		return v == n
	}
	u := uint64(n)
	if n < 0 {
		if len(s) < 2 || s[0] != '-' {
			return false
		}
		s, u = s[1:], -u
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != byte('0'+u%10) {
			return false
		}
		if u /= 10; u == 0 {
			return i == 0
		}
	}
	return false
}

func joinHeld(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// strictDecode reads one JSON object into v, refusing unknown fields.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ResourceAbout is the resource a call is about, for the record even when
// it was refused: the one its args name (as sent, held or not), else the
// session's first of the tool's kind, else the session's first of any kind
// for a tool that names none. Kind "" when there is none.
func (p *Policy) ResourceAbout(tool string, args json.RawMessage, s Session) ResourceRef {
	e := p.lookup(tool)
	if e == nil || e.resource == nil {
		for _, kind := range sortedKinds(s.Resources) {
			if id := s.Resources.first(kind); id != "" {
				return ResourceRef{Kind: kind, ID: id}
			}
		}
		return ResourceRef{}
	}
	kind := e.resource.kind.Name
	var named map[string]json.RawMessage
	if json.Unmarshal(args, &named) == nil {
		if raw, ok := named[e.resource.arg]; ok {
			var id string
			if json.Unmarshal(raw, &id) != nil {
				var n int64
				if json.Unmarshal(raw, &n) == nil && n > 0 {
					id = strconv.FormatInt(n, 10)
				}
			}
			if ValidID(id) {
				return ResourceRef{Kind: kind, ID: id}
			}
		}
	}
	if id := s.Resources.first(kind); id != "" {
		return ResourceRef{Kind: kind, ID: id}
	}
	return ResourceRef{}
}

func sortedKinds(r Resources) []string {
	kinds := make([]string, 0, len(r))
	//workflowcheck:ignore sorted below
	for k := range r {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// ResourceKinds are every pack's resource kinds, in pack order.
func (p *Policy) ResourceKinds() []ResourceKind {
	var out []ResourceKind
	for _, d := range p.packs {
		out = append(out, d.Resources...)
	}
	return out
}

// CheckResource says what is wrong with id as a resource of kind, or nil:
// the kind must be a pack's, and id must pass the rule of the first tool's
// arg that holds that kind.
func (p *Policy) CheckResource(kind, id string) error {
	if !slices.ContainsFunc(p.ResourceKinds(), func(k ResourceKind) bool { return k.Name == kind }) {
		return fmt.Errorf("%q is not a kind of resource any pack names", toolargs.Clip(kind))
	}
	for _, n := range p.names {
		rp := p.entries[n].resource
		if rp == nil || rp.kind.Name != kind {
			continue
		}
		if rp.isInt {
			v, err := strconv.ParseInt(id, 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != id || !rp.rule.Allows(v) {
				return fmt.Errorf("%q is not a %s number (written in decimal, no leading zeros)", toolargs.Clip(id), kind)
			}
			return nil
		}
		if !ValidID(id) || !rp.rule.Allows(id) {
			return fmt.Errorf("%q is not a valid %s", toolargs.Clip(id), kind)
		}
		return nil
	}
	if !ValidID(id) {
		return fmt.Errorf("%q is not a valid %s", toolargs.Clip(id), kind)
	}
	return nil
}
