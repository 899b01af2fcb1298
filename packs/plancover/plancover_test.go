package plancover_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pack/packtest"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/packs/plancover"
	"github.com/toolgate/toolgate/policy"
)

// TestEveryRowAtEveryStep: the pack test kit over PlanCover's table,
// loaded beside Mangrove as make dev loads it.
func TestEveryRowAtEveryStep(t *testing.T) {
	if err := plancover.Pack().Check(); err != nil {
		t.Fatal(err)
	}
	packtest.Chain(t, plancover.Policy(), mangrove.Policy())
}

// TestEveryReadSharesOneShape (the text's "Every PlanCover read shares one
// shape"): read risk, every role, idempotent, allowed with no
// confirmation, as the signed-in member; the knowledge search alone runs
// as no one, and names no resource.
func TestEveryReadSharesOneShape(t *testing.T) {
	d := plancover.Policy()
	for i, s := range d.Tools {
		row := d.Rows[i]
		knowledge := s.Name == plancover.ToolSearchPolicyKnowledge
		if row.Tool != s.Name || s.Tier != policy.TierRead || !s.Idempotent || row.Decision != policy.DecisionAllow ||
			len(row.Roles) != len(d.Roles) || s.RequiresCredential == knowledge || s.DryRun || s.Route.Method != "GET" {
			t.Errorf("%s: %+v %+v", s.Name, s, row)
		}
		if knowledge && (s.Resource != (policy.ResourceArg{}) || s.Unavailable == "") {
			t.Errorf("the knowledge search names a resource or says nothing when its index is down: %+v", s)
		}
	}
}

func member(portals ...string) policy.Session {
	return policy.Session{UserID: "meera", Role: plancover.RoleMember, Resources: policy.Resources{plancover.KindPortal: portals},
		SessionID: "s", ConversationID: "c", CredentialRef: "cr_meera"}
}

// TestTheHospitalSearchNeedsAPinCodeOrACity (the text's "One of pin_code or
// city is required, and a pin code must be exactly six digits; either
// mistake is answered with invalid_arguments rather than a search").
func TestTheHospitalSearchNeedsAPinCodeOrACity(t *testing.T) {
	p, err := policy.New(plancover.Policy())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args string
		want policy.Code
		says string
	}{
		{`{}`, policy.CodeInvalidArguments, `"pin_code" or "city"`},
		{`{"portal_ref":"PRT-40122"}`, policy.CodeInvalidArguments, `"pin_code" or "city"`},
		{`{"pin_code":"56003"}`, policy.CodeInvalidArguments, "exactly six digits"},
		{`{"pin_code":"5600341"}`, policy.CodeInvalidArguments, "exactly six digits"},
		{`{"pin_code":"56003A"}`, policy.CodeInvalidArguments, "exactly six digits"},
		{`{"pin_code":560034}`, policy.CodeInvalidArguments, "pin_code"},
		{`{"pin_code":"560034"}`, policy.CodeOK, ""},
		{`{"city":"Mysuru"}`, policy.CodeOK, ""},
		{`{"pin_code":"560034","city":"Bengaluru"}`, policy.CodeOK, ""},
	} {
		v := p.Authorize(policy.Request{Tool: plancover.ToolFindNetworkHospitals, Args: json.RawMessage(c.args), Session: member("PRT-40122")}, policy.Facts{Usage: []policy.Usage{{}}})
		if v.Code != c.want || !strings.Contains(v.Message, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", c.args, v.Code, v.Message, c.want, c.says)
		}
	}
}

// record is a region's hospital as the stand-in writes one.
func record(i int, city, district, pin string) map[string]any {
	return map[string]any{"name": fmt.Sprintf("H%d", i), "address": fmt.Sprintf("%d Road", i), "city": city, "district": district,
		"pin_code": pin, "desk_mobile": fmt.Sprintf("+91 98450 %05d", i), "cashless": true}
}

// TestHospitalsAreRankedExactPinThenCityThenDistrict (the text's "re-ranks
// — exact pin, then city, then district — and cuts to ten"): whatever the
// region's order, the exact pin comes first, then the city, then the
// district, also for a pin code no hospital has; ten at most, each record
// whole and without the desk's mobile number; the model is told the list
// is regional, and an empty region says so.
func TestHospitalsAreRankedExactPinThenCityThenDistrict(t *testing.T) {
	var region []map[string]any
	for i := range 240 {
		region = append(region, record(i, "Hubballi", "Dharwad", "580020"))
	}
	region = append(region, record(901, "Anekal", "Bengaluru Urban", "562106"), record(902, "Bengaluru", "Bengaluru Urban", "560001"),
		record(903, "Bengaluru", "Bengaluru Urban", "560034"), record(904, "Bengaluru", "Bengaluru Urban", "560095"), record(905, "Bengaluru", "Bengaluru Urban", "560034"))
	answer, _ := json.Marshal(map[string]any{"region": "Karnataka", "hospitals": region})
	for _, c := range []struct {
		args string
		want []string
		near string
	}{
		{`{"portal_ref":"PRT-40122","pin_code":"560034"}`, []string{"H903", "H905", "H902", "H904", "H901", "H0", "H1", "H2", "H3", "H4"}, "pin code 560034"},
		{`{"portal_ref":"PRT-40122","city":"bengaluru"}`, []string{"H902", "H903", "H904", "H905", "H901", "H0", "H1", "H2", "H3", "H4"}, "bengaluru"},
		// A pin code no hospital has: its city and district are those of
		// the record sharing the most leading digits with it.
		{`{"portal_ref":"PRT-40122","pin_code":"560035"}`, []string{"H902", "H903", "H904", "H905", "H901", "H0", "H1", "H2", "H3", "H4"}, "nearest to pin code 560035"},
		{`{"portal_ref":"PRT-40122","pin_code":"110001"}`, []string{"H0", "H1", "H2", "H3", "H4", "H5", "H6", "H7", "H8", "H9"}, "No network hospital was found near pin code 110001"},
	} {
		out, err := plancover.ShapeHospitals(json.RawMessage(c.args), answer)
		if err != nil {
			t.Fatal(err)
		}
		var got plancover.Hospitals
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range got.Hospitals {
			names = append(names, h.Name)
			if h.Address == "" || h.City == "" || h.PinCode == "" {
				t.Errorf("%s: a record cut apart: %+v", c.args, h)
			}
		}
		if strings.Join(names, " ") != strings.Join(c.want, " ") || !strings.Contains(got.Note, c.near) || !strings.Contains(got.Note, "not exhaustive") {
			t.Errorf("%s: %v, note %q; want %v", c.args, names, got.Note, c.want)
		}
		if strings.Contains(string(out), "98450") || strings.Contains(string(out), "mobile") {
			t.Errorf("%s: a desk's mobile number reached the result: %s", c.args, out)
		}
	}
	empty, err := plancover.ShapeHospitals(json.RawMessage(`{"pin_code":"560034"}`), []byte(`{"hospitals":[]}`))
	if err != nil || !strings.Contains(string(empty), "listed no network hospital in this region") {
		t.Errorf("an empty region: %s %v", empty, err)
	}
	if _, err := plancover.ShapeHospitals(json.RawMessage(`{"pin_code":"560034"}`), []byte(`<html>`)); err == nil {
		t.Error("an answer that does not read was shaped")
	}
}
