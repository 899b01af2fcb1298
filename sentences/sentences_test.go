package sentences

import (
	"strings"
	"testing"
)

// TestEveryKeyHasItsWords: no key says nothing, and no words hold a
// double space (where two phrases meet, one of them brings the space).
func TestEveryKeyHasItsWords(t *testing.T) {
	for k := Key(0); k < keys; k++ {
		w := table[k]
		if w == "" {
			t.Errorf("key %d has no words", k)
			continue
		}
		if strings.Contains(w, "  ") {
			t.Errorf("key %d: stray space in %q", k, w)
		}
	}
}

// TestSayWritesTheParameters: a sentence without parameters is its words;
// one with them is written as fmt writes them, positions and all.
func TestSayWritesTheParameters(t *testing.T) {
	if got := Say(Allowed); got != "Allowed." {
		t.Errorf("Allowed: %q", got)
	}
	if got := Say(NoResourceHeld, "store"); got != "The signed-in person has no store, so there is no default store for this call. Do not retry; tell the person their account has no store assigned." {
		t.Errorf("NoResourceHeld: %q", got)
	}
	if got := Capital("the member portal"); got != "The member portal" {
		t.Errorf("Capital: %q", got)
	}
}

// TestCapitalTakesAWholeLetter: a pack names its system in its own
// language; the first letter is upper-cased whole, never cut in its bytes.
func TestCapitalTakesAWholeLetter(t *testing.T) {
	for in, want := range map[string]string{"": "", "the member portal": "The member portal", "état des stocks": "État des stocks", "ölçüm": "Ölçüm"} {
		if got := Capital(in); got != want {
			t.Errorf("Capital(%q) = %q, want %q", in, got, want)
		}
	}
}
