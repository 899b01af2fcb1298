// Package packtest is the test kit for packs: Chain proves every row of a
// pack's table at every step of the chain that row can fail at, and its
// passing call, by a loop over the table. A pack's own tests call it, so a
// row added to any pack is tested the day it is added, with nothing to
// write but the tool's Example and each resource kind's Example.
//
// It judges the pack as the worker does (policy.New, then Authorize on raw
// JSON args), with no Temporal, database or upstream: what it proves is the
// pack's table, not the engine's wiring.
package packtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/policy"
)

// Stranger is a role no pack declares: the kit's caller at step 2.
const Stranger policy.Role = "packtest_stranger"

// Chain proves each tool of d (judged beside others, which are loaded with
// it as a deployment would) at every step it can fail at:
//
//   - its Example passes, with the row's decision (and, for an approve
//     row, someone to approve it), as the row's first role holding each
//     kind's Example resource;
//   - step 0: a name one letter off is unknown_tool;
//   - step 1: a deny row is tool_denied, and nothing else is tried;
//   - step 2: every role the row does not list, and a stranger, is role;
//   - step 3: a field the args lack, a non-object, and each required arg
//     left out are invalid_arguments;
//   - step 4: a tool that runs as the person refuses a signed-out call
//     with credential_unavailable and asks for a sign-in;
//   - step 5: a tool that names a resource refuses a session holding none
//     of its kind (resource_scope);
//   - step 6: a call valued one above the hard limit is over_limit (where
//     the value arg's own maximum does not stop it at step 3 first);
//   - step 7: each limit, full, is rate_limit.
func Chain(t *testing.T, d policy.Pack, others ...policy.Pack) {
	t.Helper()
	p, err := policy.New(append(slices.Clone(others), d)...)
	if err != nil {
		t.Fatalf("the pack does not load: %v", err)
	}
	held := policy.Resources{}
	for _, k := range d.Resources {
		if k.Example == "" {
			t.Fatalf("pack %s: resource kind %q needs an Example ID for the kit", d.Name, k.Name)
		}
		held[k.Name] = []string{k.Example}
	}
	for _, spec := range d.Tools {
		row, _ := p.Row(spec.Name)
		t.Run(spec.Name, func(t *testing.T) { tool(t, p, d, spec, row, held) })
	}
}

// call is one variant of a tool's passing call.
type call struct {
	tool  string
	args  json.RawMessage
	sess  policy.Session
	value *int64
	usage []policy.Usage
}

func (c call) judge(p *policy.Policy) policy.Verdict {
	return p.Authorize(policy.Request{Tool: c.tool, Args: c.args, Session: c.sess}, policy.Facts{ValueCents: c.value, Usage: c.usage})
}

