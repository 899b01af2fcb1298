package policy_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// planArgs are a portal read's args: a string resource the model may leave out.
type planArgs struct {
	PortalRef string `json:"portalRef,omitempty" validate:"omitempty,startswith=PRT-,max=20" desc:"The portal; the person's own when left out."`
}

// portalPack is a pack with no stores and no money: one read by portal.
func portalPack(conceal bool) policy.Pack {
	return policy.Pack{
		Name: "plancover", System: "the member portal",
		Roles:     []policy.RoleSpec{{Name: "member", Label: "Member"}},
		Resources: []policy.ResourceKind{{Name: "portal", Claim: "plancover_portals", Conceal: conceal}},
		Tools: []policy.ToolSpec{{Name: "get_plan", Description: "The member's plan.", Args: reflect.TypeFor[planArgs](), Tier: policy.TierRead,
			Idempotent: true, RequiresCredential: true, Timeout: time.Second, Resource: policy.ResourceArg{Arg: "portalRef", Kind: "portal"},
			Route: policy.Route{Method: "GET", Path: "/portals/{portalRef}/plan"}}},
		Rows: []policy.Row{{Tool: "get_plan", Roles: []policy.Role{"member"}, Decision: policy.DecisionAllow,
			Limits: []policy.Limit{{Scope: policy.PerResource, Window: policy.Hour, MaxCalls: 2}}}},
	}
}

