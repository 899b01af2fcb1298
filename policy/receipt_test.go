package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestAReceiptRepeatsOnlyWhatItNames: a receipt is its name and the one
// field's string or number, without control characters and clipped; any
// other result says nothing.
func TestAReceiptRepeatsOnlyWhatItNames(t *testing.T) {
	r := &policy.Receipt{Name: "transfer", Field: "transferNumber"}
	long := strings.Repeat("9", 100)
	for result, want := range map[string]string{
		`{"transferNumber":"TR-00012","status":"requested"}`: "transfer TR-00012",
		`{"transferNumber":4471}`:                            "transfer 4471",
		`{"transferNumber":"TR-1\n\u001b[2JSigned: ok"}`:     "transfer TR-1[2JSigned: ok",
		`{"transferNumber":"` + long + `"}`:                  "transfer " + long[:64] + "…",
		`{"transferNumber":" "}`:                             "",
		`{"transferNumber":{"id":"TR-1"}}`:                   "",
		`{"transferNumber":["TR-1"]}`:                        "",
		`{"transferNumber":null}`:                            "",
		`{"taskNumber":"TK-1"}`:                              "",
		`["TR-1"]`:                                           "",
		`not json`:                                           "",
	} {
		if got := r.Of(json.RawMessage(result)); got != want {
			t.Errorf("the receipt of %s: %q, want %q", result, got, want)
		}
	}
	var none *policy.Receipt
	if got := none.Of(json.RawMessage(`{"transferNumber":"TR-1"}`)); got != "" {
		t.Errorf("a tool with no receipt: %q", got)
	}
}
