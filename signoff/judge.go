package signoff

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"
)

// Rules are what a decision must match to count on one card, fixed when
// the card went up (and by each edit): Judge takes them, a decision and
// the time, and says whether the decision counts.
type Rules struct {
	// Role is the approver role the card is routed to; EscalateTo is
	// offered it as well once Escalated.
	Role       policy.Role
	EscalateTo policy.Role
	Escalated  bool
	Resource   policy.ResourceRef
	// ArgsHash is the hash of the action the decision must name; Card, UpAt
	// and Expires what its signature binds.
	ArgsHash      string
	Card          CardRef
	UpAt, Expires time.Time
	Keys          ApprovalKeys
	// WithdrawKeys are the MCP server's: they sign a withdrawal, or a
	// decision made in the requester's own client (InClient), alone; any
	// other decision signed by one does not verify, nor does a decision in
	// the client signed by any other key.
	WithdrawKeys ApprovalKeys
	Issuers      []string
	// Evidence is the sign-in an approval needs; nil on cards recorded
	// before evidence rules.
	Evidence *policy.Requirement
	// Need is how many different people must approve (the two-person rule
	// at 2): never the requester, never one of Approvals twice.
	Need            int
	Requester       string
	RequesterPerson Person
	Approvals       []Approval
	// BySignIn tells people apart by the issuer and subject of their
	// sign-in as well as their user ID, and holds a rejection to a sign-in
	// alone; cards put up before it tell them apart by user ID.
	BySignIn bool
	// Action is what runs if approved; an edit may change Editable alone.
	Action   json.RawMessage
	Editable []string
	// Withdrawable says the requester may withdraw the card (Withdraw);
	// cards put up before withdrawals refuse one as an unknown decision.
	Withdrawable bool
	// ConfirmInClient says the card's row lets its requester approve or
	// reject it in their own client (policy.Row.ConfirmInClient).
	ConfirmInClient bool
}

// Judgment is whether a decision counts (Code is CodeOK) and, when it
// does not, why; Verified says its signature held, whatever else failed.
type Judgment struct {
	Code     policy.Code
	Why      string
	Verified bool
}

// Judge decides whether decision a counts on a card with rules r at time
// now: in time, signed for this card, by its role over its resource for
// its action, with the evidence it needs, an edit that changes only what
// may change, and, where several must approve, from someone who has not
// (nor asked for it). It is a pure function of its arguments.
func Judge(r Rules, a Approval, now time.Time) Judgment {
	if _, mcp := r.WithdrawKeys[a.KeyID]; mcp && a.Decision == Withdraw || InClient(a) {
		r.Keys = r.WithdrawKeys
	}
	if !now.Before(r.Expires) {
		ok, _ := VerifyApproval(a, r.Card, r.UpAt, r.Expires, r.Keys)
		return Judgment{Code: policy.CodeExpired, Why: "the card expired before this decision arrived", Verified: ok}
	}
	if ok, why := VerifyApproval(a, r.Card, r.UpAt, r.Expires, r.Keys); !ok {
		if v := r.signedFor(a); v > 0 {
			return Judgment{Code: policy.CodeInvalidArguments, Verified: true,
				Why: fmt.Sprintf("the decision was signed for version %d of the card, and it is version %d now: an edit has changed it since", v, r.Card.Version)}
		}
		return Judgment{Code: policy.CodeCredentialUnavailable, Why: why}
	}
	j := Judgment{Verified: true}
	if a.Decision == Withdraw {
		j.Code, j.Why = r.checkWithdrawal(a, now)
		return j
	}
	if InClient(a) {
		if j.Code, j.Why = r.checkInClient(a); j.Code != policy.CodeOK {
			return j
		}
		// The requester's own provider vouches for the sign-in, as it did
		// when the call was admitted, whether or not it names approvers.
		r.Issuers = append(slices.Clip(r.Issuers), r.RequesterPerson.Issuer)
	}
	role := r.Role
	if r.Escalated && a.Approver.Role == r.EscalateTo {
		role = r.EscalateTo
	}
	if j.Code, j.Why = CheckApproval(a, role, r.Resource, r.ArgsHash); j.Code != policy.CodeOK {
		return j
	}
	if j.Code, j.Why = r.checkEvidence(a, now); j.Code != policy.CodeOK {
		return j
	}
	if a.Decision == Edit {
		if _, err := ApplyEdit(r.Action, a.Edit, r.Editable); err != nil {
			j.Code, j.Why = policy.CodeInvalidArguments, err.Error()
			return j
		}
	}
	if r.Need > 1 {
		if r.Same(a, r.RequesterPerson, r.Requester) {
			j.Code, j.Why = policy.CodeRole, fmt.Sprintf("%s asked for this, and a card that needs %d approvers takes none from its requester", r.Requester, r.Need)
			return j
		}
		for _, earlier := range r.Approvals {
			if r.Same(a, PersonOf(earlier), earlier.Approver.UserID) {
				j.Code, j.Why = policy.CodeRole, fmt.Sprintf("%s has already approved; the card needs %d different people", earlier.Approver.UserID, r.Need)
				return j
			}
		}
	}
	return j
}

