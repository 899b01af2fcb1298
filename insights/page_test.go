package insights_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/signoff"

	"github.com/toolgate/toolgate/insights"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	area  = mangrove.Stores(110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121)
	amaID = policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}
	kofi  = policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: area}
	// stamp manages stores 113 and 114 and approves everything at once.
	stamp = policy.Identity{UserID: "stamp", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(113, 114)}
)

// TestRubberStampSignals: each signal fires on the approver who earns it,
// through the real stack and the auditor's login: ama decides three cards
// within a second (one after her own edit, which is no change under her);
// kofi approves, within a second, a card whose dry run ama's edit changed;
// stamp approves ten of ten cards. The sixth transfer
// into a store is a limit hit, an unknown article an upstream failure.
func TestRubberStampSignals(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	card := func(sess policy.Session, call, args string) (workflows.Outcome, string) {
		first, run, err := workflows.Call(ctx, s.Client, s.Policy, s.TaskQueue, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: call, Args: json.RawMessage(args), Session: sess})
		if err != nil || first.Status != workflows.StatusPendingApproval {
			t.Fatalf("card %s: %v %+v", call, err, first)
		}
		return first, run.GetID()
	}
	// decide signs for the card's first version, or for the version st
	// shows when it is given.
	decide := func(o workflows.Outcome, id string, who policy.Identity, a signoff.Approval, st ...workflows.Status) {
		a.Approver, a.Evidence = who, testenv.Evidence(who.UserID, time.Now())
		if a.ArgsHash == "" {
			a.ArgsHash = o.ArgsHash
		}
		card := o.CardRef()
		for _, v := range st {
			card = v.CardRef(id)
		}
		if err := s.Client.SignalWorkflow(ctx, id, o.RunID, workflows.ApprovalSignal, testenv.Sign(a, card)); err != nil {
			t.Fatal(err)
		}
	}
	ended := func(id string) {
		var res workflows.ToolCallResult
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.Client.GetWorkflow(wait, id, "").Get(wait, &res); err != nil || res.Status != workflows.StatusExecuted {
			t.Fatalf("%s: %v %+v", id, err, res)
		}
	}
	ama := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112), SessionID: "s", ConversationID: "sig", CredentialRef: "cred-ama"}
	for i, q := range []int{10, 11} {
		o, id := card(ama, fmt.Sprint("f", i), fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"stockout_risk"}`, q))
		decide(o, id, amaID, signoff.Approval{Decision: signoff.Approve})
		ended(id)
	}
	// edited puts a card up, has ama edit its quantity, and returns the new version.
	edited := func(call string, from, to int) (workflows.Outcome, string, workflows.Status) {
		o, id := card(ama, call, fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"stockout_risk"}`, from))
		decide(o, id, amaID, signoff.Approval{Decision: signoff.Edit, Edit: json.RawMessage(fmt.Sprintf(`{"quantity":%d}`, to))})
		var st workflows.Status
		for deadline := time.Now().Add(20 * time.Second); st.Version < 2; time.Sleep(50 * time.Millisecond) {
			if v, err := s.Client.QueryWorkflow(ctx, id, "", workflows.StatusQuery); err == nil {
				_ = v.Get(&st)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the edit did not land: %+v", st)
			}
		}
		return o, id, st
	}
	// Ama approves her own edit at once: she made the change, so it is no signal.
	o, id, st := edited("e0", 20, 25)
	decide(o, id, amaID, signoff.Approval{Decision: signoff.Approve, ArgsHash: st.ArgsHash}, st)
	ended(id)
	// Kofi approves, at once, the card ama's edit re-priced for him.
	o, id, st = edited("e1", 40, 60)
	decide(o, id, kofi, signoff.Approval{Decision: signoff.Approve, ArgsHash: st.ArgsHash}, st)
	ended(id)

	k := policy.Session{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: area, SessionID: "s", ConversationID: "sig", CredentialRef: "cred-kofi"}
	for i := range 10 {
		store := 113 + i%2
		o, id := card(k, fmt.Sprint("k", i), fmt.Sprintf(`{"articleId":40211,"quantity":%d,"reason":"festival_peak","storeId":%d}`, 1+i, store))
		decide(o, id, stamp, signoff.Approval{Decision: signoff.Approve})
		ended(id)
	}
	if r := s.Run(t, workflows.ToolCallInput{Tool: "request_stock_transfer", ToolCallID: "k10", Args: json.RawMessage(`{"articleId":40211,"quantity":20,"reason":"festival_peak","storeId":113}`), Session: k}); r.Code != policy.CodeRateLimit {
		t.Fatalf("the sixth transfer into 113: %+v", r)
	}
	if r := s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "g1", Args: json.RawMessage(`{"articleId":4021}`), Session: ama}); r.Code != policy.CodeUpstreamError {
		t.Fatalf("an unknown article: %+v", r)
	}

	r := insights.Reader{Pool: testenv.ServicePool(t, s.DatabaseURL, "auditor"), Policy: s.Policy}
	f := insights.Filter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}
	p, err := r.Page(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	signals := map[string]string{}
	for _, a := range p.Approvers {
		signals[a.UserID] = strings.Join(a.Signals, "; ")
	}
	if signals["ama"] != "3 of 3 decisions in under 5s" {
		t.Errorf("ama: %q", signals["ama"])
	}
	if signals["kofi"] != "approved 1 card(s) within 5s of an edit changing its dry run" {
		t.Errorf("kofi: %q", signals["kofi"])
	}
	if !strings.Contains(signals["stamp"], "approves 100% of 10 cards") {
		t.Errorf("stamp: %q", signals["stamp"])
	}
	if !p.Approvers[0].Flagged() || len(p.Approvers) != 3 {
		t.Errorf("approvers, flagged first: %+v", p.Approvers)
	}
	if l := p.Chart("limits"); l == nil || l.Empty || !strings.Contains(string(l.SVG), "request_stock_transfer · store 113") {
		t.Errorf("the limits chart: %+v", l)
	}
	if fl := p.Chart("failures"); fl == nil || !strings.Contains(string(fl.SVG), ">get_stock<") || !strings.Contains(string(fl.SVG), "upstream_error") {
		t.Errorf("the failures chart: %+v", fl)
	}
	// The failed read is among the slowest ten unless ten outcomes took
	// longer: which it is depends on this machine's timing, not the query.
	failed := func(c insights.SlowCall) bool { return c.Tool == "get_stock" && c.Outcome == "failed" }
	g, err := r.Page(ctx, insights.Filter{From: f.From, To: f.To, Tool: "get_stock"})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(g.Slowest, failed); i < 0 || len(g.Slowest) != 1 {
		t.Errorf("the slowest get_stock calls: %+v", g.Slowest)
	} else if !slices.ContainsFunc(p.Slowest, failed) &&
		(len(p.Slowest) != 10 || slices.ContainsFunc(p.Slowest, func(c insights.SlowCall) bool { return c.Seconds < g.Slowest[i].Seconds })) {
		t.Errorf("the slowest calls leave out %+v: %+v", g.Slowest[i], p.Slowest)
	}
	if !slices.IsSortedFunc(p.Slowest, func(a, b insights.SlowCall) int { return cmp.Compare(b.Seconds, a.Seconds) }) {
		t.Errorf("the slowest calls, slowest first: %+v", p.Slowest)
	}
	// A store filter narrows every query: store 112 has no limit hit and no stamp.
	f.Resource = policy.ResourceRef{Kind: mangrove.KindStore, ID: "112"}
	if p, err = r.Page(ctx, f); err != nil {
		t.Fatal(err)
	}
	if l := p.Chart("limits"); !l.Empty || slices.ContainsFunc(p.Approvers, func(a insights.Approver) bool { return a.UserID == "stamp" }) {
		t.Errorf("store 112: limits %+v, approvers %+v", l, p.Approvers)
	}
}
