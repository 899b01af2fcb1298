package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/policy"

	"github.com/toolgate/toolgate/packs/mangrove"
)

// benchCall is one row's example call, with a session and facts that
// pass, so benchmarks measure decisions, not setup.
type benchCall struct {
	tool  string
	raw   json.RawMessage
	sess  policy.Session
	facts policy.Facts
}

func benchCalls(tb testing.TB) []benchCall {
	p := mangrovePolicy()
	var out []benchCall
	value := int64(9600)
	for _, row := range mangrove.Table {
		spec, _ := p.Spec(row.Tool)
		if _, err := p.Decode(spec, json.RawMessage(spec.Example)); err != nil {
			tb.Fatal(err)
		}
		sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
		out = append(out, benchCall{tool: row.Tool, raw: json.RawMessage(spec.Example), sess: sess,
			facts: policy.Facts{ValueCents: &value, Usage: make([]policy.Usage, len(row.Limits))}})
	}
	return out
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

// BenchmarkAuthorizeAllowed: the whole chain from raw JSON args over the
// rows that allow or ask for approval only (a refusal builds its message).
func BenchmarkAuthorizeAllowed(b *testing.B) {
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
		p.Authorize(policy.Request{Tool: c.tool, Args: c.raw, Session: c.sess}, c.facts)
	}
}
