package policy

// Session is who is asking, as the agent backend's sign-in established it.
// Identity, role and stores come only from here, never from the model.
type Session struct {
	UserID         string  `json:"userId"`
	Role           Role    `json:"role"`
	StoreIDs       []int64 `json:"storeIds"`
	SessionID      string  `json:"sessionId"`
	ConversationID string  `json:"conversationId"`
	// CredentialRef names the person's credential in the vault; empty means signed out.
	CredentialRef string `json:"credentialRef,omitempty"`
}

// Owns reports whether the session covers the store.
func (s Session) Owns(store int64) bool {
	for _, id := range s.StoreIDs {
		if id == store {
			return true
		}
	}
	return false
}
