package codec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/codec"
)

// TestASealedValueOpensForItsPurposeAlone: a sealed value opens with its
// purpose, under a rotated set that still holds its key; altered, cut,
// for another purpose, or under keys without its own, it does not.
func TestASealedValueOpensForItsPurposeAlone(t *testing.T) {
	k1, k2 := codec.NewKey("k1.2026"), codec.NewKey("k2")
	c, err := codec.Parse(k1, "")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := c.Seal("mcp request state", []byte(`{"wf":"toolcall-c-1"}`))
	if err != nil || !strings.HasPrefix(sealed, "k1.2026.") {
		t.Fatalf("sealed %q: %v", sealed, err)
	}
	rotated, _ := codec.Parse(k2+","+k1, "k2")
	if plain, err := rotated.Open("mcp request state", sealed); err != nil || string(plain) != `{"wf":"toolcall-c-1"}` {
		t.Fatalf("opened %q: %v", plain, err)
	}
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1
	without, _ := codec.Parse(k2, "")
	for name, try := range map[string]func() ([]byte, error){
		"altered":           func() ([]byte, error) { return c.Open("mcp request state", string(flipped)) },
		"cut":               func() ([]byte, error) { return c.Open("mcp request state", sealed[:len(sealed)-4]) },
		"another purpose":   func() ([]byte, error) { return c.Open("card link", sealed) },
		"another key's":     func() ([]byte, error) { return without.Open("mcp request state", sealed) },
		"not sealed at all": func() ([]byte, error) { return c.Open("mcp request state", "k1.2026") },
	} {
		if plain, err := try(); !errors.Is(err, codec.ErrUnsealed) || plain != nil {
			t.Errorf("%s: opened %q, %v", name, plain, err)
		}
	}
}
