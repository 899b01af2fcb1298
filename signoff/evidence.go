package signoff

import (
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"
)

// AuthEvidence is how an approver proved who they are: the identity
// provider's word, carried in the signed decision.
type AuthEvidence struct {
	// Issuer is the identity provider that signed the approver in.
	Issuer string `json:"iss"`
	// Subject is the approver's ID at that provider.
	Subject string `json:"sub"`
	// ACR is the strength of the sign-in (ACRLevels).
	ACR string `json:"acr"`
	// AMR lists the methods used (pwd, otp).
	AMR []string `json:"amr,omitempty"`
	// AuthTime is when the person last authenticated, RFC 3339.
	AuthTime string `json:"authTime"`
	// Via is ConfirmedInClient for a requester's decision made in their own
	// MCP client; absent for one made signed in at the card UI.
	Via string `json:"via,omitempty"`
}

// ConfirmedInClient is the evidence of a decision the requester made in
// the MCP client that asked (a form of the card in the agent's own host),
// signed by the MCP server with the sign-in behind their bearer token. It
// is weaker than a sign-in at the card UI: the host, not toolgate, drew
// the card and took the answer, so it proves the token's holder answered,
// not that the person read this card. It counts only where the card's row
// allows it (Rules.ConfirmInClient).
const ConfirmedInClient = "confirmed_in_client"

// InClient reports whether decision a was made in the requester's own
// client (its evidence says ConfirmedInClient).
func InClient(a Approval) bool { return a.Evidence != nil && a.Evidence.Via == ConfirmedInClient }

// CheckEvidence decides whether an approval's evidence meets a card's
// requirement at time now (the workflow's): a trusted issuer, the acr
// level or stronger, an authentication no older than the maximum age and
// not from the future. A nil requirement (a card recorded before evidence
// was required) needs nothing.
func CheckEvidence(a Approval, req *policy.Requirement, issuers []string, now time.Time) (policy.Code, string) {
	if req == nil {
		return policy.CodeOK, ""
	}
	e := a.Evidence
	if e == nil || e.Issuer == "" || e.Subject == "" {
		return policy.CodeStepUpRequired, fmt.Sprintf("the decision carries no sign-in evidence; this card needs a %s sign-in within %s", req.ACR, req.MaxAge())
	}
	at, code, why := signedIn(e, issuers, now, req.ACR)
	if code != policy.CodeOK {
		return code, why
	}
	if age := now.Sub(at); age > req.MaxAge() {
		return policy.CodeStepUpRequired, fmt.Sprintf("the approver signed in %s ago; this card needs a sign-in within %s", age.Round(time.Second), req.MaxAge())
	}
	return policy.CodeOK, ""
}

// signedIn checks a sign-in's issuer, level and time: a trusted issuer,
// an acr at want or stronger (any level this deployment knows when want
// is ""), an authentication time that parses and is not in the future.
func signedIn(e *AuthEvidence, issuers []string, now time.Time, want string) (time.Time, policy.Code, string) {
	if !slices.Contains(issuers, e.Issuer) {
		return time.Time{}, policy.CodeCredentialUnavailable, fmt.Sprintf("the approver was signed in by %q, which is not a trusted identity provider", toolargs.Clip(e.Issuer))
	}
	if want == "" && !slices.Contains(policy.ACRLevels, e.ACR) {
		return time.Time{}, policy.CodeStepUpRequired, fmt.Sprintf("the approver signed in at level %q, which this deployment does not know", toolargs.Clip(e.ACR))
	}
	if want != "" && !policy.Satisfies(e.ACR, want) {
		return time.Time{}, policy.CodeStepUpRequired, fmt.Sprintf("the approver signed in at level %q; this card needs %q", toolargs.Clip(e.ACR), want)
	}
	at, err := time.Parse(time.RFC3339, e.AuthTime)
	if err != nil {
		return at, policy.CodeStepUpRequired, fmt.Sprintf("the sign-in time %q is not an RFC 3339 time", toolargs.Clip(e.AuthTime))
	}
	if at.After(now.Add(ClockSkew)) {
		return at, policy.CodeStepUpRequired, fmt.Sprintf("the sign-in time %s is in the future", at.UTC().Format(time.RFC3339))
	}
	return at, policy.CodeOK, ""
}

// Person is who stands behind a sign-in: the identity provider and the
// subject it names. Two sign-ins with one issuer and subject are one
// person, whatever user ID or name each carries; no setting chooses it.
type Person struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

// Known reports whether the person is named (both issuer and subject).
func (p Person) Known() bool { return p.Issuer != "" && p.Subject != "" }

// PersonOf is the person behind an approval's evidence; the zero Person
// when the approval carries none.
func PersonOf(a Approval) Person {
	if a.Evidence == nil {
		return Person{}
	}
	return Person{Issuer: a.Evidence.Issuer, Subject: a.Evidence.Subject}
}

// SamePerson reports whether two decisions, or a decision and a request,
// come from one person: the same known issuer and subject, or the same
// user ID. Either match is enough, so a second name never makes a second
// person (a match can only refuse, never count).
func SamePerson(p Person, userID string, q Person, otherUserID string) bool {
	return p.Known() && p == q || userID != "" && userID == otherUserID
}

// CheckSignIn decides whether a decision's evidence names a person signed
// in at a trusted identity provider: a subject, a sign-in level this
// deployment knows, an authentication time that is not in the future. It
// is all a rejection needs (saying no is never harder than saying yes); an
// approval also needs CheckEvidence's level and age.
func CheckSignIn(a Approval, issuers []string, now time.Time) (policy.Code, string) {
	e := a.Evidence
	if e == nil || e.Issuer == "" || e.Subject == "" {
		return policy.CodeStepUpRequired, "the decision carries no sign-in evidence; sign in to decide this card"
	}
	_, code, why := signedIn(e, issuers, now, "")
	return code, why
}
