package policy

import (
	"encoding/json"
	"testing"
)

// decoded returns each row's example call, decoded and filled, with facts
// that pass, so benchmarks measure decisions, not setup.
type benchCall struct {
	tool  string
	raw   json.RawMessage
	args  any
	sess  Session
	facts Facts
}

func benchCalls(tb testing.TB) []benchCall {
	p := Default()
	var out []benchCall
	value := int64(9600)
	for _, row := range Table {
		spec, _ := p.Spec(row.Tool)
		args, err := Decode(spec, json.RawMessage(spec.Example))
		if err != nil {
			tb.Fatal(err)
		}
		sess := Session{UserID: "ama", Role: RoleStoreManager, StoreIDs: []int64{112}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
		if sc, ok := args.(StoreScoped); ok {
			sc.SetStore(112)
		}
		out = append(out, benchCall{tool: row.Tool, raw: json.RawMessage(spec.Example), args: args, sess: sess,
			facts: Facts{ValueCents: &value, Usage: make([]Usage, len(row.Limits))}})
	}
	return out
}

// TestDecideAgreesWithAuthorize: the decoded-args path decides every row as
// the raw-JSON path does.
func TestDecideAgreesWithAuthorize(t *testing.T) {
	p := Default()
	for _, c := range benchCalls(t) {
		a := p.Authorize(Request{Tool: c.tool, Args: c.raw, Session: c.sess}, c.facts)
		d := p.Decide(c.tool, c.args, c.sess, c.facts)
		if a.Decision != d.Decision || a.Code != d.Code || a.StoreID != d.StoreID || a.ApproverRole != d.ApproverRole {
			t.Errorf("%s: Authorize %s/%s, Decide %s/%s", c.tool, a.Decision, a.Code, d.Decision, d.Code)
		}
	}
}

// BenchmarkDecide: the decision on decoded args, over every row of the table.
func BenchmarkDecide(b *testing.B) {
	p := Default()
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
	p := Default()
	var calls []benchCall
	for _, c := range benchCalls(b) {
		if p.Effective(c.tool) != DecisionDeny {
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
	p := Default()
	calls := benchCalls(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := &calls[i%len(calls)]
		p.Authorize(Request{Tool: c.tool, Args: c.raw, Session: c.sess}, c.facts)
	}
}
