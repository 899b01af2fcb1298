// The contract of package activities (docs/contract.md): the audit
// events, the card states, the card webhook's events and payload, and the
// error types of activity failures, in one place.

package activities

import (
	"github.com/toolgate/toolgate/policy"
)

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
	// EventWithdrawn: the requester took a pending card back before anyone
	// decided it; nothing ran, and its reservation and intent were given
	// back.
	EventWithdrawn Event = "withdrawn"
	// EventPartitionDropped: a month of the log, archived, was dropped by
	// the retention login (audit_partition_drop, migration 028); no call
	// writes it.
	EventPartitionDropped Event = "partition_dropped"
)

// Metric names of admission's timings, by tool (docs/deploying.md, Sizing):
// how long an admission waited for its limit buckets' locks, the sign of a
// bucket many calls share at once, and how long counting its windows took,
// which stays flat as the log grows and rises with the calls a window holds.
const (
	MetricAdmissionLockWait = "toolgate_admission_lock_wait"
	MetricAdmissionCount    = "toolgate_admission_count"
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
	// CardWithdrawn: its requester took it back; nothing ran.
	CardWithdrawn CardStatus = "withdrawn"
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
	case EventWithdrawn:
		return CardWithdrawn
	}
	return CardFailed
}

// Error types carried by activity failures (temporal.ApplicationError's
// type). The workflow maps each to a code of docs/contract.md; where a
// failure carries details, the type's comment names them.
const (
	ErrCredential  = "credential_unavailable"
	ErrUnavailable = "upstream_unavailable"
	ErrUpstream    = "upstream_error"
	ErrBadInput    = "bad_input"
	// ErrStepUp: the credential's sign-in is below the tool's requester
	// tier; its details are a StepUp.
	ErrStepUp = "step_up_required"
	// ErrSecondRun is the error type of a write refused because an earlier run
	// of the same workflow ID claimed the call; its details are a SecondRun.
	ErrSecondRun = "second_run"
	// ErrDefinitionChanged refuses a call of an MCP tool whose server now
	// defines it otherwise than an operator accepted (its pin): nothing is
	// sent until a person accepts the new definition.
	ErrDefinitionChanged = "definition_changed"
	// ErrUnverified: the caller holds less than the row's verified tier in
	// this conversation, or is locked out; its details are an Unverified.
	ErrUnverified = "unverified"
	// ErrWebhookRefused is the type of a delivery the receiver refused (a 4xx
	// other than 408 and 429): retrying would not change its answer.
	ErrWebhookRefused = "webhook_refused"
)

// Card events: the webhook payload's type.
const (
	CardEventPending   = "card.pending"
	CardEventEscalated = "card.escalated"
	CardEventDecided   = "card.decided"
)

// CardEvent is the webhook's payload (docs/contract.md): what a person
// needs to find and decide the card, and nothing of the request's args.
type CardEvent struct {
	Type            string             `json:"type"`
	WorkflowID      string             `json:"workflowId"`
	RunID           string             `json:"runId"`
	CardVersion     int                `json:"cardVersion"`
	Status          CardStatus         `json:"status"`
	Tool            string             `json:"tool"`
	Resource        policy.ResourceRef `json:"resource,omitzero"`
	ValueCents      int64              `json:"valueCents"`
	Card            string             `json:"card"`
	ApproverRole    policy.Role        `json:"approverRole"`
	EscalatedTo     policy.Role        `json:"escalatedTo,omitempty"`
	ApprovalsNeeded int                `json:"approvalsNeeded"`
	ExpiresAt       string             `json:"expiresAt"`
	DecidedBy       string             `json:"decidedBy,omitempty"`
	URL             string             `json:"url,omitempty"`
}
