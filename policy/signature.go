package policy

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ApprovalKeys are the public keys decisions may be signed with, by key ID.
// Several keys let a deployment rotate: add the new key, move the signer,
// then drop the old one.
type ApprovalKeys map[string]ed25519.PublicKey

// signedDecision is exactly what a signature covers.
type signedDecision struct {
	Approver   Identity `json:"approver"`
	WorkflowID string   `json:"workflowId"`
	ArgsHash   string   `json:"argsHash"`
	Decision   string   `json:"decision"`
	Reason     string   `json:"reason"`
	SignedAt   string   `json:"signedAt"`
	KeyID      string   `json:"keyId"`
}

// ApprovalMessage is the canonical bytes a decision's signature covers.
func ApprovalMessage(a Approval, workflowID string) []byte {
	b, _ := json.Marshal(signedDecision{Approver: a.Approver, WorkflowID: workflowID, ArgsHash: a.ArgsHash,
		Decision: a.Decision, Reason: a.Reason, SignedAt: a.SignedAt, KeyID: a.KeyID})
	return b
}

// SignApproval signs a decision for one workflow with a private key.
func SignApproval(a Approval, workflowID, keyID string, key ed25519.PrivateKey, signedAt string) Approval {
	a.KeyID, a.SignedAt = keyID, signedAt
	a.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, ApprovalMessage(a, workflowID)))
	return a
}

// VerifyApproval checks that a decision was signed, for this workflow, by a
// key the deployment trusts. It returns a sentence saying what is wrong.
func VerifyApproval(a Approval, workflowID string, keys ApprovalKeys) (bool, string) {
	if a.Signature == "" {
		return false, "the decision is not signed by the approvals service"
	}
	pub, ok := keys[a.KeyID]
	if !ok {
		return false, fmt.Sprintf("the decision is signed with an unknown key %q", clip(a.KeyID))
	}
	sig, err := base64.StdEncoding.DecodeString(a.Signature)
	if err != nil || !ed25519.Verify(pub, ApprovalMessage(a, workflowID), sig) {
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
			return nil, fmt.Errorf("approval key %q: want id:base64 of a %d-byte Ed25519 public key", clip(entry), ed25519.PublicKeySize)
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

// Sign signs a decision for one workflow at the given RFC 3339 time.
func (s Signer) Sign(a Approval, workflowID, signedAt string) Approval {
	return SignApproval(a, workflowID, s.KeyID, s.Key, signedAt)
}
