package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/toolargs"
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
		return fmt.Errorf("field %q appears twice", toolargs.Clip(dup))
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
