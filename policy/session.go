package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/toolargs"
)

// Session is who is asking, as the agent backend's sign-in established it.
// Identity, role and resources come only from here, never from the model.
// On the wire it is {"userId", "role", "resources", "sessionId",
// "conversationId", "credentialRef"}; the form agent backends wrote before
// resources had kinds is read too (earlier.go).
type Session struct {
	UserID string
	Role   Role
	// Resources are what the credential grants, by kind.
	Resources      Resources
	SessionID      string
	ConversationID string
	// CredentialRef names the person's credential in the vault; empty means signed out.
	CredentialRef string
	// legacy says the session came in the earlier form, and goes out so again:
	// a fingerprint of it stays what it was.
	legacy bool
	// malformed is what was wrong with the resources it came with: step 2
	// refuses it, so a hand-written session is a refusal, never a workflow
	// input that cannot be decoded.
	malformed string
}

type sessionWire struct {
	UserID string `json:"userId"`
	Role   Role   `json:"role"`
	resourceWire
	SessionID      string `json:"sessionId"`
	ConversationID string `json:"conversationId"`
	CredentialRef  string `json:"credentialRef,omitempty"`
}

// MarshalJSON writes the session in the form it came in.
func (s Session) MarshalJSON() ([]byte, error) {
	return json.Marshal(sessionWire{UserID: s.UserID, Role: s.Role, resourceWire: write(s.Resources, s.legacy),
		SessionID: s.SessionID, ConversationID: s.ConversationID, CredentialRef: s.CredentialRef})
}

// UnmarshalJSON reads a session leniently, unlike a tool's args: an
// unknown field is ignored, so a client that sends one still
// gets a verdict and a recorded history still replays.
func (s *Session) UnmarshalJSON(b []byte) error {
	var w sessionWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Session{UserID: w.UserID, Role: w.Role, SessionID: w.SessionID, ConversationID: w.ConversationID, CredentialRef: w.CredentialRef}
	if err := w.read(&s.Resources, &s.legacy); err != nil {
		s.Resources, s.legacy, s.malformed = nil, false, "session."+err.Error()
	}
	return nil
}

// Problem says what is malformed in the session, or "" when it is sound.
// IDs must be what the audit log stores verbatim, so a limit counted by
// user ID counts the same user the audit rows name.
func (s Session) Problem() string { return s.problem() }

// problem is Problem without copying the session.
func (s *Session) problem() string {
	if why := s.idProblem(); why != "" {
		return why
	}
	return s.Resources.Problem("session.resources")
}

// idProblem is Problem on everything but the resources.
func (s *Session) idProblem() string {
	switch {
	case !ValidID(s.UserID) && s.UserID != "":
		return fmt.Sprintf("session.userId must be 1 to %d letters, digits or . _ @ -", MaxIDLength)
	case s.SessionID != "" && !ValidID(s.SessionID):
		return fmt.Sprintf("session.sessionId must be 1 to %d letters, digits or . _ @ -", MaxIDLength)
	case s.ConversationID != "" && !ValidID(s.ConversationID):
		return fmt.Sprintf("session.conversationId must be 1 to %d letters, digits or . _ @ -", MaxIDLength)
	case s.malformed != "":
		return s.malformed
	case s.CredentialRef != "" && !ValidID(s.CredentialRef):
		return fmt.Sprintf("session.credentialRef must be 1 to %d letters, digits or . _ @ -", MaxIDLength)
	}
	return ""
}

// ValidToolCallID reports whether id can name a call: 1 to 64 letters,
// digits, '_', '.' or ':'. No '-': the workflow ID joins conversation and
// call with '-', so toolcall-a-b + c and toolcall-a + b-c cannot both exist,
// and a workflow ID splits back into one pair at its last '-'.
func ValidToolCallID(id string) bool { return idOf(id, &callIDBytes) }

// ValidWorkflowID reports whether id is the workflow ID of one call:
// "toolcall-", a conversation ID, '-', a tool-call ID (split at the last '-').
func ValidWorkflowID(id string) bool {
	rest, ok := strings.CutPrefix(id, "toolcall-")
	i := strings.LastIndexByte(rest, '-')
	return ok && i > 0 && ValidID(rest[:i]) && ValidToolCallID(rest[i+1:])
}

// CallIDProblem says what is wrong with a call's IDs, or "".
func CallIDProblem(conversationID, toolCallID string) string {
	switch {
	case !ValidToolCallID(toolCallID):
		return fmt.Sprintf("toolCallId %q must be 1 to 64 letters, digits, '_', '.' or ':' (no '-')", toolargs.Clip(toolCallID))
	case !ValidID(conversationID):
		return fmt.Sprintf("session.conversationId %q must be 1 to %d letters, digits or . _ @ -", toolargs.Clip(conversationID), MaxIDLength)
	}
	return ""
}

// MaxIDLength bounds user, session, conversation and tool-call IDs.
const MaxIDLength = 64

// ValidID reports whether s is an ID toolgate accepts from a session or a
// decision: 1 to MaxIDLength letters, digits, '.', '_', '@' or '-'. A table,
// not a regexp: it runs on every call's session.
func ValidID(s string) bool { return idOf(s, &idBytes) }

// idBytes and callIDBytes are the bytes an ID and a tool-call ID may hold.
var idBytes, callIDBytes = idTable("._@-"), idTable("_.:")

func idTable(extra string) (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, byte(c)) >= 0
	}
	return t
}

// idOf reports whether s is 1 to MaxIDLength bytes, each allowed by t.
func idOf(s string, t *[256]bool) bool {
	if len(s) < 1 || len(s) > MaxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !t[s[i]] {
			return false
		}
	}
	return true
}