func tool(t *testing.T, p *policy.Policy, d policy.Pack, spec policy.ToolSpec, row policy.Row, held policy.Resources) {
	decision := p.Effective(spec.Name)
	sess := policy.Session{UserID: "packtest", Role: Stranger, Resources: held.Clone(), SessionID: "packtest", ConversationID: "packtest", CredentialRef: "cred-packtest"}
	if len(row.Roles) > 0 {
		sess.Role = row.Roles[0]
	}
	base := call{tool: spec.Name, args: json.RawMessage(spec.Example), sess: sess, usage: make([]policy.Usage, len(row.Limits))}
	if spec.DryRun {
		one := int64(1)
		base.value = &one // the smallest a dry run can value a call at, within any hard limit
	}
	expect := func(name string, c call, want policy.Code) policy.Verdict {
		t.Helper()
		v := c.judge(p)
		if v.Code != want {
			t.Errorf("%s: got %s (%s), want %s", name, v.Code, v.Message, want)
		}
		if want != policy.CodeOK && (v.Message == "" || v.Decision != policy.DecisionDeny) {
			t.Errorf("%s: a refusal must deny and say why: %s %q", name, v.Decision, v.Message)
		}
		return v
	}

	if decision == policy.DecisionDeny {
		expect("step 1, a deny row", base, policy.CodeToolDenied)
		return
	}
	if spec.Example == "" {
		t.Fatalf("%s needs an Example: a call that passes every step", spec.Name)
	}
	if v := expect("the example", base, policy.CodeOK); v.Code == policy.CodeOK {
		if v.Decision != decision {
			t.Errorf("the example: decided %s, the row says %s", v.Decision, decision)
		}
		if decision == policy.DecisionApprove && v.ApproverRole == "" {
			t.Errorf("the example: an approve verdict routed to no one")
		}
	}

	unknown := base
	unknown.tool = spec.Name + "x"
	expect("step 0, a name one letter off", unknown, policy.CodeUnknownTool)

	for _, r := range append(rolesOf(p), Stranger) {
		if slices.Contains(row.Roles, r) {
			continue
		}
		c := base
		c.sess.Role = r
		expect(fmt.Sprintf("step 2, the role %s", r), c, policy.CodeRole)
	}

	var example map[string]json.RawMessage
	if err := json.Unmarshal(base.args, &example); err != nil {
		t.Fatalf("the example is not a JSON object: %v", err)
	}
	extra := with(example, "packtestUnknown", json.RawMessage(`1`))
	expect("step 3, an unknown field", call{tool: spec.Name, args: extra, sess: sess, value: base.value, usage: base.usage}, policy.CodeInvalidArguments)
	expect("step 3, not an object", call{tool: spec.Name, args: json.RawMessage(`[]`), sess: sess, value: base.value, usage: base.usage}, policy.CodeInvalidArguments)
	for _, name := range required(p, spec) {
		c := base
		c.args = without(example, name)
		expect("step 3, "+name+" left out", c, policy.CodeInvalidArguments)
	}

	if spec.RequiresCredential {
		c := base
		c.sess.CredentialRef = ""
		if v := expect("step 4, signed out", c, policy.CodeCredentialUnavailable); !v.AuthRequired {
			t.Errorf("step 4: a signed-out call does not ask for a sign-in")
		}
	}

	if kind := spec.Resource.Kind; kind != "" {
		c := base
		c.sess.Resources = held.Clone()
		delete(c.sess.Resources, kind)
		expect("step 5, a session holding no "+kind, c, policy.CodeResourceScope)
	}

	if lim := row.HardLimitCents; lim > 0 {
		over := lim + 1
		switch {
		case spec.DryRun:
			c := base
			c.value = &over
			expect("step 6, valued above the hard limit", c, policy.CodeOverLimit)
		case spec.ValueArg != "":
			c := base
			c.args = with(example, spec.ValueArg, json.RawMessage(fmt.Sprint(over)))
			if v := c.judge(p); v.Code == policy.CodeInvalidArguments {
				t.Logf("step 6 is unreachable: %s's own maximum stops a value above the hard limit at step 3", spec.ValueArg)
			} else {
				expect("step 6, valued above the hard limit", c, policy.CodeOverLimit)
			}
		}
	}

	for i, l := range row.Limits {
		full := base
		full.usage = make([]policy.Usage, len(row.Limits))
		if l.MaxCalls > 0 {
			full.usage[i] = policy.Usage{Calls: l.MaxCalls}
			expect(fmt.Sprintf("step 7, limit %d's calls used up", i), full, policy.CodeRateLimit)
		}
		if l.MaxCents > 0 {
			full.usage[i] = policy.Usage{Cents: l.MaxCents + 1}
			expect(fmt.Sprintf("step 7, limit %d's value used up", i), full, policy.CodeRateLimit)
		}
	}
}

func rolesOf(p *policy.Policy) []policy.Role {
	var out []policy.Role
	for _, r := range p.Roles() {
		out = append(out, r.Name)
	}
	return out
}

// required are the args the tool's schema requires.
func required(p *policy.Policy, spec policy.ToolSpec) []string {
	names, _ := p.Schema(spec.Args)["required"].([]string)
	return names
}

func with(args map[string]json.RawMessage, name string, v json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	for k, x := range args {
		m[k] = x
	}
	m[name] = v
	b, _ := json.Marshal(m)
	return b
}

func without(args map[string]json.RawMessage, name string) json.RawMessage {
	m := map[string]json.RawMessage{}
	for k, x := range args {
		if k != name {
			m[k] = x
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// ChainFile is Chain for a pack file (YAML or JSON), loaded as
// TOOLGATE_PACKS loads one.
func ChainFile(t *testing.T, path string, others ...policy.Pack) {
	t.Helper()
	p, err := packs.LoadFile(path)
	if err != nil {
		t.Fatalf("the pack file does not load: %v", err)
	}
	Chain(t, p.Policy, others...)
}
