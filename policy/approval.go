package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// Identity is who decides a card, from the approver's own sign-in.
type Identity struct {
	UserID   string  `json:"userId"`
	Role     Role    `json:"role"`
	StoreIDs []int64 `json:"storeIds"`
}

// Decisions an approver can send.
const (
	Approve = "approve"
	Reject  = "reject"
)

// Approval is one decision on a card (the approval signal's payload).
type Approval struct {
	Decision string   `json:"decision"`
	ArgsHash string   `json:"argsHash"`
	Approver Identity `json:"approver"`
	Reason   string   `json:"reason,omitempty"`
	// KeyID, SignedAt and Signature are set by the approvals service; the
	// worker verifies them before a decision counts.
	KeyID     string `json:"keyId,omitempty"`
	SignedAt  string `json:"signedAt,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// CheckApproval decides whether an approval counts for a card routed to
// role, acting on store, showing argsHash. It checks the approver's own
// identity, never the requester's. Pending and expiry are the caller's.
func CheckApproval(a Approval, role Role, store int64, argsHash string) (Code, string) {
	if a.Decision != Approve && a.Decision != Reject {
		return CodeInvalidArguments, fmt.Sprintf("decision must be %q or %q, not %q", Approve, Reject, clip(a.Decision))
	}
	if a.Approver.UserID == "" {
		return CodeInvalidArguments, "the approver is not identified"
	}
	if a.Approver.Role != role {
		return CodeRole, fmt.Sprintf("this card is for a %s; %s is %s", role, clip(a.Approver.UserID), clip(string(a.Approver.Role)))
	}
	if store != 0 && !slices.Contains(a.Approver.StoreIDs, store) {
		return CodeStoreScope, fmt.Sprintf("store %d is not one of %s's stores", store, clip(a.Approver.UserID))
	}
	if a.ArgsHash != argsHash {
		return CodeInvalidArguments, "the args hash does not match the card: the card shown is not the one pending"
	}
	return CodeOK, ""
}

// ArgsHash is the hex SHA-256 of the tool name and the canonical encoding
// of its args (object keys sorted, no insignificant space).
func ArgsHash(tool string, args json.RawMessage) (string, error) {
	canon, err := Canonical(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(tool+"\n"), canon...))
	return hex.EncodeToString(sum[:]), nil
}

// Canonical re-encodes JSON with sorted keys and exact numbers.
func Canonical(raw json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical args: %w", err)
	}
	return json.Marshal(v)
}
