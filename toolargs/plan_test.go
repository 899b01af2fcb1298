package toolargs_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/toolargs"
)

// planSeeds are inputs on both sides of every shortcut the plan takes:
// escapes, nulls, floats, exponents, leading zeros, pointers to zero, rune
// counts at the bounds, whitespace, duplicates, unknown and case-variant keys.
var planSeeds = []string{
	`{}`, `null`, ` {"articleId":40211} `, "\t{\"articleId\":40211}\n", `{"articleId":40211,"storeId":112}`,
	`{"storeId":0,"articleId":1}`, `{"storeId":null,"articleId":1}`, `{"articleId":1.0}`, `{"articleId":1e2}`,
	`{"articleId":01}`, `{"articleId":-0}`, `{"articleId":99999999}`, `{"articleId":100000000}`, `{"articleId":"1"}`,
	`{"article\u0049d":1}`, `{"ArticleId":1}`, `{"articleId":1,"articleId":1}`, `{"articleId":1}x`, `{"articleId":1,}`,
	`{"kind":"recount","dueBy":"today","note":"call 0244 123 456 or ama@example.com"}`,
	`{"kind":"recount","dueBy":"today","note":"a\"b"}`, `{"kind":"recount","dueBy":"today","note":"<b>&"}`,
	`{"kind":"recount","dueBy":"today","note":"` + strings.Repeat("é", 200) + `"}`,
	`{"kind":"recount","dueBy":"today","note":"` + strings.Repeat("é", 201) + `"}`,
	`{"kind":"recount","dueBy":"today","note":"line\u2028sep"}`, "{\"kind\":\"recount\",\"dueBy\":\"today\",\"note\":\"x\u2028y\"}",
	`{"kind":"recount","dueBy":"today","note":""}`, `{"kind":"","dueBy":"today"}`,
	`{"query":"milk","cursor":"12"}`, `{"query":"milk","cursor":"+1"}`, `{"query":"milk","cursor":"1.5"}`, `{"query":"m"}`, `{"query":"é"}`, `{"query":"éé"}`,
	`{"day":"today","status":"arrived","limit":20}`, `{"limit":0}`, `{"limit":21}`, `{"day":""}`,
	`{"grnId":"GRN-88213"}`, `{"grnId":"GRN-"}`, `{"grnId":"GRN-12345678901"}`, `{"grnId":"grn-1"}`,
	`{"articleId":40211,"quantity":40,"reason":"stockout_risk","justification":"Festival next week."}`,
	`{"articleId":40211,"quantity":0,"reason":"stockout_risk"}`, `{"articleId":40211,"quantity":-3,"reason":"stockout_risk"}`,
	`{"articleId":1,"newPriceCents":100}`, `{"articleId":9223372036854775807}`, `{"articleId":123456789012345678}`,
}

// mangroveCodec is the codec of the Mangrove pack's args, with its formats.
var mangroveCodec = func() *toolargs.Codec {
	formats := map[string]toolargs.Format{}
	for _, f := range mangrove.Policy().Formats {
		formats[f.Tag] = f
	}
	return toolargs.New(formats)
}()

// toolOf is what the codec needs of a tool spec.
func toolOf(spec policy.ToolSpec) toolargs.Tool {
	return toolargs.Tool{Name: spec.Name, Args: spec.Args}
}

// TestPlanAgreesWithReflectivePath: for every tool and seed, Decode with the
// plan and without it give the same value or the same refusal, and the
// plan's encoding is encoding/json's, byte for byte.
func TestPlanAgreesWithReflectivePath(t *testing.T) {
	for _, spec := range mangrove.Tools {
		for _, raw := range append([]string{spec.Example}, planSeeds...) {
			checkPlanAgrees(t, spec, []byte(raw))
		}
	}
}

// TestPlanTakesTheCommonCall: every tool's example is decoded and encoded
// by the plan, not handed to the reflective path (else the speed is a lie).
func TestPlanTakesTheCommonCall(t *testing.T) {
	for _, spec := range mangrove.Tools {
		pl := mangroveCodec.PlanOf(spec.Args)
		if pl == nil {
			t.Fatalf("%s: its args type has no plan", spec.Name)
		}
		v, ok := pl.Decode(spec.Args, bytes.TrimSpace([]byte(spec.Example)))
		if !ok {
			t.Fatalf("%s: the plan gave up on the example %s", spec.Name, spec.Example)
		}
		if _, ok := pl.Encode(v); !ok {
			t.Fatalf("%s: the plan could not encode the example", spec.Name)
		}
	}
}

// TestPlanRefusesWhatItDoesNotKnow: a rule, a kind or a marshaller the plan
// does not understand leaves the type to the reflective path.
func TestPlanRefusesWhatItDoesNotKnow(t *testing.T) {
	type unknownRule struct {
		A string `json:"a" validate:"email"`
	}
	type floatField struct {
		A float64 `json:"a"`
	}
	type hidden struct {
		A string `json:"-" validate:"required"`
	}
	type named struct {
		A policy.Role `json:"a"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[unknownRule](), reflect.TypeFor[floatField](), reflect.TypeFor[hidden](), reflect.TypeFor[named](), reflect.TypeFor[signoff.Approval]()} {
		if _, ok := toolargs.CompilePlan(typ); ok {
			t.Errorf("%s: compiled, want the reflective path", typ)
		}
	}
}

func checkPlanAgrees(t *testing.T, spec policy.ToolSpec, raw []byte) {
	t.Helper()
	fast, ferr := mangroveCodec.Decode(toolOf(spec), raw)
	slow, serr := mangroveCodec.DecodeReflective(toolOf(spec), raw)
	if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
		t.Fatalf("%s %q: plan %v, reflective %v", spec.Name, raw, ferr, serr)
	}
	if ferr != nil {
		return
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s %q: plan %+v, reflective %+v", spec.Name, raw, fast, slow)
	}
	want, err := json.Marshal(slow)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mangroveCodec.Encode(fast)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s %q: plan encodes %s (%v), encoding/json %s", spec.Name, raw, got, err, want)
	}
}

// FuzzPlanAgrees: the plan against the reflective path on arbitrary bytes,
// for every tool.
func FuzzPlanAgrees(f *testing.F) {
	for i, spec := range mangrove.Tools {
		f.Add(uint8(i), []byte(spec.Example))
		for _, s := range planSeeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, tool uint8, raw []byte) {
		checkPlanAgrees(t, mangrove.Tools[int(tool)%len(mangrove.Tools)], raw)
	})
}
