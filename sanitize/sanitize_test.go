package sanitize

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextRedactsSecretsAndPII(t *testing.T) {
	cases := map[string]string{
		"Authorization: Bearer mgv1.eyJzdWIiOiJhbWEifQ.c2lnbmF0dXJl": "mgv1.",
		"token=mgv1.abc_DEF-123.sig-456 end":                         "mgv1.",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc":               "eyJhbGci",
		"mail ama@mangrove.example now":                              "ama@",
		"call +233 24 123 4567 please":                               "123 4567",
		"card 4111 1111 1111 1111 ok":                                "4111",
		"key sk-abcdefghijklmnopqrstuv":                              "sk-abc",
	}
	for in, leak := range cases {
		if out := Text(in); strings.Contains(out, leak) {
			t.Errorf("Text(%q) = %q still holds %q", in, out, leak)
		}
	}
	for _, keep := range []string{"Article 40211 at store 112 on 2026-12-01", "TR-000123", "GRN-88213", "6 cases"} {
		if out := Text(keep); out != keep {
			t.Errorf("Text(%q) = %q, want it unchanged", keep, out)
		}
	}
}

func TestArgsRedactsSecretKeys(t *testing.T) {
	out := string(Sanitizer{}.Args(json.RawMessage(`{"title":"Call ama@mangrove.example","apiKey":"k","nested":{"access_token":"t"},"articleId":40211}`)))
	for _, leak := range []string{"ama@", `"k"`, `"t"`} {
		if strings.Contains(out, leak) {
			t.Errorf("%s still holds %s", out, leak)
		}
	}
	if !strings.Contains(out, `"articleId":40211`) {
		t.Errorf("%s lost the article", out)
	}
	if out := string(Sanitizer{}.Args(json.RawMessage(`{bad`))); !strings.Contains(out, "not valid JSON") {
		t.Errorf("bad JSON: %s", out)
	}
}

func page(n, offset, textLen int) json.RawMessage {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"id": offset + i + 1, "title": fmt.Sprintf("Procedure %d", offset+i+1), "excerpt": strings.Repeat("word ", textLen/5)}
	}
	b, _ := json.Marshal(map[string]any{"items": items, "offset": offset, "total": 57})
	return b
}

func TestResultCapsListsWithCursor(t *testing.T) {
	out := Sanitizer{MaxChars: 100000}.Result(page(25, 20, 10))
	var got struct {
		Items      []map[string]any `json:"items"`
		NextCursor string           `json:"nextCursor"`
		Note       string           `json:"note"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != DefaultMaxItems || got.NextCursor != "30" || !strings.Contains(got.Note, "10 of 25") {
		t.Fatalf("got %d items, cursor %q, note %q", len(got.Items), got.NextCursor, got.Note)
	}
}

func TestResultCutsOnARecordBoundary(t *testing.T) {
	s := Sanitizer{MaxChars: 4000}
	out := s.Result(page(10, 0, 900))
	if n := utf8.RuneCount(out); n > 4000 {
		t.Fatalf("result has %d characters, over 4000", n)
	}
	var got struct {
		Items      []map[string]any `json:"items"`
		NextCursor string           `json:"nextCursor"`
		Note       string           `json:"note"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("cut result is not JSON: %v", err)
	}
	if len(got.Items) == 0 || len(got.Items) >= 10 {
		t.Fatalf("kept %d items", len(got.Items))
	}
	for i, it := range got.Items {
		if it["excerpt"] != strings.Repeat("word ", 180) || it["id"] != float64(i+1) {
			t.Fatalf("item %d was altered, not cut on a boundary: %v", i, it)
		}
	}
	if want := fmt.Sprint(len(got.Items)); got.NextCursor != want || !strings.Contains(got.Note, "Cut to fit 4000") || !strings.Contains(got.Note, `"`+want+`"`) {
		t.Fatalf("cursor %q note %q, want cursor %s", got.NextCursor, got.Note, want)
	}
}

func TestResultShortensOneHugeRecord(t *testing.T) {
	long := strings.Repeat("Keep the cold chain. ", 600)
	raw, _ := json.Marshal(map[string]any{"title": "Cold chain", "body": long})
	out := Sanitizer{}.Result(raw)
	if utf8.RuneCount(out) > DefaultMaxChars || !strings.Contains(string(out), "[cut ") || !json.Valid(out) {
		t.Fatalf("got %d chars: %.200s", utf8.RuneCount(out), out)
	}
}

func TestResultNeverReturnsInvalidJSON(t *testing.T) {
	for _, in := range []string{`not json`, `[]`, `"x"`, `{"items":[]}`, `{"a":[` + strings.Repeat(`1,`, 5000) + `1]}`} {
		out := Sanitizer{MaxChars: 200}.Result(json.RawMessage(in))
		if !json.Valid(out) || utf8.RuneCount(out) > 400 {
			t.Errorf("%.40s -> %s", in, out)
		}
	}
}
