package policy

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Receipt names the field of a tool's result that identifies what the call
// made upstream (Field, e.g. "transferNumber") and what a person calls that
// thing (Name, e.g. "transfer"): an executed card and a call's story say
// "transfer TR-00012" without the engine knowing what a transfer is.
type Receipt struct {
	Name  string
	Field string
}

// maxReceiptChars bounds what of an upstream's value a card or a story
// repeats.
const maxReceiptChars = 64

// receiptName and receiptField are what a receipt's Name and Field may be:
// words a person reads beside a value, and one top-level field of the
// result, never markup or a path into it.
var (
	receiptName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9 _-]{0,39}$`)
	receiptField = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// Of is the receipt in a call's result ("transfer TR-00012"), "" when the
// tool has none or the result does not hold a string or number there.
func (r *Receipt) Of(result json.RawMessage) string {
	if r == nil {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(result, &fields) != nil {
		return ""
	}
	var v any
	if json.Unmarshal(fields[r.Field], &v) != nil {
		return ""
	}
	var s string
	switch v := v.(type) {
	case string:
		s = strings.Map(func(c rune) rune {
			if c < ' ' || c == 0x7f {
				return -1
			}
			return c
		}, v)
	case float64:
		s = string(fields[r.Field])
	}
	if strings.TrimSpace(s) == "" {
		return ""
	}
	if rs := []rune(s); len(rs) > maxReceiptChars {
		s = string(rs[:maxReceiptChars]) + "…"
	}
	return r.Name + " " + s
}