// checkWithdrawal holds a withdrawal to its card and its requester: the
// card's args hash, a sign-in at a trusted identity provider, and the very
// person who asked (IsRequester). A second name never withdraws another
// person's call: unlike SamePerson, which may only refuse, this match lets
// a decision count. The provider that named the requester is trusted to
// name them again, whether or not it names approvers: the call was
// admitted on its word.
func (r Rules) checkWithdrawal(a Approval, now time.Time) (policy.Code, string) {
	if !r.Withdrawable {
		return policy.CodeInvalidArguments, "this card was put up before a requester could withdraw one; it waits for its approvers or its expiry"
	}
	if a.ArgsHash != r.ArgsHash {
		return policy.CodeInvalidArguments, "the args hash does not match the card: the card shown is not the one pending"
	}
	issuers := r.Issuers
	if r.RequesterPerson.Known() {
		issuers = append(slices.Clip(issuers), r.RequesterPerson.Issuer)
	}
	if code, why := CheckSignIn(a, issuers, now); code != policy.CodeOK {
		return code, why
	}
	if !r.RequesterPerson.Known() {
		return policy.CodeRole, "the call's credential names no sign-in, so nobody can show they asked for it: it waits for its approvers or its expiry"
	}
	if !r.IsRequester(a) {
		return policy.CodeRole, fmt.Sprintf("only the person who asked for this call may withdraw it, and %s did not", toolargs.Clip(a.Approver.UserID))
	}
	return policy.CodeOK, ""
}

// checkInClient holds a decision made in the requester's own client to
// what its weaker evidence may decide: a card whose row allows it (a card
// several must approve takes none from its requester, as Judge holds
// after), approved or rejected (an edit is made at the card UI), by the
// very person who asked (the issuer and subject of their sign-in; no
// operator vouches for one). The role, resource, args hash and sign-in
// level and age are checked after, as for any decision.
func (r Rules) checkInClient(a Approval) (policy.Code, string) {
	switch {
	case !r.ConfirmInClient:
		return policy.CodeStepUpRequired, "this card's row does not take a confirmation in the requester's own client: decide it signed in at the card UI"
	case r.Evidence == nil:
		return policy.CodeStepUpRequired, "this card names no sign-in an approval needs, so a confirmation in the client has nothing to meet: decide it at the card UI"
	case a.Decision != Approve && a.Decision != Reject:
		return policy.CodeInvalidArguments, fmt.Sprintf("a confirmation in the client approves or rejects the card, never %q: make any other decision at the card UI", toolargs.Clip(a.Decision))
	case !r.RequesterPerson.Known() || PersonOf(a) != r.RequesterPerson:
		return policy.CodeRole, fmt.Sprintf("only the person who asked for this call may confirm it in their own client, and %s did not", toolargs.Clip(a.Approver.UserID))
	}
	return policy.CodeOK, ""
}

// IsRequester reports whether decision a comes from the card's requester:
// the issuer and subject of the sign-in behind the call's credential, never
// a user ID alone, which two people may share; or an operator who vouches
// for the requester by user ID (OperatorIssuer, trusted only where a
// deployment trusts its operators' word, as make dev does). A card whose
// requester names no person has none.
func (r Rules) IsRequester(a Approval) bool {
	if !r.RequesterPerson.Known() {
		return false
	}
	p := PersonOf(a)
	return p == r.RequesterPerson || p.Issuer == OperatorIssuer && r.Requester != "" && a.Approver.UserID == r.Requester
}

// OperatorIssuer names an operator holding the signing key (starter) as
// the issuer of the sign-in evidence its decisions carry: their word, which
// counts only where TOOLGATE_APPROVER_ISSUERS lists it.
const OperatorIssuer = "urn:toolgate:operator"

// signedFor is the earlier version of the card a decision's signature
// names, or 0 when it names none. A card is edited a few times at most
// (its workflow bounds them), so this is a few checks.
func (r Rules) signedFor(a Approval) int {
	for v := r.Card.Version - 1; v >= 1; v-- {
		earlier := r.Card
		earlier.Version = v
		if ok, _ := VerifyApproval(a, earlier, r.UpAt, r.Expires, r.Keys); ok {
			return v
		}
	}
	return 0
}

// checkEvidence holds a decision to the sign-in it needs: an approval or
// an edit to the card's level and age, a rejection (BySignIn) to a sign-in
// alone.
func (r Rules) checkEvidence(a Approval, now time.Time) (policy.Code, string) {
	if r.BySignIn && a.Decision == Reject && r.Evidence != nil {
		return CheckSignIn(a, r.Issuers, now)
	}
	return CheckEvidence(a, r.Evidence, r.Issuers, now)
}

// Same reports whether decision a comes from the person named by p and
// userID: by user ID alone unless BySignIn, and then by the issuer and
// subject of the sign-in too.
func (r Rules) Same(a Approval, p Person, userID string) bool {
	if !r.BySignIn {
		return a.Approver.UserID == userID
	}
	return SamePerson(PersonOf(a), a.Approver.UserID, p, userID)
}
