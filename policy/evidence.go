package policy

import (
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
