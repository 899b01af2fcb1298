package activities

// Event is one kind of audit_log row (docs/contract.md).
type Event string

// The audit events.
const (
	EventAllowed         Event = "allowed"
	EventNeedsApproval   Event = "needs_approval"
	EventDenied          Event = "denied"
	EventApprovalRefused Event = "approval_refused"
	EventApproved        Event = "approved"
	EventRejected        Event = "rejected"
	EventExpired         Event = "expired"
	EventExecuted        Event = "executed"
	EventFailed          Event = "failed"
	// EventEscalated: an unanswered card was also offered one role up.
	EventEscalated Event = "escalated"
	// EventApprovalCounted: one of the several approvals a card needs; the
	// last is EventApproved.
	EventApprovalCounted Event = "approval_counted"
	// EventEdited: an approver changed the card's editable args; the card
	// went up again as a new version.
	EventEdited Event = "edited"
	// EventAwaitingSignIn: the call waits for the person to sign in.
	EventAwaitingSignIn Event = "awaiting_sign_in"
	// EventReleased: a call admitted against its limits ended with nothing
	// sent upstream, and gave its reservation back.
	EventReleased Event = "released"
)

// CardStatus is a card's state in pending_action.
type CardStatus string

// The states of a card.
const (
	CardPending  CardStatus = "pending_approval"
	CardApproved CardStatus = "approved"
	CardRejected CardStatus = "rejected"
	CardExpired  CardStatus = "expired"
	CardExecuted CardStatus = "executed"
	CardFailed   CardStatus = "failed"
)

// CardStatusAfter is the state a card ends in after the event that ends it.
func CardStatusAfter(e Event) CardStatus {
	switch e {
	case EventExecuted:
		return CardExecuted
	case EventRejected:
		return CardRejected
	case EventExpired:
		return CardExpired
	}
	return CardFailed
}
