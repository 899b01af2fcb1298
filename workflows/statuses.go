package workflows

import "github.com/toolgate/toolgate/activities"

// CallStatus is where a call stands: a final status of its result, or an
// in-flight one of the status query (docs/contract.md).
type CallStatus string

// The statuses of a call.
const (
	StatusDeciding        CallStatus = "deciding"
	StatusPendingApproval CallStatus = "pending_approval"
	// StatusAwaitingSignIn: the call waits for the credential signal.
	StatusAwaitingSignIn CallStatus = "awaiting_sign_in"
	StatusExecuting      CallStatus = "executing"
	StatusExecuted       CallStatus = "executed"
	StatusDenied         CallStatus = "denied"
	StatusRejected       CallStatus = "rejected"
	StatusExpired        CallStatus = "expired"
	StatusFailed         CallStatus = "failed"
)

// card is the state a card shows for a call that ends (or waits) so; the
// two vocabularies share these words by design.
func (s CallStatus) card() activities.CardStatus { return activities.CardStatus(s) }
