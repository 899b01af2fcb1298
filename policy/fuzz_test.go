package policy_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policy"

	"github.com/toolgate/toolgate/packs/mangrove"
)

// FuzzAuthorize throws arbitrary tool names, raw args, roles, stores and
// usage at the whole chain. Every outcome is in the closed set of codes, a
// refusal says what to do, and anything allowed decodes again, names only
// the session's stores and carries canonical args.
func FuzzAuthorize(f *testing.F) {
	p := mangrovePolicy()
	for _, spec := range mangrove.Tools {
		f.Add(spec.Name, []byte(`{"articleId":40211,"quantity":40,"reason":"stockout_risk","kind":"recount","dueBy":"today","query":"milk","grnId":"GRN-88213"}`), "store_manager", int64(112), 0, int64(100))
	}
	f.Add("get_stock", []byte(`{"articleId":40211}`), "store_manager", int64(112), 0, int64(0))
	f.Add("get_stock", []byte(`{"articleId":40211,"storeId":118}`), "store_manager", int64(112), 0, int64(0))
	f.Add("create_task", []byte(`{"kind":"recount","dueBy":"today","userId":"kofi"}`), "area_manager", int64(115), 29, int64(0))
	f.Add("request_stock_transfer", []byte(`{"articleId":40211,"quantity":250,"reason":"festival_peak"}`), "area_manager", int64(112), 4, int64(240000))
	f.Add("constructor", []byte(`{}`), "store_manager", int64(112), 0, int64(0))
	f.Add("__proto__", []byte(`null`), "", int64(0), 0, int64(0))
	f.Add("get_stock", []byte(`{"articleId":NaN}`), "store_manager", int64(112), 0, int64(0))
	f.Add("get_stock", []byte(`{"articleId":1e400}`), "store_manager", int64(112), 0, int64(0))
	f.Add("get_stock", []byte(`{"articleId":1,"articleId":2}`), "store_manager", int64(112), 0, int64(0))
	f.Add("get_stock", []byte(`{"ArticleId":1}`), "store_manager", int64(112), 0, int64(0))
	f.Fuzz(func(t *testing.T, tool string, args []byte, role string, store int64, used int, value int64) {
		req := policy.Request{Tool: tool, Args: json.RawMessage(args), Session: policy.Session{
			UserID: "u", Role: policy.Role(role), Resources: mangrove.Stores(store), SessionID: "s", ConversationID: "c", CredentialRef: "cred"}}
		row, known := p.Row(tool)
		usage := make([]policy.Usage, len(row.Limits))
		for i := range usage {
			usage[i] = policy.Usage{Calls: used, Cents: int64(used) * 1000}
		}
		v := p.Authorize(req, policy.Facts{ValueCents: &value, Usage: usage})
		if !v.Code.Valid() || v.Code == "" {
			t.Fatalf("code %q is not in the closed set", v.Code)
		}
		if (v.Decision == policy.DecisionDeny) != (v.Code != policy.CodeOK) {
			t.Fatalf("decision %s with code %s", v.Decision, v.Code)
		}
		if !known && v.Code != policy.CodeUnknownTool {
			t.Fatalf("unregistered %q gave %s", tool, v.Code)
		}
		if v.Decision == policy.DecisionDeny {
			if v.Message == "" || !utf8.ValidString(v.Message) || len(v.Message) > 2000 {
				t.Fatalf("refusal message %d bytes, valid %v", len(v.Message), utf8.ValidString(v.Message))
			}
			return
		}
		spec, _ := p.Spec(tool)
		if _, err := mangrovePolicy().Decode(spec, v.Args); err != nil {
			t.Fatalf("allowed args %s do not decode again: %v", v.Args, err)
		}
		if v.Resource.Kind != "" && v.Resource.ID != strconv.FormatInt(store, 10) {
			t.Fatalf("allowed store %v is not the session's %d", v.Resource, store)
		}
		if v.Decision == policy.DecisionApprove && v.ApproverRole == "" {
			t.Fatal("an approve verdict routes to no one")
		}
	})
}
