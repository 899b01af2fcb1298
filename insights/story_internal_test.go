package insights

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAStoryShowsArgsOnTheirOwnLine: args and results are written on one
// line, and a model's string cannot start another line of the story or turn
// the rest of it around.
func TestAStoryShowsArgsOnTheirOwnLine(t *testing.T) {
	for raw, want := range map[string]string{
		`{"note":"a\u2028      result: {}"}`: `{"note":"a\u2028      result: {}"}`,
		"{\"note\":\"a\u202eb\"}":            `{"note":"a\u202eb"}`,
		"{\"note\":\"a\u0085b\"}":            `{"note":"a\u0085b"}`,
		"{\"note\":\"a\u00a0b\"}":            `{"note":"a\u00a0b"}`,
		`{"n":1}`:                            `{"n":1}`,
	} {
		got := compact(json.RawMessage(raw))
		if got != want || strings.ContainsFunc(got, func(r rune) bool { return r > 0x7e }) {
			t.Errorf("%q is written %q, want %q", raw, got, want)
		}
	}
}
