package exchange

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestATokenIsForTheAudienceAndPersonAskedFor loops over the tokens a
// provider might answer with: only a JWT whose one audience is the one
// asked for and whose subject is the grant's is taken.
func TestATokenIsForTheAudienceAndPersonAskedFor(t *testing.T) {
	jwt := func(claims string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
	}
	for _, row := range []struct {
		token, want string
	}{
		{jwt(`{"aud":"https://desk.test","sub":"cara"}`), ""},
		{jwt(`{"aud":["https://desk.test"],"sub":"cara"}`), ""},
		{jwt(`{"aud":["https://desk.test","https://bank.test"],"sub":"cara"}`), "another audience"},
		{jwt(`{"aud":"https://desk.test/","sub":"cara"}`), "another audience"},
		{jwt(`{"sub":"cara"}`), "audience does not read"},
		{jwt(`{"aud":"https://desk.test","sub":"sam"}`), "another person"},
		{"opaque-token", "not a JWT"},
		{"a.%%%.c", "claims do not read"},
	} {
		got := forOnly(row.token, "https://desk.test", "cara")
		if (row.want == "") != (got == "") || !strings.Contains(got, row.want) {
			t.Errorf("%s: %q, want %q", row.token, got, row.want)
		}
	}
}
