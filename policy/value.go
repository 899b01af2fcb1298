package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/toolargs"
	"golang.org/x/text/currency"
)

// Unit is what a pack's values count: a currency, in its minor units (the
// cents of USD, none for JPY), or, with no currency, plain numbers. The
// chain compares values as integers; the unit only says how to write one.
type Unit struct {
	// Currency is an ISO 4217 code, e.g. "USD" or "EUR"; "" for none.
	Currency string
}

// check refuses a currency ISO 4217 does not know.
func (u Unit) check() error {
	if u.Currency == "" {
		return nil
	}
	if _, err := currency.ParseISO(u.Currency); err != nil || strings.ToUpper(u.Currency) != u.Currency {
		return fmt.Errorf("the currency %q is not an ISO 4217 code such as USD or EUR", toolargs.Clip(u.Currency))
	}
	return nil
}

// Format writes a value in the unit: $1,234.56, €12.50, ¥500, CHF 12.50,
// or 1,234 with no currency. Minor units and symbols come from the Unicode
// CLDR data of golang.org/x/text/currency.
func (u Unit) Format(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if u.Currency == "" {
		return sign + group(v)
	}
	cur, err := currency.ParseISO(u.Currency)
	if err != nil {
		return sign + group(v) + " " + u.Currency
	}
	scale, _ := currency.Standard.Rounding(cur)
	symbol := fmt.Sprint(currency.NarrowSymbol(cur))
	if r := []rune(symbol); len(r) > 0 && unicode.IsLetter(r[len(r)-1]) {
		symbol += " " // CHF 12.50, not CHF12.50
	}
	div := int64(1)
	for range scale {
		div *= 10
	}
	out := sign + symbol + group(v/div)
	if scale > 0 {
		out += fmt.Sprintf(".%0*d", scale, v%div)
	}
	return out
}

// group writes n with a comma between each three digits.
func group(n int64) string {
	whole := strconv.FormatInt(n, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return whole
}

// Dollars formats cents as $1,234.56 (the unit of USD).
func Dollars(cents int64) string { return Unit{Currency: "USD"}.Format(cents) }

// FormatValue writes a value of a tool in its pack's unit.
func (p *Policy) FormatValue(tool string, v int64) string {
	d, _ := p.PackOf(tool)
	return d.Unit.Format(v)
}

// Valued reports whether a tool's calls have a value: its dry run gives
// one (an MCP tool's preview gives none), or an arg holds it. A card of a
// tool without one says so.
func (p *Policy) Valued(tool string) bool {
	s, ok := p.specs[tool]
	return ok && (s.DryRun && (s.MCP == nil || s.MCP.Preview == nil) || s.ValueArg != "")
}
