package policy

import (
	"fmt"
	"slices"
	"time"
)

// ACR levels an identity provider asserts in a sign-in's acr claim, weakest first.
const (
	// ACRPassword is a sign-in by password alone.
	ACRPassword = "pwd"
	// ACRMFA is a sign-in with a second factor (TOTP in the demo provider).
	ACRMFA = "mfa"
)

// ACRLevels orders the acr values this deployment understands, weakest
// first. An acr outside the list satisfies no requirement.
var ACRLevels = []string{ACRPassword, ACRMFA}

// acrRank is an acr's place in ACRLevels, or -1 when it is unknown.
func acrRank(acr string) int { return slices.Index(ACRLevels, acr) }

// Satisfies reports whether a sign-in at acr meets a requirement of want.
func Satisfies(acr, want string) bool {
	have, need := acrRank(acr), acrRank(want)
	return have >= 0 && need >= 0 && have >= need
}

// EvidenceRule is the proof of identity an approval of one tool needs, for
// cards worth up to UpToCents (0 means no upper bound): a sign-in at ACR or
// stronger, no older than MaxAge when the decision arrives.
type EvidenceRule struct {
	Tool      string
	UpToCents int64
	ACR       string
	MaxAge    time.Duration
}

// RequesterTierMaxAge is how old a requester's sign-in may be, when the
// call is asked, to count as a row's requester tier (Row.RequesterMaxAge
// when set): a strong sign-in from a day before is not strong now.
const RequesterTierMaxAge = 15 * time.Minute

// StrictestEvidence is what an approve row with no rule of its own needs:
// no table gap can make an approval cheaper than the strongest proof.
var StrictestEvidence = Requirement{ACR: ACRMFA, MaxAgeSeconds: int64((5 * time.Minute).Seconds())}

// Requirement is the evidence one card needs, recorded with its verdict so
// a later change to the table never changes a card already up.
type Requirement struct {
	ACR           string `json:"acr"`
	MaxAgeSeconds int64  `json:"maxAgeSeconds"`
}

// MaxAge is the requirement's maximum authentication age.
func (r Requirement) MaxAge() time.Duration { return time.Duration(r.MaxAgeSeconds) * time.Second }

// EvidenceFor returns the evidence an approval of tool at valueCents needs.
func EvidenceFor(rules []EvidenceRule, tool string, valueCents int64) Requirement {
	for _, r := range rules {
		if r.Tool == tool && (r.UpToCents == 0 || valueCents <= r.UpToCents) {
			return Requirement{ACR: r.ACR, MaxAgeSeconds: int64(r.MaxAge.Seconds())}
		}
	}
	return StrictestEvidence
}

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
}

// CheckEvidence decides whether an approval's evidence meets a card's
// requirement at time now (the workflow's): a trusted issuer, the acr
// level or stronger, an authentication no older than the maximum age and
// not from the future. A nil requirement (a card recorded before evidence
// was required) needs nothing.
func CheckEvidence(a Approval, req *Requirement, issuers []string, now time.Time) (Code, string) {
	if req == nil {
		return CodeOK, ""
	}
	e := a.Evidence
	if e == nil || e.Issuer == "" || e.Subject == "" {
		return CodeStepUpRequired, fmt.Sprintf("the decision carries no sign-in evidence; this card needs a %s sign-in within %s", req.ACR, req.MaxAge())
	}
	at, code, why := signedIn(e, issuers, now, req.ACR)
	if code != CodeOK {
		return code, why
	}
	if age := now.Sub(at); age > req.MaxAge() {
		return CodeStepUpRequired, fmt.Sprintf("the approver signed in %s ago; this card needs a sign-in within %s", age.Round(time.Second), req.MaxAge())
	}
	return CodeOK, ""
}

// signedIn checks a sign-in's issuer, level and time: a trusted issuer,
// an acr at want or stronger (any level this deployment knows when want
// is ""), an authentication time that parses and is not in the future.
func signedIn(e *AuthEvidence, issuers []string, now time.Time, want string) (time.Time, Code, string) {
	if !slices.Contains(issuers, e.Issuer) {
		return time.Time{}, CodeCredentialUnavailable, fmt.Sprintf("the approver was signed in by %q, which is not a trusted identity provider", clip(e.Issuer))
	}
	if want == "" && acrRank(e.ACR) < 0 {
		return time.Time{}, CodeStepUpRequired, fmt.Sprintf("the approver signed in at level %q, which this deployment does not know", clip(e.ACR))
	}
	if want != "" && !Satisfies(e.ACR, want) {
		return time.Time{}, CodeStepUpRequired, fmt.Sprintf("the approver signed in at level %q; this card needs %q", clip(e.ACR), want)
	}
	at, err := time.Parse(time.RFC3339, e.AuthTime)
	if err != nil {
		return at, CodeStepUpRequired, fmt.Sprintf("the sign-in time %q is not an RFC 3339 time", clip(e.AuthTime))
	}
	if at.After(now.Add(ClockSkew)) {
		return at, CodeStepUpRequired, fmt.Sprintf("the sign-in time %s is in the future", at.UTC().Format(time.RFC3339))
	}
	return at, CodeOK, ""
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
func CheckSignIn(a Approval, issuers []string, now time.Time) (Code, string) {
	e := a.Evidence
	if e == nil || e.Issuer == "" || e.Subject == "" {
		return CodeStepUpRequired, "the decision carries no sign-in evidence; sign in to decide this card"
	}
	_, code, why := signedIn(e, issuers, now, "")
	return code, why
}
