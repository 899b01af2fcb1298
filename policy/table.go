package policy

import "time"

// Decision is what the policy row says happens to a call that passes every check.
type Decision string

// Decisions, from least to most strict.
const (
	DecisionAllow   Decision = "allow"
	DecisionApprove Decision = "approve"
	DecisionDeny    Decision = "deny"
)

func (d Decision) strictness() int {
	switch d {
	case DecisionAllow:
		return 0
	case DecisionApprove:
		return 1
	}
	return 2 // deny, and anything unknown
}

// Stricter returns the stricter of two decisions.
func Stricter(a, b Decision) Decision {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
}

// Role is a session role.
type Role string

// Scope says whose calls a limit counts together.
type Scope string

// Limit scopes: the signed-in person's calls, or every call on the one
// resource the call names (its tool's ResourceArg), whoever makes it.
const (
	PerUser     Scope = "user"
	PerResource Scope = "resource"
)

// Window is the rolling period a limit counts over, in seconds.
type Window int64

// Windows.
const (
	Hour Window = 3600
	Day  Window = 86400
	// MaxWindow is the longest window a limit may count over: what the
	// limit ledger keeps (limit_usage_keep(), migration 029). A longer
	// one would count less than it says.
	MaxWindow Window = 31 * Day
)

func (w Window) String() string {
	switch w {
	case Hour:
		return "hour"
	case Day:
		return "day"
	}
	return "period"
}

// Limit is a rate or spend limit counted from the audit log.
type Limit struct {
	Scope  Scope
	Window Window
	// MaxCalls caps admitted calls in the window; 0 means no call cap.
	MaxCalls int
	// MaxCents caps the summed value of admitted calls; 0 means no spend cap.
	MaxCents int64
}

// Approver routes a card: the first approver whose UpToCents covers the
// value (0 means no upper bound) and whose When holds names the role that
// decides.
type Approver struct {
	Role      Role
	UpToCents int64
	// When, if set, is a CEL expression over the call's canonical args
	// (args, a map) and its value (value, an int) that must be true, e.g.
	// args.country != "GB" || value > 50000. It is compiled when the pack
	// loads; one that fails to evaluate refuses the call.
	When string
}

// Row is one line of the policy table.
type Row struct {
	Tool     string
	Roles    []Role
	Decision Decision
	// HardLimitCents refuses any single call valued above it; 0 means none.
	HardLimitCents int64
	Limits         []Limit
	// Approvers route approve decisions, in order.
	Approvers []Approver
	// RequesterTier is the acr (ACRLevels) the requester's sign-in, the one
	// that issued their credential, must reach; "" means any.
	RequesterTier string
	// RequesterMaxAge is how old that sign-in may be when the call is
	// asked, for a row with a tier; 0 means RequesterTierMaxAge.
	RequesterMaxAge time.Duration
	// Verified is the tier of the pack's ladder (Pack.Verification) the
	// caller must hold in the conversation; "" means the strictest.
	// VerifiedWhy says why, for the refusal the model relays.
	Verified    string
	VerifiedWhy string
	// Quorum makes a card of a high value need several distinct approvers.
	Quorum []Quorum
	// Editable are the args an approver may change on the card (an edit
	// runs the chain again and puts the card up as a new version).
	Editable []string
	// ConfirmInClient lets the requester decide their own card of one
	// approver in the MCP client that asked (a form of the card's text and
	// approve or reject), where they hold its role and resource: evidence
	// weaker than a sign-in at the card UI (signoff.ConfirmedInClient),
	// which the row must allow.
	ConfirmInClient bool
}

// Quorum is the two-person rule (or more): a card worth more than
// AboveCents needs Approvals distinct approvers of its routed role; the
// requester never counts as one, nor does one person twice.
type Quorum struct {
	AboveCents int64
	Approvals  int
}

// ApprovalsFor returns how many distinct approvers a card of this value
// needs: the largest quorum whose threshold it passes, else 1.
func (r Row) ApprovalsFor(valueCents int64) int {
	n := 1
	for _, q := range r.Quorum {
		if valueCents > q.AboveCents && q.Approvals > n {
			n = q.Approvals
		}
	}
	return n
}

// ApproverFor returns the role that decides a card of this value.
func (r Row) ApproverFor(valueCents int64) (Role, bool) {
	for _, a := range r.Approvers {
		if a.UpToCents == 0 || valueCents <= a.UpToCents {
			return a.Role, true
		}
	}
	return "", false
}

// EscalationFor is the role a card routed to role is also offered to when
// nobody answers in time: the next role up the row's routing, if any.
func (r Row) EscalationFor(role Role) (Role, bool) {
	for i, a := range r.Approvers {
		if a.Role == role {
			for _, b := range r.Approvers[i+1:] {
				if b.Role != role {
					return b.Role, true
				}
			}
			return "", false
		}
	}
	return "", false
}
