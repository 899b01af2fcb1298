package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Identity is who decides a card, from the approver's own sign-in. On the
// wire it is {"userId", "role", "resources"}; the earlier form (earlier.go)
// is read as Session's is, and a decision signed so verifies as it was signed.
type Identity struct {
	UserID string
	Role   Role
	// Resources are what the approver's sign-in grants, by kind.
	Resources Resources
	legacy    bool
}

type identityWire struct {
	UserID string `json:"userId"`
	Role   Role   `json:"role"`
	resourceWire
}

// MarshalJSON writes the identity in the form it came in.
func (id Identity) MarshalJSON() ([]byte, error) {
	return json.Marshal(identityWire{UserID: id.UserID, Role: id.Role, resourceWire: write(id.Resources, id.legacy)})
}

// UnmarshalJSON reads an identity strictly.
func (id *Identity) UnmarshalJSON(b []byte) error {
	var w identityWire
	if err := strictDecode(b, &w); err != nil {
		return err
	}
	*id = Identity{UserID: w.UserID, Role: w.Role}
	return w.read(&id.Resources, &id.legacy)
}

// Decisions an approver can send. Edit changes the fields the row marks
// editable (Approval.Edit) and puts the card up again as a new version.
const (
	Approve = "approve"
	Reject  = "reject"
	Edit    = "edit"
)

// Approval is one decision on a card (the approval signal's payload).
type Approval struct {
	Decision string   `json:"decision"`
	ArgsHash string   `json:"argsHash"`
	Approver Identity `json:"approver"`
	Reason   string   `json:"reason,omitempty"`
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
func CheckApproval(a Approval, role Role, resource ResourceRef, argsHash string) (Code, string) {
	if a.Decision != Approve && a.Decision != Reject && a.Decision != Edit {
		return CodeInvalidArguments, fmt.Sprintf("decision must be %q, %q or %q, not %q", Approve, Reject, Edit, clip(a.Decision))
	}
	if a.Approver.UserID == "" {
		return CodeInvalidArguments, "the approver is not identified"
	}
	if a.Approver.Role != role {
		return CodeRole, fmt.Sprintf("this card is for a %s; %s is %s", role, clip(a.Approver.UserID), clip(string(a.Approver.Role)))
	}
	if resource.Kind != "" && !a.Approver.Resources.Holds(resource.Kind, resource.ID) {
		return CodeResourceScope, fmt.Sprintf("%s %s is not one of %s's", resource.Kind, resource.ID, clip(a.Approver.UserID))
	}
	if a.ArgsHash != argsHash {
		return CodeInvalidArguments, "the args hash does not match the card: the card shown is not the one pending"
	}
	return CodeOK, ""
}

// ApplyEdit returns args with an edit's fields replaced: edit must be a
// JSON object naming only editable fields. The result is canonical; the
// caller runs the chain on it again (decoding checks the new values).
func ApplyEdit(args, edit json.RawMessage, editable []string) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := strictObject(edit, &fields); err != nil {
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
	canon, err := Canonical(edit)
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
			return nil, fmt.Errorf("%q may not be edited; only %s may", clip(k), strings.Join(editable, ", "))
		}
		merged[k] = v
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	return Canonical(b)
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
	var a Approval
	if len(raw) > MaxDecisionBytes {
		return a, fmt.Errorf("the decision is %d bytes; at most %d", len(raw), MaxDecisionBytes)
	}
	if err := strictObject(raw, &a); err != nil {
		return Approval{}, fmt.Errorf("the decision could not be read: %w", err)
	}
	if err := a.validate(); err != nil {
		return Approval{}, err
	}
	return a, nil
}

func (a Approval) validate() error {
	switch {
	case a.Decision != Approve && a.Decision != Reject && a.Decision != Edit:
		return fmt.Errorf("decision must be %q, %q or %q, not %q", Approve, Reject, Edit, clip(a.Decision))
	case (a.Decision == Edit) != (len(a.Edit) > 0):
		return fmt.Errorf("edit holds the new values of an %q decision, and only of one", Edit)
	case len(a.Edit) > MaxEditBytes:
		return fmt.Errorf("edit is %d bytes; at most %d", len(a.Edit), MaxEditBytes)
	case !hexHash.MatchString(a.ArgsHash):
		return fmt.Errorf("argsHash must be the card's 64 hex digits")
	case !ValidID(a.Approver.UserID):
		return fmt.Errorf("approver.userId must be 1 to %d letters, digits or . _ @ -", MaxIDLength)
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
		}
		for _, m := range e.AMR {
			if len(m) > 32 || !roleName.MatchString(m) {
				return fmt.Errorf("evidence.amr holds %q, not a method name such as \"pwd\" or \"otp\"", clip(m))
			}
		}
	}
	return nil
}

var (
	hexHash  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	roleName = regexp.MustCompile(`^[a-z][a-z_]*$`)
)

// DecodeStrict reads one JSON object of at most max bytes into a T,
// refusing unknown or duplicate fields and trailing data.
func DecodeStrict[T any](raw []byte, max int) (T, error) {
	var v T
	if len(raw) > max {
		return v, fmt.Errorf("the payload is %d bytes; at most %d", len(raw), max)
	}
	if err := strictObject(raw, &v); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// strictObject decodes one JSON object into v, refusing unknown fields,
// duplicate keys and trailing data.
func strictObject(raw []byte, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("want a JSON object")
	}
	if dup := duplicateKey(raw); dup != "" {
		return fmt.Errorf("field %q appears twice", clip(dup))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// duplicateKey returns a key given twice in one object at any depth,
// comparing case-insensitively as encoding/json matches fields, or "".
func duplicateKey(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func() string
	walk = func() string {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return ""
				}
				key, _ := k.(string)
				if seen[strings.ToLower(key)] {
					return key
				}
				seen[strings.ToLower(key)] = true
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		}
		return ""
	}
	return walk()
}

// Fingerprint names what a call asks for: the tool, its args in canonical
// form (as sent, when they are not JSON) and the whole session. Two calls
// with the same tool-call ID and different fingerprints are a conflict.
func Fingerprint(req Request) string {
	args, err := Canonical(req.Args)
	if err != nil {
		args = req.Args
	}
	session, _ := json.Marshal(req.Session)
	h := sha256.New()
	for _, part := range [][]byte{[]byte(req.Tool), args, session} {
		h.Write(strconv.AppendInt(nil, int64(len(part)), 10))
		h.Write([]byte{':'})
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Intent names what an approve call asks for under whichever tool-call
// ID: the hex SHA-256 of the tool, the resource's ID ("0" for none, as
// intents were keyed when resources were numbers), the canonical args and,
// when requester is not "" (the tool is not Shared), who asks. Two calls
// with one intent want one card.
func Intent(tool string, resource ResourceRef, args json.RawMessage, requester string) (string, error) {
	canon, err := Canonical(args)
	if err != nil {
		return "", err
	}
	id := resource.ID
	if resource.Kind == "" {
		id = "0"
	}
	head := fmt.Sprintf("%s\n%s\n", tool, id)
	if requester != "" {
		head = fmt.Sprintf("%s\n%s\n%d:%s\n", tool, id, len(requester), requester)
	}
	sum := sha256.Sum256(append([]byte(head), canon...))
	return hex.EncodeToString(sum[:]), nil
}
