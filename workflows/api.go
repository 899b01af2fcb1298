// The contract of package workflows (docs/contract.md): every wire name,
// payload type, status, search attribute and metric a client, an operator
// or a dashboard sees of a call, in one place.

package workflows

import (
	"encoding/json"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
)

// Wire names of docs/contract.md: the task queue, the workflow type and
// the messages a call takes.
const (
	TaskQueue      = "toolgate"
	WorkflowType   = "ToolCall"
	StatusQuery    = "status"
	ApprovalSignal = "approval"
)

// FirstOutcomeUpdate is the Update an agent backend sends with the start
// (Update-with-Start) to learn the first outcome in one round trip: the
// final result, or the pending card.
const FirstOutcomeUpdate = "firstOutcome"

// CredentialSignal resumes a call that waits for the person to sign in: the
// agent backend sends it with the credential of the new sign-in.
const CredentialSignal = "credential"

// WorkflowID is the ID of the call's workflow and its idempotency key.
func WorkflowID(conversationID, toolCallID string) string {
	return "toolcall-" + conversationID + "-" + toolCallID
}

// ToolCallInput is what an agent backend sends: the proposed call and the session.
type ToolCallInput struct {
	Tool       string          `json:"tool"`
	ToolCallID string          `json:"toolCallId"`
	Args       json.RawMessage `json:"args"`
	Session    policy.Session  `json:"session"`
}

