package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
)

func hostileResults() map[string][]byte {
	many := make([]string, 2000)
	for i := range many {
		many[i] = strings.Repeat("word ", 100)
	}
	manyJSON, _ := json.Marshal(map[string]any{"items": many, "offset": 0})
	return map[string][]byte{
		"digit run":    []byte(`{"t":"` + strings.Repeat("1 2-3.", 50000) + `"}`),
		"many strings": manyJSON,
		"deep nesting": []byte(strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000)),
		"huge list":    []byte(`[` + strings.Repeat(`"x",`, 200000) + `"x"]`),
		"emails":       []byte(`{"t":"` + strings.Repeat("a@b.co ", 40000) + `"}`),
	}
}

// TestHostileResults: inputs built to be slow or large (long digit runs for
// the phone and card patterns, many long strings, deep nesting, huge lists)
// still come out as valid JSON within the limit. BenchmarkHostileResults
// measures their cost.
func TestHostileResults(t *testing.T) {
	for name, in := range hostileResults() {
		out := Sanitizer{MaxChars: 4000}.Result(in)
		if !json.Valid(out) || len([]rune(string(out))) > 4000 {
			t.Errorf("%s: %d characters, valid %v", name, len([]rune(string(out))), json.Valid(out))
		}
	}
}

func BenchmarkHostileResults(b *testing.B) {
	for name, in := range hostileResults() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				Sanitizer{MaxChars: 4000}.Result(in)
			}
		})
	}
}
