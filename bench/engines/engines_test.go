package engines

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	tg "github.com/toolgate/toolgate/policy"
)

// cases builds, for every row of the table, a passing call and one that
// fails at each step the row can fail at.
func cases(t testing.TB) []Input {
	var out []Input
	for _, r := range mangrove.Table {
		base := Input{Tool: r.Tool, Role: "store_manager", Credential: true, Stores: []int64{112}, Value: 960}
		if scopedTool(r.Tool) {
			base.Store = 112
		}
		vary := []func(*Input){
			func(*Input) {},
			func(i *Input) { i.Tool = "constructor" },
			func(i *Input) { i.Role = "cashier" },
			func(i *Input) { i.Credential = false },
			func(i *Input) { i.Store = 118 },
			func(i *Input) { i.Value = 250000 },
			func(i *Input) { i.Calls = 1000 },
			func(i *Input) { i.Cents = 10_000_000 },
		}
		for _, v := range vary {
			in := base
			in.Stores = append([]int64{}, base.Stores...)
			v(&in)
			out = append(out, in)
		}
	}
	return out
}

func scopedTool(name string) bool {
	spec, _ := shipped.Spec(name)
	return scoped(spec)
}

// toolgateDecide runs the policy's one entry, Check then Admit (Authorize),
// on the input's args as JSON, from the tool's example decoded once.
type toolgateDecide struct {
	p    *tg.Policy
	args map[string]any
}

func newToolgate(t testing.TB) *toolgateDecide {
	d := &toolgateDecide{p: shipped, args: map[string]any{}}
	for _, spec := range mangrove.Tools {
		a, err := shipped.Decode(spec, json.RawMessage(spec.Example))
		if err != nil {
			t.Fatal(err)
		}
		d.args[spec.Name] = a
	}
	return d
}

func (d *toolgateDecide) Decide(in *Input) (string, tg.Code) {
	args := d.args[in.Tool]
	setStore(args, in.Store)
	cred := ""
	if in.Credential {
		cred = "cred"
	}
	row, _ := d.p.Row(in.Tool)
	usage := make([]tg.Usage, len(row.Limits))
	for i := range usage {
		usage[i] = tg.Usage{Calls: in.Calls, Cents: in.Cents}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	v := d.p.Authorize(tg.Request{Tool: in.Tool, Args: raw, Session: tg.Session{UserID: "u", Role: tg.Role(in.Role), Resources: mangrove.Stores(in.Stores...), CredentialRef: cred}},
		tg.Facts{ValueCents: &in.Value, Usage: usage})
	return string(v.Decision), v.Code
}

// TestEnginesAgree: the floor, Rego and Cedar decide every case as toolgate does.
func TestEnginesAgree(t *testing.T) {
	ctx := context.Background()
	floor, tgd := NewFloor(), newToolgate(t)
	rg, err := NewRego(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := NewCedar()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range cases(t) {
		wantD, wantC := tgd.Decide(&in)
		fD, fC := floor.Decide(&in)
		rD, rC, err := rg.Decide(ctx, &in)
		if err != nil {
			t.Fatal(err)
		}
		cD, cC := cd.Decide(&in)
		for name, got := range map[string]string{"floor": fD + "/" + string(fC), "rego": rD + "/" + string(rC), "cedar": cD + "/" + string(cC)} {
			if got != wantD+"/"+string(wantC) {
				t.Errorf("%+v: %s says %s, toolgate %s/%s", in, name, got, wantD, wantC)
			}
		}
		n++
	}
	t.Logf("%d cases, 4 engines agree", n)
}

// prepared is an input with toolgate's args (as JSON), session and facts
// built ahead, so the benchmark measures the decision, not the adapter.
type prepared struct {
	in    Input
	raw   json.RawMessage
	sess  tg.Session
	facts tg.Facts
}

func prepare(d *toolgateDecide, ins []Input) []prepared {
	out := make([]prepared, len(ins))
	for i, in := range ins {
		cred := ""
		if in.Credential {
			cred = "cred"
		}
		row, _ := d.p.Row(in.Tool)
		usage := make([]tg.Usage, len(row.Limits))
		for j := range usage {
			usage[j] = tg.Usage{Calls: in.Calls, Cents: in.Cents}
		}
		v := in.Value
		args := d.args[in.Tool]
		setStore(args, in.Store)
		raw, err := json.Marshal(args)
		if err != nil {
			panic(err)
		}
		out[i] = prepared{in: in, raw: raw, sess: tg.Session{UserID: "u", Role: tg.Role(in.Role), Resources: mangrove.Stores(in.Stores...), CredentialRef: cred},
			facts: tg.Facts{ValueCents: &v, Usage: usage}}
	}
	return out
}

// BenchmarkEngines decides the same calls with each engine: "allowed" are
// calls every engine lets through (toolgate builds no message), "mixed"
// adds a refusal at every step (toolgate then writes the model's message).
func BenchmarkEngines(b *testing.B) {
	ctx := context.Background()
	floor, tgd := NewFloor(), newToolgate(b)
	rg, err := NewRego(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cd, err := NewCedar()
	if err != nil {
		b.Fatal(err)
	}
	var mixed, allowed []Input
	for _, in := range cases(b) {
		if in.Tool == "constructor" {
			continue
		}
		mixed = append(mixed, in)
		if _, code := floor.Decide(&in); code == tg.CodeOK {
			allowed = append(allowed, in)
		}
	}
	for _, set := range []struct {
		name string
		ins  []Input
	}{{"allowed", allowed}, {"mixed", mixed}} {
		ins, pre := set.ins, prepare(tgd, set.ins)
		b.Run("floor/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				floor.Decide(&ins[i%len(ins)])
			}
		})
		b.Run("toolgate/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p := &pre[i%len(pre)]
				tgd.p.Authorize(tg.Request{Tool: p.in.Tool, Args: p.raw, Session: p.sess}, p.facts)
			}
		})
		b.Run("cedar/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				cd.Decide(&ins[i%len(ins)])
			}
		})
		b.Run("rego/"+set.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := rg.Decide(ctx, &ins[i%len(ins)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// setStore fills the store of args that name one (mangrove.StoreArg), as
// the chain fills it from the session.
func setStore(args any, store int64) {
	if args == nil {
		return
	}
	if f := reflect.ValueOf(args).Elem().FieldByName("StoreID"); f.IsValid() {
		f.Set(reflect.ValueOf(&store))
	}
}