// ToolCallResult is the outcome. Business outcomes complete the workflow
// normally; a workflow failure means a bug.
type ToolCallResult struct {
	Status       CallStatus      `json:"status"`
	Code         policy.Code     `json:"code"`
	Message      string          `json:"message"`
	Retryable    bool            `json:"retryable"`
	AuthRequired bool            `json:"authRequired"`
	Result       json.RawMessage `json:"result"`
	// Card is the card's text (the sentence an approver decides on), when
	// the call put one up.
	Card           string `json:"card"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// ConfirmSuffix ends the path of a card's page in the card UI
// (/cards/<workflow ID>) sent to the call's requester to decide the card
// themselves (an MCP client's URL elicitation): /cards/<workflow ID>/confirm
// shows it to the person who asked for the call alone, by the issuer and
// subject of their sign-in; a sign-in on the way keeps the path.
const ConfirmSuffix = "/confirm"

// SignInSuffix ends the path of the card UI's page sent to a call's
// requester when the call waits for them to sign in (an MCP client's URL
// elicitation): /cards/<workflow ID>/sign-in signs them in with what the
// call needs and, when it is the same person (issuer and subject) who
// asked, records that sign-in for the call; the MCP server carries the
// call on with it when the client that asked retries.
const SignInSuffix = "/sign-in"

// RequesterMemo is the memo field naming the person (signoff.Person) who
// started a call through the MCP server (StartedBy).
const RequesterMemo = "requester"

// Outcome is the first outcome: a final result, or status pending_approval
// with the card, its value, the approver role, the expiry and the args hash.
type Outcome struct {
	ToolCallResult
	ValueCents   int64       `json:"valueCents"`
	ApproverRole policy.Role `json:"approverRole"`
	ExpiresAt    string      `json:"expiresAt"`
	ArgsHash     string      `json:"argsHash"`
	// RunID is the run that shows the card; a signed decision names it.
	RunID string `json:"runId,omitempty"`
	// SignedVersion is the card version a decision's signature names (1
	// here); 0 on cards put up before versions were signed.
	SignedVersion int `json:"signedVersion,omitempty"`
	// Resource is what the card's action acts on, when it names one: with
	// ApproverRole, who may decide it.
	Resource *policy.ResourceRef `json:"resource,omitempty"`
	// ApprovalsNeeded is how many distinct people must approve the card,
	// when more than one (never its requester).
	ApprovalsNeeded int `json:"approvalsNeeded,omitempty"`
	// ConfirmInClient is the sign-in a decision in the requester's own
	// client needs (the card's evidence), when the card's row allows one.
	ConfirmInClient *policy.Requirement `json:"confirmInClient,omitempty"`
}

// Status answers the status query.
type Status struct {
	Status CallStatus `json:"status"`
	Tool   string     `json:"tool"`
	// Card is the card's text, while one is up (and after).
	Card         string      `json:"card"`
	ValueCents   int64       `json:"valueCents"`
	ApproverRole policy.Role `json:"approverRole"`
	// EscalatedTo is the role an unanswered card was also offered to.
	EscalatedTo policy.Role `json:"escalatedTo,omitempty"`
	// ApprovalsNeeded is how many distinct approvers the card needs;
	// ApprovedBy are those counted so far, before the last.
	ApprovalsNeeded int      `json:"approvalsNeeded,omitempty"`
	ApprovedBy      []string `json:"approvedBy,omitempty"`
	ExpiresAt       string   `json:"expiresAt"`
	ArgsHash        string   `json:"argsHash"`
	// RunID is the run that shows the card; a signed decision names it.
	RunID string `json:"runId"`
	// Version counts the card's versions when an approver has edited it.
	Version int `json:"version,omitempty"`
	// SignedVersion is the card version a decision's signature names; 0 on
	// cards put up before versions were signed.
	SignedVersion int `json:"signedVersion,omitempty"`
	// SignIn is what the call waits for while it is awaiting_sign_in.
	SignIn *SignInNeed `json:"signIn,omitempty"`
	// CardResource is what the card's action acts on, while a card is up
	// and when it names one: with ApproverRole, who may decide it.
	CardResource *policy.ResourceRef `json:"resource,omitempty"`
	// ConfirmInClient is the sign-in a decision in the requester's own
	// client needs (the card's evidence), while a card is up whose row
	// allows one.
	ConfirmInClient *policy.Requirement `json:"confirmInClient,omitempty"`
	resource        policy.ResourceRef
}

// SignInNeed is what a call awaiting_sign_in waits for: why (the code),
// and for a step-up the requester tier (an acr) and how recent the
// sign-in must be. A sign-in page asks the provider for exactly this.
type SignInNeed struct {
	Code policy.Code `json:"code"`
	// Tier is the acr the sign-in must reach; empty when any will do.
	Tier string `json:"tier,omitempty"`
	// MaxAgeSeconds is how recent the sign-in must be; 0 when any is.
	MaxAgeSeconds int64 `json:"maxAgeSeconds,omitempty"`
}

// CredentialInput is the credential signal's payload.
type CredentialInput struct {
	CredentialRef string `json:"credentialRef"`
}

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
	// StatusWithdrawn: the requester took the card back before anyone
	// decided it; nothing ran.
	StatusWithdrawn CallStatus = "withdrawn"
)

// card is the state a card shows for a call that ends (or waits) so; the
// two vocabularies share these words by design.
func (s CallStatus) card() activities.CardStatus { return activities.CardStatus(s) }

// Search attributes every call keeps current, so ops can find calls in
// Temporal Web or with `temporal workflow list --query`.
var (
	ToolNameKey     = temporal.NewSearchAttributeKeyKeyword("ToolName")
	ToolStatusKey   = temporal.NewSearchAttributeKeyKeyword("ToolStatus")
	ToolCodeKey     = temporal.NewSearchAttributeKeyKeyword("ToolCode")
	RequestedByKey  = temporal.NewSearchAttributeKeyKeyword("RequestedBy")
	ApproverRoleKey = temporal.NewSearchAttributeKeyKeyword("ApproverRole")
	ResourceKey     = temporal.NewSearchAttributeKeyKeyword("Resource")
	ValueCentsKey   = temporal.NewSearchAttributeKeyInt64("ValueCents")
)

// searchAttributeKeys are every search attribute a call keeps, in the
// order they are listed.
var searchAttributeKeys = []temporal.SearchAttributeKey{ToolNameKey, ToolStatusKey, ToolCodeKey, RequestedByKey, ApproverRoleKey, ResourceKey, ValueCentsKey}

// SearchAttribute is one search attribute's name and type, as a dev
// server's --search-attribute flag and `temporal operator search-attribute
// create` want them.
type SearchAttribute struct{ Name, Type string }

// SearchAttributes are the search attributes a namespace must have for
// toolgate's calls, derived from their keys.
func SearchAttributes() []SearchAttribute {
	out := make([]SearchAttribute, len(searchAttributeKeys))
	for i, k := range searchAttributeKeys {
		out[i] = SearchAttribute{Name: k.GetName(), Type: k.GetValueType().String()}
	}
	return out
}

// Metric names of toolgate's own metrics (Prometheus adds _total to counters).
const (
	MetricDecisions      = "toolgate_decisions"
	MetricApprovals      = "toolgate_approvals"
	MetricTimeToDecision = "toolgate_time_to_decision"
)
