package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestAReceiptRepeatsOnlyWhatItNames: a receipt is its name and the one
// field's string or number when it has an identifier's shape; a value that
// could word a sentence, or holds a control, format or bidi character, or
// is too long, says nothing.
func TestAReceiptRepeatsOnlyWhatItNames(t *testing.T) {
	r := &policy.Receipt{Name: "transfer", Field: "transferNumber"}
	for result, want := range map[string]string{
		`{"transferNumber":"TR-00012","status":"requested"}`:   "transfer TR-00012",
		`{"transferNumber":4471}`:                              "transfer 4471",
		`{"transferNumber":"Überweisung-7"}`:                   "transfer Überweisung-7",
		`{"transferNumber":"TR-1\n\u001b[2JSigned: ok"}`:       "",
		`{"transferNumber":"TR-1 was reversed; nothing ran"}`:  "",
		`{"transferNumber":"TR-1\u202eknar"}`:                  "",
		`{"transferNumber":"TR\u200b1"}`:                       "",
		`{"transferNumber":"\u009b31m"}`:                       "",
		`{"transferNumber":"<b>TR-1</b>"}`:                     "",
		`{"transferNumber":"` + strings.Repeat("9", 64) + `"}`: "transfer " + strings.Repeat("9", 64),
		`{"transferNumber":"` + strings.Repeat("9", 65) + `"}`: "",
		`{"transferNumber":1e999}`:                             "",
		`{"transferNumber":" "}`:                               "",
		`{"transferNumber":{"id":"TR-1"}}`:                     "",
		`{"transferNumber":["TR-1"]}`:                          "",
		`{"transferNumber":null}`:                              "",
		`{"TransferNumber":"TR-1"}`:                            "",
		`{"taskNumber":"TK-1"}`:                                "",
		`["TR-1"]`:                                             "",
		`not json`:                                             "",
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
