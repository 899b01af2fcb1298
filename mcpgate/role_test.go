package mcpgate

import (
	"testing"

	"github.com/toolgate/toolgate/internal/packs"
)

// TestARoleClaimReadsAsTheCardUIReadsIt: a string is the role; a list's
// first role a pack declares counts; anything else is no role.
func TestARoleClaimReadsAsTheCardUIReadsIt(t *testing.T) {
	p := packs.MustLoad(packs.Default).Policy
	for _, c := range []struct {
		claim any
		want  string
	}{
		{"store_manager", "store_manager"},
		{[]any{"staff", "area_manager", "store_manager"}, "area_manager"},
		{[]any{"staff"}, ""},
		{42.0, ""},
		{nil, ""},
	} {
		if got := roleOf(c.claim, p); string(got) != c.want {
			t.Errorf("%v: %q, want %q", c.claim, got, c.want)
		}
	}
}
