package activities

import (
	"encoding/json"

	"github.com/toolgate/toolgate/policy"
)

// Acting is who a read or a call upstream acts as, and on what: the tool,
// its args and resource, the signed-in person's credential and claims, and
// what the tool's row asks of their sign-in. A call (CallInput) and a dry
// run or a check before a card (PreviewInput) carry the same, built once by
// the workflow; its fields keep their wire names, so inputs recorded before
// it decode as they were written.
type Acting struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
	// Resource is the one the call acts on.
	Resource policy.ResourceRef `json:"resource,omitzero"`
	policy.EarlierResource
	UserID        string `json:"userId"`
	CredentialRef string `json:"credentialRef"`
	// Role and Resources are the session's claims, held against the
	// credential's; RequiredTier is the tool's requester tier (policy.Row).
	Role      policy.Role      `json:"role,omitempty"`
	Resources policy.Resources `json:"resources,omitempty"`
	policy.EarlierResources
	RequiredTier string `json:"requiredTier,omitempty"`
	// RequiredMaxAgeSeconds bounds how old the sign-in behind the
	// credential may be, at AskedAt (RFC 3339, when the call was asked;
	// now when unset), to count as RequiredTier.
	RequiredMaxAgeSeconds int64  `json:"requiredMaxAgeSeconds,omitempty"`
	AskedAt               string `json:"askedAt,omitempty"`
	// Verified is the row's verified tier, held against what the caller
	// holds in ConversationID before a dry run reads and before anything
	// is sent upstream.
	Verified       *policy.VerifiedNeed `json:"verified,omitempty"`
	ConversationID string               `json:"conversationId,omitempty"`
}
