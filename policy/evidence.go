package policy

import (
	"fmt"
	"slices"
	"strings"
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

// ACRValues maps toolgate's levels (ACRLevels) to an identity provider's
// own acr values, for a provider that does not say pwd and mfa (Okta's
// urn:okta:loa:2fa:any, say): how toolgate asks for a level and reads the
// one a sign-in reached. A level it does not map is its own word.
type ACRValues map[string]string

// ParseACRValues reads level=value pairs separated by commas (setting is
// the variable's name, for the error): every level once, each its own
// value, none another level's name, so no mapping can read a weaker
// sign-in as a stronger level, or leave a level in toolgate's own word.
func ParseACRValues(setting, s string) (ACRValues, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	bad := func(why string) (ACRValues, error) {
		return nil, fmt.Errorf("%s=%q: %s; want level=provider-value pairs such as pwd=urn:okta:loa:1fa:any,mfa=urn:okta:loa:2fa:any, naming each of %v once", setting, s, why, ACRLevels)
	}
	v := ACRValues{}
	seen := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		level, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		level, value = strings.TrimSpace(level), strings.TrimSpace(value)
		switch {
		case !ok || !slices.Contains(ACRLevels, level) || value == "":
			return bad(fmt.Sprintf("%q is not a level=value pair", strings.TrimSpace(pair)))
		case v[level] != "":
			return bad(fmt.Sprintf("%s is named twice", level))
		case seen[value] != "":
			return bad(fmt.Sprintf("%s and %s are both %q, so one could not be told from the other", seen[value], level, value))
		case value != level && slices.Contains(ACRLevels, value):
			return bad(fmt.Sprintf("%s is %q, the name of another level", level, value))
		}
		v[level], seen[value] = value, level
	}
	for _, l := range ACRLevels {
		if v[l] == "" {
			return bad(fmt.Sprintf("%s is not named, and would be read in toolgate's own word", l))
		}
	}
	return v, nil
}

// Provider is the provider's acr value for a toolgate level.
func (v ACRValues) Provider(level string) string {
	if p, ok := v[level]; ok {
		return p
	}
	return level
}

// Level is the toolgate level a provider's acr value names, "" when it
// names none.
func (v ACRValues) Level(acr string) string {
	for _, l := range ACRLevels {
		if v.Provider(l) == acr {
			return l
		}
	}
	return ""
}

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
