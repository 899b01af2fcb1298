package policy_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/policy"

	"github.com/toolgate/toolgate/packs/mangrove"
)

// decoded returns each row's example call, decoded and filled, with facts
// that pass, so benchmarks measure decisions, not setup.
type benchCall struct {
	tool  string
	raw   json.RawMessage
	args  any
	sess  policy.Session
	facts policy.Facts
}

func benchCalls(tb testing.TB) []benchCall {
	p := mangrovePolicy()
	var out []benchCall
	value := int64(9600)
	for _, row := range mangrove.Table {
		spec, _ := p.Spec(row.Tool)
		args, err := mangrovePolicy().Decode(spec, json.RawMessage(spec.Example))
		if err != nil {
			tb.Fatal(err)
		}
		sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
		if a := reflect.ValueOf(args).Elem().FieldByName("StoreID"); a.IsValid() {
			a.Set(reflect.ValueOf(new(int64(112))))
		}
		out = append(out, benchCall{tool: row.Tool, raw: json.RawMessage(spec.Example), args: args, sess: sess,
			facts: policy.Facts{ValueCents: &value, Usage: make([]policy.Usage, len(row.Limits))}})
	}
	return out
}

// TestDecideAgreesWithAuthorize: the decoded-args path decides every row as
// the raw-JSON path does.
func TestDecideAgreesWithAuthorize(t *testing.T) {
	p := mangrovePolicy()
	for _, c := range benchCalls(t) {
		a := p.Authorize(policy.Request{Tool: c.tool, Args: c.raw, Session: c.sess}, c.facts)
		d := p.Decide(c.tool, c.args, c.sess, c.facts)
		if a.Decision != d.Decision || a.Code != d.Code || a.Resource != d.Resource || a.ApproverRole != d.ApproverRole {
			t.Errorf("%s: Authorize %s/%s, Decide %s/%s", c.tool, a.Decision, a.Code, d.Decision, d.Code)
		}
	}
}

// BenchmarkDecide: the decision on decoded args, over every row of the table.
func BenchmarkDecide(b *testing.B) {
	p := mangrovePolicy()
	calls := benchCalls(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := &calls[i%len(calls)]
		p.Decide(c.tool, c.args, c.sess, c.facts)
	}
}

// BenchmarkDecideAllowed: the rows that allow or ask for approval only (a
// refusal builds its message, which allocates by design).
func BenchmarkDecideAllowed(b *testing.B) {
	p := mangrovePolicy()
	var calls []benchCall
	for _, c := range benchCalls(b) {
		if p.Effective(c.tool) != policy.DecisionDeny {
			calls = append(calls, c)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := &calls[i%len(calls)]
		p.Decide(c.tool, c.args, c.sess, c.facts)
	}
}

// BenchmarkAuthorizeRaw: the whole chain from raw JSON args, including
// strict decoding and validation, over every row.
func BenchmarkAuthorizeRaw(b *testing.B) {
	p := mangrovePolicy()
	calls := benchCalls(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := &calls[i%len(calls)]
		p.Authorize(policy.Request{Tool: c.tool, Args: c.raw, Session: c.sess}, c.facts)
	}
}
