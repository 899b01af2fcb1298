package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/toolargs"
)

// Verification is a pack's ladder of caller tiers: what a caller has
// proved in one conversation (a passphrase, a one-time code), as opposed
// to who they signed in as. Risk follows the verb: each row names the tier
// its tool needs (Row.Verified), a row that names none needs the strictest
// (a forgotten classification is friction, never a hole), and only the
// pack's verification tools (ToolSpec.Verifies) raise a caller's tier,
// never the model. Wrong answers are counted per person across
// conversations: after Budget of them on one factor the person is locked
// out, every factor grants nothing and every row above the weakest tier
// refuses, until a person hands them back.
type Verification struct {
	// Tiers are the ladder, weakest first, e.g. none, low, medium, high.
	Tiers []string
	// SignedIn is the tier a signed-in caller holds before verifying
	// anything; "" means the weakest.
	SignedIn string
	// Budget is how many wrong answers one factor takes before the person
	// is locked out; 0 means DefaultVerificationBudget.
	Budget int
	// Lasts is how long an earned tier holds in its conversation; 0 means
	// DefaultVerifiedTierLasts.
	Lasts time.Duration
}

// DefaultVerificationBudget is the text's retry budget: one retry, then
// the lockout.
const DefaultVerificationBudget = 2

// DefaultVerifiedTierLasts is how long an earned tier holds.
const DefaultVerifiedTierLasts = 15 * time.Minute

// Factor is what a verification tool checks: the factor's name as the
// model asks for it, the arg that carries it (sealed by the front door
// before the call is started, see SealedTag) and the tier a match grants.
type Factor struct {
	Name   string
	Arg    string
	Grants string
}

// SealedTag is the validate tag of a verification tool's factor arg: the
// value is a one-time reference to the factor, which the front door (the
// MCP server) stored in the vault before starting the call, so no
// history, log, audit row or result holds the factor itself.
const SealedTag = toolargs.SealedTag

// sealedRef is the shape of a sealed factor's reference.
var sealedRef = sealedPattern()

func sealedPattern() *regexp.Regexp {
	return regexp.MustCompile(`^sealed:sf_[0-9a-f]{32}$`)
}

// SealedPrefix begins every sealed reference.
const SealedPrefix = "sealed:"

// IsSealed reports whether s is a sealed reference, never a factor.
func IsSealed(s string) bool { return sealedRef.MatchString(s) }

var sealedFormat = Format{Tag: SealedTag, Pattern: sealedRef,
	Rule: "must be sealed by toolgate's front door (the MCP server), which keeps the factor out of every record; call the tool through it"}

// Rank is a tier's place on the ladder, -1 when it is not on it.
func (v *Verification) Rank(tier string) int {
	if v == nil {
		return -1
	}
	return slices.Index(v.Tiers, tier)
}

// Weakest is the ladder's first tier: what a locked-out or signed-out
// caller holds.
func (v *Verification) Weakest() string { return v.Tiers[0] }

// Strictest is the ladder's last tier: what a row that names none needs.
func (v *Verification) Strictest() string { return v.Tiers[len(v.Tiers)-1] }

// SignedInTier is the tier a signed-in caller holds before verifying.
func (v *Verification) SignedInTier() string {
	if v.SignedIn == "" {
		return v.Weakest()
	}
	return v.SignedIn
}

// BudgetOrDefault is the number of wrong answers a factor takes.
func (v *Verification) BudgetOrDefault() int {
	if v.Budget <= 0 {
		return DefaultVerificationBudget
	}
	return v.Budget
}

// LastsOrDefault is how long an earned tier holds.
func (v *Verification) LastsOrDefault() time.Duration {
	if v.Lasts <= 0 {
		return DefaultVerifiedTierLasts
	}
	return v.Lasts
}

// TierFor is the tier an action of the pack needs: its row's, or the
// strictest when it has no row or names none (an unknown action, the empty
// name). Fail-safe defaults: a registry permissive by omission is an
// allowlist anyone can join by accident.
func (d Pack) TierFor(action string) string {
	if d.Verification == nil {
		return ""
	}
	for _, r := range d.Rows {
		if r.Tool == action && action != "" {
			if d.Verification.Rank(r.Verified) >= 0 {
				return r.Verified
			}
			break
		}
	}
	return d.Verification.Strictest()
}

// FactorFor is the verification tool to ask for when a caller holds held
// and needs need: of the factors the caller may give now (their tool's row
// needs no more than held) and that raise them, the first that reaches
// need, else the one that raises them most; ok false when none does.
func (d Pack) FactorFor(held, need string) (tool string, f Factor, ok bool) {
	v := d.Verification
	best := -1
	for _, t := range d.Tools {
		g := t.Verifies
		if g == nil || v.Rank(d.TierFor(t.Name)) > v.Rank(held) || v.Rank(g.Grants) <= v.Rank(held) {
			continue
		}
		if v.Rank(g.Grants) >= v.Rank(need) {
			return t.Name, *g, true
		}
		if v.Rank(g.Grants) > best {
			best, tool, f, ok = v.Rank(g.Grants), t.Name, *g, true
		}
	}
	return tool, f, ok
}

