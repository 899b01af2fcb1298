package policy

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/toolgate/toolgate/toolargs"
)

// Pack is a pack as the engine reads it: one team's tools, the policy rows that gate them, the
// evidence their approvals need, the roles they name and the formats their
// args use. The engine knows no domain of its own: every tool a deployment
// gates comes in a Pack, and New checks it whole before anything runs.
type Pack struct {
	// Name names the pack in configuration and in errors, e.g. "plancover".
	Name string
	// System is how messages to the model name the pack's upstream, e.g.
	// "the member portal".
	System string
	// Roles are the session roles the pack's rows name, in the order the
	// card UI lists them.
	Roles []RoleSpec
	// Tools are the pack's tools, in the order they are offered.
	Tools []ToolSpec
	// Rows are the policy table: exactly one per tool.
	Rows []Row
	// Evidence is the table beside it: for each approve row, the sign-in an
	// approval needs by the card's value, first match wins (StrictestEvidence
	// when none matches).
	Evidence []EvidenceRule
	// Formats are the validate tags the pack's args use beyond the
	// validator's own.
	Formats []Format
	// Unit is what the pack's values count (a currency, or none).
	Unit Unit
	// Resources are the kinds of thing the pack's credentials grant and its
	// tools act on (ToolSpec.Resource).
	Resources []ResourceKind
	// Verification, when set, is the pack's ladder of caller tiers, earned
	// in a conversation by its verification tools (ToolSpec.Verifies) and
	// needed by its rows (Row.Verified).
	Verification *Verification
}

// RoleSpec is one of a pack's roles.
type RoleSpec struct {
	// Name is the role as sessions and decisions carry it.
	Name Role
	// Label is how the card UI shows it, e.g. "Card supervisor".
	Label string
}

// Format is a validate tag a pack defines for its string args: a value
// passes when it matches Pattern. Rule completes "Field "x" ..." in the
// refusal, e.g. `must be a portal reference such as "PRT-40122"`. The args
// codec reads it; a pack states it here.
type Format = toolargs.Format

// formatTag is the shape of a format's tag: the validator panics on
// punctuation in one, and reserves words such as dive and isdefault.
var formatTag = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// reservedTags are the validator's own words a format may not take.
var reservedTags = []string{"dive", "keys", "endkeys", "omitnil", "omitzero", "isdefault", "structonly", "nostructlevel", "eq", "ne", "len", "gt", "gte", "lt", "lte"}

// ReservedRole is the card UI's own role (approvals.RoleAuditor): it
// decides no card, so no pack may route one to it or grant tools by it.
const ReservedRole Role = "auditor"

// check finds what makes a pack unusable on its own: no name, a row
// naming an undeclared role, a declared role no row names, a format
// without a pattern. Tools and rows are checked by New across packs.
func (d Pack) check() error {
	if !ValidID(d.Name) {
		return fmt.Errorf("a pack needs a name of 1 to %d letters, digits or . _ @ -, not %q", MaxIDLength, toolargs.Clip(d.Name))
	}
	if d.System == "" {
		return fmt.Errorf("pack %s: System must name its upstream for messages to the model, e.g. \"the member portal\"", d.Name)
	}
	declared := map[Role]bool{}
	for _, r := range d.Roles {
		if r.Name == "" || !ValidID(string(r.Name)) {
			return fmt.Errorf("pack %s: role %q must be 1 to %d letters, digits or . _ @ -", d.Name, toolargs.Clip(string(r.Name)), MaxIDLength)
		}
		if declared[r.Name] {
			return fmt.Errorf("pack %s: role %q is declared twice", d.Name, r.Name)
		}
		if r.Name == ReservedRole {
			return fmt.Errorf("pack %s: the role %q is the card UI's own (it reads the audit log and decides no card); name the pack's role otherwise", d.Name, r.Name)
		}
		declared[r.Name] = true
	}
	named := map[Role]bool{}
	for _, row := range d.Rows {
		for _, r := range row.Roles {
			named[r] = true
			if !declared[r] {
				return fmt.Errorf("pack %s: the row of %s names the role %q, which the pack does not declare (Roles)", d.Name, row.Tool, r)
			}
		}
		for _, a := range row.Approvers {
			named[a.Role] = true
			if !declared[a.Role] {
				return fmt.Errorf("pack %s: the row of %s routes cards to the role %q, which the pack does not declare (Roles)", d.Name, row.Tool, a.Role)
			}
		}
	}
	for _, r := range d.Roles {
		if !named[r.Name] {
			return fmt.Errorf("pack %s: the role %q is declared but no row names it", d.Name, r.Name)
		}
	}
	if err := d.checkVerification(); err != nil {
		return err
	}
	if err := checkKinds(d); err != nil {
		return err
	}
	if err := d.Unit.check(); err != nil {
		return fmt.Errorf("pack %s: %w", d.Name, err)
	}
	for _, f := range d.Formats {
		if f.Tag == "" || f.Pattern == nil || f.Rule == "" {
			return fmt.Errorf("pack %s: format %q needs a tag, a pattern and a rule", d.Name, f.Tag)
		}
		if slices.Contains(toolargs.BuiltinTags, f.Tag) || slices.Contains(reservedTags, f.Tag) {
			return fmt.Errorf("pack %s: format %q takes the name of a built-in rule", d.Name, f.Tag)
		}
		if !formatTag.MatchString(f.Tag) {
			return fmt.Errorf("pack %s: format %q must be 1 to 64 lower-case letters, digits or _, starting with a letter", d.Name, toolargs.Clip(f.Tag))
		}
	}
	for _, r := range d.Evidence {
		if !slices.ContainsFunc(d.Rows, func(row Row) bool { return row.Tool == r.Tool }) {
			return fmt.Errorf("pack %s: an evidence rule names %q, which has no row", d.Name, r.Tool)
		}
		if acrRank(r.ACR) < 0 {
			return fmt.Errorf("pack %s: the evidence rule of %s needs acr %q, which is not one of %v", d.Name, r.Tool, r.ACR, ACRLevels)
		}
	}
	return nil
}
