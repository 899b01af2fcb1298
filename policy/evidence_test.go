package policy_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
)

// TestEveryApproveRowStatesItsEvidence loops over the table: every row that
// can decide approve has evidence rules of its own, covering every value up
// to its hard limit, each at a known acr and a positive age.
func TestEveryApproveRowStatesItsEvidence(t *testing.T) {
	p := mangrovePolicy()
	for _, row := range mangrove.Table {
		if p.Effective(row.Tool) != policy.DecisionApprove {
			continue
		}
		var own []policy.EvidenceRule
		for _, r := range mangrove.Evidence {
			if r.Tool == row.Tool {
				own = append(own, r)
			}
		}
		if len(own) == 0 || own[len(own)-1].UpToCents != 0 {
			t.Errorf("%s decides approve but its evidence rules do not end with one for any value", row.Tool)
		}
		for _, r := range own {
			if policy.ACRRank(r.ACR) < 0 || r.MaxAge <= 0 {
				t.Errorf("%s: rule %+v needs a known acr and a positive age", row.Tool, r)
			}
		}
		for _, v := range []int64{0, 1, 50000, 50001, row.HardLimitCents} {
			if req := policy.EvidenceFor(mangrove.Evidence, row.Tool, v); req.ACR == "" || req.MaxAgeSeconds <= 0 {
				t.Errorf("%s at %s: no evidence requirement", row.Tool, policy.Dollars(v))
			}
		}
	}
	for _, r := range mangrove.Evidence {
		if _, ok := p.Row(r.Tool); !ok {
			t.Errorf("evidence rule for %q, which has no policy row", r.Tool)
		}
	}
}

func TestTransferEvidenceByValue(t *testing.T) {
	for value, want := range map[int64]policy.Requirement{
		38400: {ACR: policy.ACRPassword, MaxAgeSeconds: 8 * 3600},
		50000: {ACR: policy.ACRPassword, MaxAgeSeconds: 8 * 3600},
		50001: {ACR: policy.ACRMFA, MaxAgeSeconds: 300},
		96000: {ACR: policy.ACRMFA, MaxAgeSeconds: 300},
	} {
		if got := policy.EvidenceFor(mangrove.Evidence, mangrove.ToolRequestStockTransfer, value); got != want {
			t.Errorf("%s needs %+v, want %+v", policy.Dollars(value), got, want)
		}
	}
	if got := policy.EvidenceFor(mangrove.Evidence, "no_such_tool", 1); got != policy.StrictestEvidence {
		t.Errorf("a tool without rules needs %+v, want the strictest", got)
	}
	// The verdict of Check records the requirement with the card.
	value := int64(96000)
	v := mangrovePolicy().Check(baseCall(t, mangrovePolicy(), mangrove.ToolRequestStockTransfer).req, &value)
	if v.Decision != policy.DecisionApprove || v.Evidence == nil || *v.Evidence != (policy.Requirement{ACR: policy.ACRMFA, MaxAgeSeconds: 300}) {
		t.Fatalf("verdict %+v does not record the mfa requirement", v)
	}
}

// TestEscalationGoesOneRoleUp loops over the table: every approve row's
// routing escalates each role but the last to the next role up, and the
// verdict records it.
func TestEscalationGoesOneRoleUp(t *testing.T) {
	for _, row := range mangrove.Table {
		for i, a := range row.Approvers {
			next, ok := row.EscalationFor(a.Role)
			if last := i == len(row.Approvers)-1; ok == last || (!last && next != row.Approvers[i+1].Role) {
				t.Errorf("%s: %s escalates to %q (%v)", row.Tool, a.Role, next, ok)
			}
		}
	}
	value := int64(38400)
	if v := mangrovePolicy().Check(baseCall(t, mangrovePolicy(), mangrove.ToolRequestStockTransfer).req, &value); v.EscalateTo != mangrove.RoleAreaManager {
		t.Fatalf("a $384.00 card escalates to %q", v.EscalateTo)
	}
	value = 96000
	if v := mangrovePolicy().Check(baseCall(t, mangrovePolicy(), mangrove.ToolRequestStockTransfer).req, &value); v.EscalateTo != "" {
		t.Fatalf("a $960.00 card escalates to %q", v.EscalateTo)
	}
}

// TestACRValuesAreAProvidersWords: a provider's acr values read as
// toolgate's levels and back (Okta's, say); a value no level names reads as
// none; unset, pwd and mfa are their own words; a pair that is not
// level=value, or names no level toolgate has, is refused with the setting
// and what to write.
func TestACRValuesAreAProvidersWords(t *testing.T) {
	okta, err := policy.ParseACRValues("APPROVALS_OIDC_ACR_VALUES", "pwd=urn:okta:loa:1fa:any, mfa = urn:okta:loa:2fa:any")
	if err != nil {
		t.Fatal(err)
	}
	for acr, level := range map[string]string{"urn:okta:loa:1fa:any": policy.ACRPassword, "urn:okta:loa:2fa:any": policy.ACRMFA, "mfa": "", "": ""} {
		if got := okta.Level(acr); got != level {
			t.Errorf("Okta's %q reads as %q, want %q", acr, got, level)
		}
	}
	if okta.Provider(policy.ACRMFA) != "urn:okta:loa:2fa:any" {
		t.Errorf("toolgate's mfa is asked of Okta as %q", okta.Provider(policy.ACRMFA))
	}
	unset, err := policy.ParseACRValues("MCP_OIDC_ACR_VALUES", " ")
	if err != nil || unset.Level(policy.ACRMFA) != policy.ACRMFA || unset.Level("urn:x") != "" || unset.Provider(policy.ACRPassword) != policy.ACRPassword {
		t.Errorf("unset: %v %v", unset, err)
	}
	for bad, why := range map[string]string{
		"mfa": "not a level=value pair", "gold=urn:x,pwd=1,mfa=2": "not a level=value pair", "pwd=,mfa=2": "not a level=value pair", "pwd=1,mfa": "not a level=value pair",
		"pwd=1,mfa=2,mfa=3": "mfa is named twice",
		"pwd=X,mfa=X":       "pwd and mfa are both",
		"pwd=mfa,mfa=pwd":   "the name of another level",
		"pwd=urn:okta:1fa":  "mfa is not named",
	} {
		if _, err := policy.ParseACRValues("MCP_OIDC_ACR_VALUES", bad); err == nil || !strings.Contains(err.Error(), "MCP_OIDC_ACR_VALUES=") || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %s", bad, err, why)
		}
	}
}