// VerifiedNeed is what a verdict of a pack with a ladder needs of the
// caller, recorded with it: the tier, and why the row needs it.
type VerifiedNeed struct {
	Tier string `json:"tier"`
	Why  string `json:"why,omitempty"`
}

// checkVerification refuses a ladder or a row that could not be enforced:
// tiers that repeat, a row's tier off the ladder, a verification tool whose
// factor is not a sealed string arg, that may be retried (each attempt
// spends the budget), that runs as no one, or that grants no tier of the
// ladder; and a tier some row needs that no factor can reach.
func (d Pack) checkVerification() error {
	v := d.Verification
	if v == nil {
		for _, r := range d.Rows {
			if r.Verified != "" {
				return fmt.Errorf("pack %s: the row of %s needs the verified tier %q, but the pack declares no ladder (Verification)", d.Name, r.Tool, r.Verified)
			}
		}
		for _, t := range d.Tools {
			if t.Verifies != nil {
				return fmt.Errorf("pack %s: %s verifies %q, but the pack declares no ladder (Verification)", d.Name, t.Name, t.Verifies.Name)
			}
		}
		return nil
	}
	if len(v.Tiers) < 2 {
		return fmt.Errorf("pack %s: a verification ladder needs at least two tiers, weakest first", d.Name)
	}
	for i, t := range v.Tiers {
		if !ValidID(t) || slices.Index(v.Tiers, t) != i {
			return fmt.Errorf("pack %s: the ladder's tier %q must be a distinct ID", d.Name, toolargs.Clip(t))
		}
	}
	if v.SignedIn != "" && v.Rank(v.SignedIn) < 0 {
		return fmt.Errorf("pack %s: the signed-in tier %q is not on the ladder %v", d.Name, v.SignedIn, v.Tiers)
	}
	reach := v.Rank(v.SignedInTier())
	factors := map[string]bool{}
	for _, t := range d.Tools {
		f := t.Verifies
		if f == nil {
			continue
		}
		if factors[f.Name] || !ValidID(f.Name) {
			return fmt.Errorf("pack %s: %s verifies %q, which must be a distinct ID", d.Name, t.Name, toolargs.Clip(f.Name))
		}
		factors[f.Name] = true
		if v.Rank(f.Grants) < 0 {
			return fmt.Errorf("pack %s: %s grants %q, which is not on the ladder %v", d.Name, t.Name, f.Grants, v.Tiers)
		}
		if t.Idempotent || !t.RequiresCredential || t.Route.Method != "POST" || !slices.Contains(t.Route.Body, f.Arg) {
			return fmt.Errorf("pack %s: %s verifies a factor, so it runs once (not Idempotent), as the signed-in person (RequiresCredential), and POSTs its factor arg %q in the body", d.Name, t.Name, f.Arg)
		}
		arg, ok := fieldByName(t.Args, f.Arg)
		if !ok || arg.Type.Kind() != reflect.String || !slices.Contains(strings.Split(arg.Validate, ","), SealedTag) {
			return fmt.Errorf("pack %s: %s's factor arg %q must be a string field with the validate rule %q", d.Name, t.Name, f.Arg, SealedTag)
		}
		if v.Rank(d.TierFor(t.Name)) >= v.Rank(f.Grants) {
			return fmt.Errorf("pack %s: %s grants %q but its row needs %q: no caller could ever give it (a verification row that names no tier needs the strictest)", d.Name, t.Name, f.Grants, d.TierFor(t.Name))
		}
		reach = max(reach, v.Rank(f.Grants))
	}
	for _, r := range d.Rows {
		need := d.TierFor(r.Tool)
		if r.Verified != "" && v.Rank(r.Verified) < 0 {
			return fmt.Errorf("pack %s: the row of %s needs the tier %q, which is not on the ladder %v", d.Name, r.Tool, r.Verified, v.Tiers)
		}
		if v.Rank(need) > reach {
			return fmt.Errorf("pack %s: the row of %s needs the tier %q, which no verification tool of the pack grants", d.Name, r.Tool, need)
		}
		if v.Rank(need) > 0 && !specOf(d, r.Tool).RequiresCredential {
			return fmt.Errorf("pack %s: the row of %s needs the tier %q, but the tool runs as no one (RequiresCredential is false), so no caller's tier can be held to it", d.Name, r.Tool, need)
		}
	}
	return nil
}

func specOf(d Pack, tool string) ToolSpec {
	for _, t := range d.Tools {
		if t.Name == tool {
			return t
		}
	}
	return ToolSpec{}
}

// Withheld is a verification tool's args with every value but a sealed
// reference withheld, under whatever key: for the audit row of a call
// refused before its factor was known to be sealed (a client that sent it
// in the clear, under the arg's name or another spelling).
func Withheld(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return json.RawMessage(`{}`)
	}
	for k, raw := range m {
		var s string
		if json.Unmarshal(raw, &s) != nil || !IsSealed(s) {
			m[k] = json.RawMessage(`"(withheld)"`)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
