package northgate_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/pack/packtest"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/packs/northgate"
	"github.com/toolgate/toolgate/policy"
)

// TestThePackLoadsBesideTheOthers: the register, its ladder and its
// verification tools hold together, with Mangrove and PlanCover loaded.
func TestThePackLoadsBesideTheOthers(t *testing.T) {
	set, err := packs.Load("mangrove,plancover,northgate")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Policy.Spec(northgate.ToolReissueCard); !ok {
		t.Fatal("reissue_card is not loaded")
	}
}

// TestUnknownActionsNeedTheStrictestTier is the text's
// test_unknown_action_defaults_to_high: an action with no row and the
// empty name need the strictest tier, and so does a row that names none.
func TestUnknownActionsNeedTheStrictestTier(t *testing.T) {
	d := northgate.Policy()
	for _, action := range []string{"close_account", ""} {
		if got := d.TierFor(action); got != northgate.TierHigh {
			t.Errorf("TierFor(%q) = %q, want %q", action, got, northgate.TierHigh)
		}
	}
	for _, r := range northgate.Register {
		if got := d.TierFor(r.Tool); got != r.Verified {
			t.Errorf("TierFor(%s) = %q, want the register's %q", r.Tool, got, r.Verified)
		}
	}
	i := slices.IndexFunc(d.Rows, func(r policy.Row) bool { return r.Tool == northgate.ToolGetBalance })
	d.Rows[i].Verified = ""
	if got := d.TierFor(northgate.ToolGetBalance); got != northgate.TierHigh {
		t.Errorf("a row that names no tier needs %q, want %q", got, northgate.TierHigh)
	}
	p, err := policy.New(d)
	if err != nil {
		t.Fatal(err)
	}
	v := p.Check(policy.Request{Tool: northgate.ToolGetBalance, Args: []byte(`{}`), Session: policy.Session{UserID: "dana", Role: northgate.RoleCaller,
		Resources: policy.Resources{northgate.KindAccount: {"ACC-20417"}}, SessionID: "s", ConversationID: "c", CredentialRef: "cr"}}, nil)
	if v.Verified == nil || v.Verified.Tier != northgate.TierHigh {
		t.Errorf("the verdict of a row with no tier needs %+v, want %q", v.Verified, northgate.TierHigh)
	}
}

// TestTheRegisterRowByRow proves every row of the register at every step
// of the chain it can fail at (pack/packtest), beside Mangrove.
func TestTheRegisterRowByRow(t *testing.T) {
	packtest.Chain(t, northgate.Policy(), mangrove.Policy())
}

// TestTheModelIsAskedForTheFactorAsSaid: the schema a model reads asks for
// the passphrase and the code as the caller said them; the sealing is the
// front door's, so no pattern of a sealed reference is published.
func TestTheModelIsAskedForTheFactorAsSaid(t *testing.T) {
	p, err := policy.New(northgate.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defs, err := p.DefinitionsAs(northgate.RoleCaller, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(defs)
	if !strings.Contains(string(b), northgate.ToolVerifyPassphrase) || strings.Contains(string(b), "sealed:") || strings.Contains(string(b), "sf_") {
		t.Fatalf("the caller's definitions: %s", b)
	}
}
