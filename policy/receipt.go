package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// Receipt names the field of a tool's result that identifies what the call
// made upstream (Field, e.g. "transferNumber") and what a person calls that
// thing (Name, e.g. "transfer"): an executed card and a call's story say
// "transfer TR-00012" without the engine knowing what a transfer is.
type Receipt struct {
	Name  string
	Field string
}

// receiptName and receiptField are what a receipt's Name and Field may be:
// words a person reads beside a value, and one top-level field of the
// result, never markup or a path into it. receiptValue is the shape of an
// identifier: letters and digits of any script and a few separators, no
// space, so an upstream's value can name a thing but never word a sentence
// on a card ("TR-1 was reversed; nothing ran"), and no control, format or
// bidi character.
var (
	receiptName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9 _-]{0,39}$`)
	receiptField = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	receiptValue = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N}._:#/+-]{0,63}$`)
)

// Check says what is wrong with a receipt a pack declares, nil when
// nothing is.
func (r *Receipt) Check() error {
	if r == nil || receiptName.MatchString(r.Name) && receiptField.MatchString(r.Field) {
		return nil
	}
	return fmt.Errorf("a receipt %q in field %q: its name is a word or a few a person reads (letters, digits, spaces, '_' or '-', up to 40) and its field one top-level field of the tool's result (letters, digits or '_', up to 64)", r.Name, r.Field)
}

// Of is the receipt in a call's result ("transfer TR-00012"): "" when the
// tool has none, or the result holds no string or number of an
// identifier's shape in the field.
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
		s = v
	case float64:
		s = string(fields[r.Field])
	}
	if !receiptValue.MatchString(s) {
		return ""
	}
	return r.Name + " " + s
}
