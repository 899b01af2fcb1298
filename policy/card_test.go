package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestACardValueIsItselfOrItsJSON: a value that reads as itself is shown as
// it is; any other is shown as a JSON string that decodes to it and holds
// nothing but printable ASCII and the letters, digits and marks it had.
func TestACardValueIsItselfOrItsJSON(t *testing.T) {
	for _, s := range []string{"stolen", "été", "a b", "Order 40 cases.", "", " edge", "x · Now: y", "a\u00a0·\u00a0b", "a\u2022b",
		"a\u30fbb", "a\u2028b", "a\u2029b", "a\u202eb", "a\u2066b", "a\u0085b", "a\u009bb", "a\u200bb", "a\ue000b", "\u0301a", "a\tb",
		`say "hi" \ bye`, "a\U0001d173b", "a\U000e0001b", "a\u3000b", "a\u2007b", "x \u318d Now: y"} {
		got := policy.CardValue(s)
		if got == s {
			if s == "" || strings.ContainsAny(s, "·\u00a0\u2028\u202e\u0085\t\u3000\u318d") || strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\u0301") {
				t.Errorf("%q is shown as it is", s)
			}
			continue
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back != s {
			t.Errorf("%q is shown as %s, which decodes to %q (%v)", s, got, back, err)
		}
		for _, r := range got {
			if r < ' ' || r == 0x7f || r == '·' || r == '\u00a0' || r >= 0x2000 && r <= 0x206f || r >= 0xe000 && r <= 0xf8ff || r >= 0x80 && r <= 0x9f {
				t.Errorf("%q is shown as %s, which holds %U", s, got, r)
			}
		}
	}
	if got := policy.CardJSON(`{"a":["x\u00a0·\u00a0y"],"b":1}`); got != `{"a":["x\u00a0\u00b7\u00a0y"],"b":1}` {
		t.Errorf("a nested value: %s", got)
	}
}
