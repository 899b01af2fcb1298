// Package signoff is a person's decision on a card: its wire form
// (Approval, read strictly by DecodeApproval), its signature (Signer,
// VerifyApproval: bound to one card's run, expiry and version), the sign-in
// evidence it carries (CheckEvidence, Person), and Judge, which says whether
// one decision counts on a card, data in and judgment out. Like policy,
// whose codes, roles and resources it speaks, it is pure Go: no Temporal,
// no I/O, no clock.
package signoff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/toolargs"
)

// Decisions on a card. Edit changes the fields the row marks editable
// (Approval.Edit) and puts the card up again as a new version. Withdraw is
// the requester's, never an approver's: the person who asked takes the
// call back, and nothing runs.
const (
	Approve  = "approve"
	Reject   = "reject"
	Edit     = "edit"
	Withdraw = "withdraw"
)

// Approval is one decision on a card (the approval signal's payload).
type Approval struct {
	Decision string          `json:"decision"`
	ArgsHash string          `json:"argsHash"`
	Approver policy.Identity `json:"approver"`
	Reason   string          `json:"reason,omitempty"`
	// Evidence is how the approver proved who they are; the workflow checks
	// it against the card's recorded Requirement.
	Evidence *AuthEvidence `json:"evidence,omitempty"`
	// Edit holds the new values of an edit decision, by field name (the
	// row's Editable fields only), as a JSON object.
	Edit json.RawMessage `json:"edit,omitempty"`
	// KeyID, SignedAt and Signature are set by the approvals service; the
	// worker verifies them before a decision counts.
	KeyID     string `json:"keyId,omitempty"`
	SignedAt  string `json:"signedAt,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// CheckApproval decides whether an approval counts for a card routed to
// role, acting on resource (none when its kind is ""), showing argsHash. It
// checks the approver's own identity, never the requester's. Pending and
// expiry are the caller's.
func CheckApproval(a Approval, role policy.Role, resource policy.ResourceRef, argsHash string) (policy.Code, string) {
	if a.Decision != Approve && a.Decision != Reject && a.Decision != Edit {
		return policy.CodeInvalidArguments, fmt.Sprintf("decision must be %q, %q or %q, not %q", Approve, Reject, Edit, toolargs.Clip(a.Decision))
	}
	if a.Approver.UserID == "" {
		return policy.CodeInvalidArguments, "the approver is not identified"
	}
	if a.Approver.Role != role {
		return policy.CodeRole, fmt.Sprintf("this card is for a %s; %s is %s", role, toolargs.Clip(a.Approver.UserID), toolargs.Clip(string(a.Approver.Role)))
	}
	if resource.Kind != "" && !a.Approver.Resources.Holds(resource.Kind, resource.ID) {
		return policy.CodeResourceScope, fmt.Sprintf("%s %s is not one of %s's", resource.Kind, resource.ID, toolargs.Clip(a.Approver.UserID))
	}
	if a.ArgsHash != argsHash {
		return policy.CodeInvalidArguments, "the args hash does not match the card: the card shown is not the one pending"
	}
	return policy.CodeOK, ""
}

// ApplyEdit returns args with an edit's fields replaced: edit must be a
// JSON object naming only editable fields. The result is canonical; the
// caller runs the chain on it again (decoding checks the new values).
func ApplyEdit(args, edit json.RawMessage, editable []string) (json.RawMessage, error) {
	fields, err := policy.DecodeStrict[map[string]json.RawMessage](edit, len(edit))
	if err != nil {
		return nil, fmt.Errorf("edit must be a JSON object of new values: %w", err)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("edit changes nothing")
	}
	merged := map[string]json.RawMessage{}
	if err := json.Unmarshal(args, &merged); err != nil {
		return nil, fmt.Errorf("the card's args: %w", err)
	}
	// In key order (canonical JSON), so the first field refused is always the same one.
	canon, err := policy.Canonical(edit)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if !slices.Contains(editable, k) {
			if len(editable) == 0 {
				return nil, fmt.Errorf("nothing on this card may be edited; approve or reject it")
			}
			return nil, fmt.Errorf("%q may not be edited; only %s may", toolargs.Clip(k), strings.Join(editable, ", "))
		}
		merged[k] = v
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	return policy.Canonical(b)
}

// ArgsHash is the hex SHA-256 of the tool name and the canonical encoding
// of its args (object keys sorted, no insignificant space).
func ArgsHash(tool string, args json.RawMessage) (string, error) {
	canon, err := policy.Canonical(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(tool+"\n"), canon...))
	return hex.EncodeToString(sum[:]), nil
}

// Bounds on a decision, checked before anything else reads it: a decision
// is small, so anything larger is not one.
const (
	MaxDecisionBytes = 8 << 10
	MaxReasonRunes   = 500
	MaxEditBytes     = 1 << 10
)

// DecodeApproval reads a decision strictly (one JSON object, no unknown or
// duplicate fields) and checks every field's shape and length. The error
// says what to fix.
func DecodeApproval(raw []byte) (Approval, error) {
	if len(raw) > MaxDecisionBytes {
		return Approval{}, fmt.Errorf("the decision is %d bytes; at most %d", len(raw), MaxDecisionBytes)
	}
	a, err := policy.DecodeStrict[Approval](raw, MaxDecisionBytes)
	if err != nil {
		return Approval{}, fmt.Errorf("the decision could not be read: %w", err)
	}
	if err := a.validate(); err != nil {
		return Approval{}, err
	}
	return a, nil
}

func (a Approval) validate() error {
	switch {
	case a.Decision != Approve && a.Decision != Reject && a.Decision != Edit && a.Decision != Withdraw:
		return fmt.Errorf("decision must be %q, %q, %q or %q, not %q", Approve, Reject, Edit, Withdraw, toolargs.Clip(a.Decision))
	case (a.Decision == Edit) != (len(a.Edit) > 0):
		return fmt.Errorf("edit holds the new values of an %q decision, and only of one", Edit)
	case len(a.Edit) > MaxEditBytes:
		return fmt.Errorf("edit is %d bytes; at most %d", len(a.Edit), MaxEditBytes)
	case !hexHash.MatchString(a.ArgsHash):
		return fmt.Errorf("argsHash must be the card's 64 hex digits")
	case !policy.ValidID(a.Approver.UserID):
		return fmt.Errorf("approver.userId must be 1 to %d letters, digits or . _ @ -", policy.MaxIDLength)
	case len(a.Approver.Role) > 32 || !roleName.MatchString(string(a.Approver.Role)):
		return fmt.Errorf("approver.role must be a role name: lower-case letters and _, at most 32")
	case a.Approver.Resources.Problem("approver.resources") != "":
		return fmt.Errorf("%s", a.Approver.Resources.Problem("approver.resources"))
	case !utf8.ValidString(a.Reason) || utf8.RuneCountInString(a.Reason) > MaxReasonRunes:
		return fmt.Errorf("reason must be valid text of at most %d characters", MaxReasonRunes)
	case len(a.KeyID) > 64 || len(a.SignedAt) > 40 || len(a.Signature) > 128:
		return fmt.Errorf("keyId, signedAt and signature are at most 64, 40 and 128 characters")
	}
	if e := a.Evidence; e != nil {
		switch {
		case len(e.Issuer) > 256 || len(e.Subject) > 255 || !utf8.ValidString(e.Issuer) || !utf8.ValidString(e.Subject):
			return fmt.Errorf("evidence.iss and evidence.sub are text of at most 256 and 255 bytes")
		case len(e.ACR) > 64 || len(e.AuthTime) > 40 || len(e.AMR) > 8:
			return fmt.Errorf("evidence.acr, evidence.authTime and evidence.amr are at most 64 bytes, 40 bytes and 8 methods")
		case e.Via != "" && e.Via != ConfirmedInClient:
			return fmt.Errorf("evidence.via is %q or absent, not %q", ConfirmedInClient, toolargs.Clip(e.Via))
		}
		for _, m := range e.AMR {
			if len(m) > 32 || !roleName.MatchString(m) {
				return fmt.Errorf("evidence.amr holds %q, not a method name such as \"pwd\" or \"otp\"", toolargs.Clip(m))
			}
		}
	}
	return nil
}

var (
	hexHash  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	roleName = regexp.MustCompile(`^[a-z][a-z_]*$`)
)
