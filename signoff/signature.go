package signoff

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"
)

// ApprovalKeys are the public keys decisions may be signed with, by key ID.
// Several keys let a deployment rotate: add the new key, move the signer,
// then drop the old one.
type ApprovalKeys map[string]ed25519.PublicKey

// CardRef names the one card a decision is for: the call's workflow, the run
// that put the card up, the card's expiry (RFC 3339, as the status query
// and pending_action show it) and its version (signedVersion there). A
// signature covers all four, so a decision cannot be replayed on another
// call, another run of the same ID, a later card, or another version of the
// same card after an edit. Version is 0 on cards put up before versions
// were signed, whose signatures name none.
type CardRef struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	ExpiresAt  string `json:"expiresAt"`
	Version    int    `json:"version,omitempty"`
}

// signedDecision is exactly what a signature covers.
type signedDecision struct {
	Approver   policy.Identity `json:"approver"`
	WorkflowID string          `json:"workflowId"`
	RunID      string          `json:"runId"`
	ExpiresAt  string          `json:"expiresAt"`
	ArgsHash   string          `json:"argsHash"`
	Decision   string          `json:"decision"`
	Reason     string          `json:"reason"`
	SignedAt   string          `json:"signedAt"`
	KeyID      string          `json:"keyId"`
	// Evidence is left out when absent, so decisions signed before it
	// existed still verify.
	Evidence *AuthEvidence `json:"evidence,omitempty"`
	// Edit is left out when absent, for the same reason.
	Edit json.RawMessage `json:"edit,omitempty"`
	// CardVersion is left out on cards that sign none (Card.Version 0).
	CardVersion int `json:"cardVersion,omitempty"`
}

// unboundDecision is what signatures covered before they were bound to the
// run and the card's expiry; calls recorded then still verify with it.
type unboundDecision struct {
	Approver   policy.Identity `json:"approver"`
	WorkflowID string          `json:"workflowId"`
	ArgsHash   string          `json:"argsHash"`
	Decision   string          `json:"decision"`
	Reason     string          `json:"reason"`
	SignedAt   string          `json:"signedAt"`
	KeyID      string          `json:"keyId"`
}

// ApprovalMessage is the canonical bytes a decision's signature covers.
func ApprovalMessage(a Approval, card CardRef) []byte {
	b, _ := json.Marshal(signedDecision{Approver: a.Approver, WorkflowID: card.WorkflowID, RunID: card.RunID, ExpiresAt: card.ExpiresAt,
		ArgsHash: a.ArgsHash, Decision: a.Decision, Reason: a.Reason, SignedAt: a.SignedAt, KeyID: a.KeyID, Evidence: a.Evidence, Edit: a.Edit,
		CardVersion: card.Version})
	return b
}

// SignApproval signs a decision for one card with a private key.
func SignApproval(a Approval, card CardRef, keyID string, key ed25519.PrivateKey, signedAt string) Approval {
	a.KeyID, a.SignedAt = keyID, signedAt
	a.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, ApprovalMessage(a, card)))
	return a
}

// ClockSkew is how far a signer's clock may be from the workflow's.
const ClockSkew = time.Minute

// VerifyApproval checks that a decision was signed, for this card, by a key
// the deployment trusts, while the card was up: signedAt must fall between
// the card going up and its expiry, give or take ClockSkew for the signer's
// clock. It returns a sentence saying what is wrong.
func VerifyApproval(a Approval, card CardRef, upAt, expires time.Time, keys ApprovalKeys) (bool, string) {
	if ok, why := verify(a, keys, ApprovalMessage(a, card)); !ok {
		return false, why
	}
	at, err := time.Parse(time.RFC3339, a.SignedAt)
	if err != nil {
		return false, fmt.Sprintf("the decision's signing time %q is not an RFC 3339 time", toolargs.Clip(a.SignedAt))
	}
	if at.Before(upAt.Add(-ClockSkew)) {
		return false, fmt.Sprintf("the decision was signed at %s, before the card went up at %s", at.UTC().Format(time.RFC3339), upAt.UTC().Format(time.RFC3339))
	}
	if at.After(expires.Add(ClockSkew)) {
		return false, fmt.Sprintf("the decision was signed at %s, after the card expired at %s", at.UTC().Format(time.RFC3339), expires.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// VerifyUnboundApproval checks a signature made before decisions were bound
// to a run and an expiry, for calls recorded then.
func VerifyUnboundApproval(a Approval, workflowID string, keys ApprovalKeys) (bool, string) {
	b, _ := json.Marshal(unboundDecision{Approver: a.Approver, WorkflowID: workflowID, ArgsHash: a.ArgsHash,
		Decision: a.Decision, Reason: a.Reason, SignedAt: a.SignedAt, KeyID: a.KeyID})
	return verify(a, keys, b)
}

func verify(a Approval, keys ApprovalKeys, msg []byte) (bool, string) {
	if a.Signature == "" {
		return false, "the decision is not signed by the approvals service"
	}
	pub, ok := keys[a.KeyID]
	if !ok {
		return false, fmt.Sprintf("the decision is signed with an unknown key %q", toolargs.Clip(a.KeyID))
	}
	sig, err := base64.StdEncoding.DecodeString(a.Signature)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return false, "the decision's signature does not verify"
	}
	return true, ""
}

// ParseApprovalKeys reads "id:base64-public-key" entries separated by commas.
func ParseApprovalKeys(s string) (ApprovalKeys, error) {
	keys := ApprovalKeys{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, b64, ok := strings.Cut(entry, ":")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || id == "" || err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("approval key %q: want id:base64 of a %d-byte Ed25519 public key", toolargs.Clip(entry), ed25519.PublicKeySize)
		}
		keys[id] = ed25519.PublicKey(raw)
	}
	return keys, nil
}

// ParseSigningKey reads "id:base64-private-key".
func ParseSigningKey(s string) (string, ed25519.PrivateKey, error) {
	id, b64, ok := strings.Cut(strings.TrimSpace(s), ":")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || id == "" || err != nil || len(raw) != ed25519.PrivateKeySize {
		return "", nil, errors.New("signing key: want id:base64 of a 64-byte Ed25519 private key (starter keygen makes one)")
	}
	return id, ed25519.PrivateKey(raw), nil
}

// Signer signs decisions as the approvals service (or an operator's starter).
type Signer struct {
	KeyID string
	Key   ed25519.PrivateKey
}

// Sign signs a decision for one card at the given RFC 3339 time.
func (s Signer) Sign(a Approval, card CardRef, signedAt string) Approval {
	return SignApproval(a, card, s.KeyID, s.Key, signedAt)
}
