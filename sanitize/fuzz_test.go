package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResult: whatever a tool returns, the sanitized result is valid JSON,
// fits the limit, and shows no token or bearer credential.
func FuzzResult(f *testing.F) {
	f.Add([]byte(`{"items":[{"id":1,"text":"call +233 24 123 4567"}],"offset":0}`), 400)
	f.Add([]byte(`{"token":"mgv1.abc.def","note":"Bearer mgv1.eyJzdWIiOiJhbWEifQ.c2ln"}`), 4000)
	f.Add([]byte(`["`+strings.Repeat("x", 5000)+`"]`), 300)
	f.Add([]byte(`not json`), 200)
	f.Add([]byte(`{"a":{"b":{"c":[1,2,3,4,5,6,7,8,9,10,11,12]}}}`), 200)
	f.Fuzz(func(t *testing.T, raw []byte, max int) {
		if max < 200 || max > 100000 {
			max = 200 + (max&0xffff)%5000
		}
		out := Sanitizer{MaxChars: max}.Result(raw)
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if n := utf8.RuneCount(out); n > max {
			t.Fatalf("%d characters, limit %d", n, max)
		}
		if m := tokenRe.Find(out); m != nil {
			t.Fatalf("a token survived: %s", m)
		}
		if m := bearerRe.Find(out); m != nil && !strings.Contains(string(m), Redacted) {
			t.Fatalf("a bearer credential survived: %s", m)
		}
	})
}