func member(portals ...string) policy.Session {
	return policy.Session{UserID: "m1", Role: "member", Resources: policy.Resources{"portal": portals}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-m1"}
}

// TestStepFiveIsThePacksOwn: a resource is of the pack's kind, named by the
// tool's own arg: filled from the session when left out, refused in the
// pack's words when not held, and counted per resource.
func TestStepFiveIsThePacksOwn(t *testing.T) {
	p, err := policy.New(portalPack(false))
	if err != nil {
		t.Fatal(err)
	}
	ok := policy.Facts{Usage: []policy.Usage{{}}}
	v := p.Authorize(policy.Request{Tool: "get_plan", Args: json.RawMessage(`{}`), Session: member("PRT-1", "PRT-7")}, ok)
	if v.Code != policy.CodeOK || v.Resource != (policy.ResourceRef{Kind: "portal", ID: "PRT-1"}) || string(v.Args) != `{"portalRef":"PRT-1"}` {
		t.Fatalf("left out: %s %v %s", v.Code, v.Resource, v.Args)
	}
	if k := v.Limits[0]; k.Key != "get_plan/portal/PRT-1/3600" || k.Resource.ID != "PRT-1" {
		t.Fatalf("the limit counts the portal: %+v", k)
	}
	for name, c := range map[string]struct {
		args string
		sess policy.Session
		want string
	}{
		"another's":           {`{"portalRef":"PRT-2"}`, member("PRT-1"), "Portal PRT-2 is not one of the signed-in person's portals (PRT-1). Call again with portalRef set to one of them, or leave portalRef out."},
		"none held":           {`{}`, member(), "The signed-in person has no portal, so there is no default portal for this call."},
		"a session's bad one": {`{}`, member("X-1"), "The signed-in person's session names portal X-1, which is not a valid portal."},
	} {
		v := p.Authorize(policy.Request{Tool: "get_plan", Args: json.RawMessage(c.args), Session: c.sess}, ok)
		if v.Code != policy.CodeResourceScope || !strings.HasPrefix(v.Message, c.want) {
			t.Errorf("%s: %s %q", name, v.Code, v.Message)
		}
	}
	v = p.Authorize(policy.Request{Tool: "get_plan", Args: json.RawMessage(`{}`), Session: member("PRT-1")}, policy.Facts{Usage: []policy.Usage{{Calls: 2}}})
	if v.Code != policy.CodeRateLimit || !strings.Contains(v.Message, "for portal PRT-1") {
		t.Fatalf("the third call on one portal: %s %q", v.Code, v.Message)
	}

	hidden, err := policy.New(portalPack(true))
	if err != nil {
		t.Fatal(err)
	}
	v = hidden.Authorize(policy.Request{Tool: "get_plan", Args: json.RawMessage(`{"portalRef":"PRT-2"}`), Session: member("PRT-1")}, ok)
	if v.Code != policy.CodeResourceScope || !strings.Contains(v.Message, `No portal "PRT-2" was found`) || strings.Contains(v.Message, "PRT-1") {
		t.Fatalf("a concealed portal says only not found, naming none of the caller's: %q", v.Message)
	}
}

// TestNewRefusesResourcesThatDoNotHold: a resource of an undeclared kind,
// on an arg the tool lacks, or a per-resource limit on a tool that names
// none, is refused at start.
func TestNewRefusesResourcesThatDoNotHold(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*policy.Pack)
		want string
	}{
		"undeclared kind": {func(d *policy.Pack) { d.Tools[0].Resource.Kind = "account" }, `kind "account", which the pack does not declare`},
		"no such arg":     {func(d *policy.Pack) { d.Tools[0].Resource.Arg = "accountId" }, `"accountId" is not one of its args`},
		"limit by none":   {func(d *policy.Pack) { d.Tools[0].Resource = policy.ResourceArg{} }, `scope "resource"`},
		"kind twice":      {func(d *policy.Pack) { d.Resources = append(d.Resources, d.Resources[0]) }, `declared twice`},
		"bad kind":        {func(d *policy.Pack) { d.Resources[0].Name = "Portal" }, `resource kind "Portal"`},
	} {
		d := portalPack(false)
		c.edit(&d)
		if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestEarlierStoreIDsStillMeanWhatTheyMeant: a session, an approver, a
// verdict and a limit key recorded when resources were numeric stores read
// as resources of kind store, and a session or approver goes out in the
// form it came in (so its fingerprint and signature stay what they were).
func TestEarlierStoreIDsStillMeanWhatTheyMeant(t *testing.T) {
	old := `{"userId":"ama","role":"store_manager","storeIds":[112,118],"sessionId":"s","conversationId":"c","credentialRef":"cred-ama"}`
	var s policy.Session
	if err := json.Unmarshal([]byte(old), &s); err != nil || !s.Resources.Holds("store", "118") {
		t.Fatalf("%v %+v", err, s)
	}
	if b, _ := json.Marshal(s); string(b) != old {
		t.Fatalf("written back as\n%s\nnot\n%s", b, old)
	}
	var id policy.Identity
	if err := json.Unmarshal([]byte(`{"userId":"ama","role":"store_manager","storeIds":[112]}`), &id); err != nil || !id.Resources.Holds("store", "112") {
		t.Fatalf("%v %+v", err, id)
	}
	if b, _ := json.Marshal(id); string(b) != `{"userId":"ama","role":"store_manager","storeIds":[112]}` {
		t.Fatalf("an approver written back as %s", b)
	}
	for _, bad := range []string{
		`{"userId":"a","role":"r","storeIds":[1],"resources":{"store":["1"]}}`,
		`{"userId":"a","role":"r","storeIds":[0]}`,
		`{"userId":"a","role":"r","stores":[1]}`,
	} {
		if err := json.Unmarshal([]byte(bad), &id); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	var v policy.Verdict
	if err := json.Unmarshal([]byte(`{"decision":"allow","code":"ok","storeId":112,"limits":[{"key":"create_task/store/112/86400","tool":"create_task","scope":"store","store":112,"window":86400,"maxCalls":30}]}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.Resource != (policy.ResourceRef{Kind: "store", ID: "112"}) || v.Limits[0].Scope != policy.PerResource || v.Limits[0].Resource != v.Resource {
		t.Fatalf("an earlier verdict: %+v", v)
	}
	if b, _ := json.Marshal(member("PRT-1")); !strings.Contains(string(b), `"resources":{"portal":["PRT-1"]}`) {
		t.Fatalf("a new session: %s", b)
	}
}

// TestClaimsGrantThePacksResources: a sign-in's resources come from the
// claim each kind names (the pack's, or the deployment's override), as
// strings or numbers, and a bad one is refused naming the claim.
func TestClaimsGrantThePacksResources(t *testing.T) {
	p, err := policy.New(portalPack(false))
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.ClaimMap("")
	if err != nil || m["portal"] != "plancover_portals" {
		t.Fatalf("%v %v", m, err)
	}
	raw := map[string]json.RawMessage{"plancover_portals": json.RawMessage(`["PRT-1","PRT-1","PRT-9"]`), "groups": json.RawMessage(`"PRT-4 PRT-5"`)}
	if r, err := p.ResourcesFromClaims(m, raw); err != nil || strings.Join(r["portal"], ",") != "PRT-1,PRT-9" {
		t.Fatalf("%v %v", r, err)
	}
	if m, err = p.ClaimMap("portal=groups"); err != nil {
		t.Fatal(err)
	}
	if r, err := p.ResourcesFromClaims(m, raw); err != nil || strings.Join(r["portal"], ",") != "PRT-4,PRT-5" {
		t.Fatalf("overridden: %v %v", r, err)
	}
	if _, err := p.ClaimMap("store=toolgate_stores"); err == nil || !strings.Contains(err.Error(), `"store" is not a resource kind of the packs (portal)`) {
		t.Fatalf("an unknown kind: %v", err)
	}
	raw["groups"] = json.RawMessage(`["X-1"]`)
	if _, err := p.ResourcesFromClaims(m, raw); err == nil || !strings.Contains(err.Error(), `the "groups" claim: "X-1" is not a valid portal`) {
		t.Fatalf("a bad ID: %v", err)
	}
	if r, err := p.ResourcesFromClaims(m, map[string]json.RawMessage{}); err != nil || len(r) != 0 {
		t.Fatalf("no claim grants nothing: %v %v", r, err)
	}
}

// TestANumberHasOneSpelling: a numeric resource's ID is its decimal form
// alone, so "0112" is not a second store 112 with a budget and an inbox of
// its own, whether it comes from a claim or a session.
func TestANumberHasOneSpelling(t *testing.T) {
	p := mangrovePolicy()
	m, _ := p.ClaimMap("")
	for _, bad := range []string{`["0112"]`, `["00112"]`, `["112.0"]`} {
		if r, err := p.ResourcesFromClaims(m, map[string]json.RawMessage{"toolgate_stores": json.RawMessage(bad)}); err == nil {
			t.Errorf("the claim %s gave %v", bad, r)
		}
	}
	sess := policy.Session{UserID: "ama", Role: "store_manager", Resources: policy.Resources{"store": {"0112"}}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
	if v := p.Check(policy.Request{Tool: "get_stock", Args: json.RawMessage(`{"articleId":40211}`), Session: sess}, nil); v.Code != policy.CodeResourceScope {
		t.Fatalf("a session's store 0112: %s %v %s", v.Code, v.Resource, v.Args)
	}
}

// TestAKindIsOnePacks: two packs declaring one resource kind would let one
// pack's sign-ins act on the other's tools and take over its claim, so
// New refuses it, as it refuses a role in two packs.
func TestAKindIsOnePacks(t *testing.T) {
	d := portalPack(false)
	d.Resources[0].Name, d.Tools[0].Resource.Kind = "store", "store"
	if _, err := policy.New(mangrove.Policy(), d); err == nil || !strings.Contains(err.Error(), `the resource kind "store" is declared by packs mangrove and plancover`) {
		t.Fatalf("%v", err)
	}
	for _, reserved := range []string{"user", "tool", "from", "to"} {
		d := portalPack(false)
		d.Resources[0].Name, d.Tools[0].Resource.Kind = reserved, reserved
		if _, err := policy.New(d); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("the kind %q: %v", reserved, err)
		}
	}
}

// The resource arg in each Go type a pack may give it; step 5 reads some
// without reflection, and all must judge alike.
type (
	refInt64 struct {
		Ref int64 `json:"ref" validate:"required,min=1"`
	}
	refInt64Ptr struct {
		Ref *int64 `json:"ref,omitempty" validate:"omitempty,min=1,max=99"`
	}
	refInt32Ptr struct {
		Ref *int32 `json:"ref,omitempty" validate:"omitempty,min=1,max=99"`
	}
	refString struct {
		Ref string `json:"ref,omitempty" validate:"omitempty,max=20"`
	}
	refStringPtr struct {
		Ref *string `json:"ref,omitempty" validate:"omitempty,max=20"`
	}
	refName  string
	refNamed struct {
		Ref refName `json:"ref,omitempty" validate:"omitempty,max=20"`
	}
	refNamedPtr struct {
		Ref *refName `json:"ref,omitempty" validate:"omitempty,max=20"`
	}
	refInner struct {
		Ref *int64 `json:"ref,omitempty" validate:"omitempty,min=1,max=99"`
	}
	refEmbedded struct {
		Note string `json:"note,omitempty" validate:"omitempty,max=20"`
		refInner
	}
)

func thingPack(args reflect.Type) policy.Pack {
	return policy.Pack{
		Name: "things", System: "the thing system",
		Roles:     []policy.RoleSpec{{Name: "member", Label: "Member"}},
		Resources: []policy.ResourceKind{{Name: "thing", Claim: "things"}},
		Tools: []policy.ToolSpec{{Name: "get_thing", Description: "One thing.", Args: args, Tier: policy.TierRead,
			Idempotent: true, RequiresCredential: true, Timeout: time.Second, Resource: policy.ResourceArg{Arg: "ref", Kind: "thing"},
			Route: policy.Route{Method: "GET", Path: "/things/{ref}"}}},
		Rows: []policy.Row{{Tool: "get_thing", Roles: []policy.Role{"member"}, Decision: policy.DecisionAllow}},
	}
}

// TestStepFiveReadsEveryArgType: whatever Go type holds the resource arg,
// a held one passes as the session spells it, another's is refused in the
// same words, and a left-out one is the session's first.
func TestStepFiveReadsEveryArgType(t *testing.T) {
	held := func(ids ...string) policy.Session {
		return policy.Session{UserID: "m1", Role: "member", Resources: policy.Resources{"thing": ids}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-m1"}
	}
	type outcome struct {
		code     policy.Code
		resource string
		message  string
	}
	for _, c := range []struct {
		args     reflect.Type
		number   bool
		optional bool
	}{
		{reflect.TypeFor[refInt64](), true, false},
		{reflect.TypeFor[refInt64Ptr](), true, true},
		{reflect.TypeFor[refInt32Ptr](), true, true},
		{reflect.TypeFor[refString](), false, true},
		{reflect.TypeFor[refStringPtr](), false, true},
		{reflect.TypeFor[refNamed](), false, true},
		{reflect.TypeFor[refNamedPtr](), false, true},
		{reflect.TypeFor[refEmbedded](), true, true},
	} {
		p, err := policy.New(thingPack(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		named, other := `{"ref":"T-9"}`, `{"ref":"T-8"}`
		sess, zeros := held("T-7", "T-9"), held("07", "9")
		if c.number {
			named, other = `{"ref":9}`, `{"ref":8}`
			sess = held("7", "9")
		}
		type call struct {
			args string
			sess policy.Session
			want outcome
		}
		cases := map[string]call{
			"held":    {named, sess, outcome{policy.CodeOK, strings.Trim(named[7:len(named)-1], `"`), "Allowed."}},
			"another": {other, sess, outcome{policy.CodeResourceScope, "", "Thing " + strings.Trim(other[7:len(other)-1], `"`) + " is not one of the signed-in person's things (" + strings.Join(sess.Resources["thing"], ", ") + ")."}},
		}
		if c.optional {
			cases["left out"] = call{`{}`, sess, outcome{policy.CodeOK, sess.Resources["thing"][0], "Allowed."}}
			bad := held("T-0123456789abcdefghij")
			if c.number {
				bad = held("100", "7")
			}
			first := bad.Resources["thing"][0]
			cases["left out, the session's first breaks the rule"] = call{`{}`, bad, outcome{policy.CodeResourceScope, "", "The signed-in person's session names thing " + first + ", which is not a valid thing."}}
			if c.number {
				cases["left out, the session's first is a second spelling"] = call{`{}`, zeros, outcome{policy.CodeResourceScope, "", "The signed-in person's session names thing 07, which is not a valid thing."}}
			}
		}
		if c.number {
			cases["another spelling"] = call{`{"ref":7}`, zeros, outcome{policy.CodeResourceScope, "", "Thing 7 is not one of the signed-in person's things (07, 9)."}}
		}
		for name, k := range cases {
			a := p.Authorize(policy.Request{Tool: "get_thing", Args: json.RawMessage(k.args), Session: k.sess}, policy.Facts{})
			if got := (outcome{a.Code, a.Resource.ID, a.Message}); got.code != k.want.code || got.resource != k.want.resource || !strings.HasPrefix(got.message, k.want.message) {
				t.Errorf("%s, %s: Authorize gave %+v, want %+v", c.args, name, got, k.want)
			}
			if filled := `{"ref":"T-7"}`; name == "left out" && string(a.Args) != filled && string(a.Args) != strings.ReplaceAll(filled, `"T-7"`, "7") {
				t.Errorf("%s, %s: the args recorded are %s, not the session's first", c.args, name, a.Args)
			}
		}
	}
}

// TestIsDecimal: step 5's compare of a number with a session's ID is
// strconv's spelling of the number, no other.
func TestIsDecimal(t *testing.T) {
	numbers := []int64{0, 1, 7, 9, 10, 99, 100, 112, 99999, -1, -112, 1e17, 1e18 - 1, 1e18, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for i := range 2000 {
		numbers = append(numbers, int64(i)*7919-5000, int64(i)*1_000_000_007*1_000_003)
	}
	for _, n := range numbers {
		want := strconv.FormatInt(n, 10)
		spellings := []string{want, "0" + want, "+" + want, want + "0", want[:len(want)-1], "-" + want, " " + want, want + "x", ""}
		if len(want) > 1 {
			spellings = append(spellings, want[1:], want[:1]+"0"+want[1:])
		}
		for _, s := range spellings {
			if got := policy.IsDecimal(s, n); got != (s == want) {
				t.Errorf("IsDecimal(%q, %d) = %v", s, n, got)
			}
		}
	}
}

// TestEverySessionResourceIsJudged: step 2 refuses a session's malformed
// resources, of the packs' kinds or of others, exactly as
// Session.Problem words it, and lets a sound one through.
func TestEverySessionResourceIsJudged(t *testing.T) {
	p, err := policy.New(mangrove.Policy(), portalPack(false))
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, policy.MaxResources)
	for i := range many {
		many[i] = "PRT-" + strconv.Itoa(i)
	}
	for name, r := range map[string]policy.Resources{
		"none":                  nil,
		"the tool's kind":       {"store": {"112"}},
		"two packs' kinds":      {"store": {"112"}, "portal": {"PRT-1"}},
		"a kind no pack has":    {"store": {"112"}, "branch": {"B-1"}},
		"an empty list":         {"store": {"112"}, "portal": {}},
		"a bad kind":            {"store": {"112"}, "Branch": {"B-1"}},
		"a bad ID":              {"store": {"112", "1 2"}},
		"another kind's bad ID": {"store": {"112"}, "portal": {"PRT/1"}},
		"an unknown kind's bad": {"store": {"112"}, "branch": {""}},
		"too many":              {"store": {"112"}, "portal": many},
		"too many, no pack's":   {"store": {"112"}, "branch": many},
	} {
		sess := policy.Session{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: r, SessionID: "s", ConversationID: "c", CredentialRef: "cred-ama"}
		v := p.Authorize(policy.Request{Tool: mangrove.ToolGetStock, Args: json.RawMessage(`{"articleId":40211,"storeId":112}`), Session: sess}, policy.Facts{})
		if why := sess.Problem(); why != "" {
			if want := "The session sent with this call is malformed: " + why + "."; v.Code != policy.CodeRole || !strings.HasPrefix(v.Message, want) {
				t.Errorf("%s: %s %q, want %q", name, v.Code, v.Message, want)
			}
		} else if v.Code == policy.CodeRole {
			t.Errorf("%s: a sound session was refused: %q", name, v.Message)
		}
	}
}

// TestAKindsWordsAreWordsNotFormat: a kind's plural and a resource arg's
// name come from a pack (a pack file's plural: is free text), and a
// refusal says them as written: a percent sign in them is not a verb.
func TestAKindsWordsAreWordsNotFormat(t *testing.T) {
	d := thingPack(reflect.TypeFor[refString]())
	d.Resources[0].Plural = "things (100% yours)"
	p, err := policy.New(d)
	if err != nil {
		t.Fatal(err)
	}
	sess := policy.Session{UserID: "m1", Role: "member", Resources: policy.Resources{"thing": {"T-7", "T-9"}}, SessionID: "s", ConversationID: "c", CredentialRef: "cred-m1"}
	v := p.Authorize(policy.Request{Tool: "get_thing", Args: json.RawMessage(`{"ref":"T-8"}`), Session: sess}, policy.Facts{})
	if want := "Thing T-8 is not one of the signed-in person's things (100% yours) (T-7, T-9). Call again with ref set to one of them, or leave ref out."; v.Code != policy.CodeResourceScope || v.Message != want {
		t.Fatalf("another's thing: %s %q, want %q", v.Code, v.Message, want)
	}
}
