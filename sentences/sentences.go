// Package sentences is every sentence toolgate tells a model (and, through
// it, the person): why a call was refused, what it waits for, what ran, and
// what to do next, keyed by the code it explains. The chain, the args codec,
// the workflow and its activities name a Key and its parameters; the words
// are here, in one file, so they can be read, compared and changed together.
// A recorded message stays as it was recorded: a call in flight keeps the
// words its history holds.
package sentences

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Key names one sentence (or one phrase of several): the code it explains
// and, where a code has several, the case.
type Key int

// Say is the sentence of k with its parameters, as fmt.Sprintf writes them;
// a sentence without parameters is returned as it stands (no allocation).
func Say(k Key, params ...any) string {
	if len(params) == 0 {
		return table[k]
	}
	return fmt.Sprintf(table[k], params...)
}

// Capital is s with its first letter upper-case, to begin a sentence with a
// system's name ("the member portal") or a kind's: the whole letter, in
// whatever language the pack names it.
func Capital(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// The keys, by code in the contract's order.
const (
	// ok
	Allowed Key = iota
	AwaitingApproval
	NeedsDryRun
	Done
	DoneAsEdited
	PendingApproval
	ApproverOne
	ApproversMany
	ApprovedSoFar
	ApprovedSoFarNote
	Edited
	Escalated
	StillWaiting

	// unknown_tool, tool_denied, role
	UnknownTool
	ToolDenied
	MalformedSession
	RoleNotOffered

	// invalid_arguments: the chain and the call
	ArgsUnjudged
	ArgsUnencoded
	CallUnreadable
	BadIDs

	// invalid_arguments: the args codec
	ArgsTooLong
	ArgsNotUTF8
	ArgsNotAnObject
	ArgsNotOneObject
	ArgsNotJSON
	ArgsNotJSONAgain
	UnknownField
	FieldTwice
	ValueNotJSON
	ExtraData
	FieldWrongType
	SomeOtherType
	ArgsSyntax
	ArgsUnread
	ArgsInvalid
	OneOfTwoRequired
	FieldBreaksRule
	RuleRequired
	RuleMinLength
	RuleMinItems
	RuleMin
	RuleMaxLength
	RuleMaxItems
	RuleMax
	RuleOneOf
	RuleDate
	RuleCursor
	RuleStartsWith
	RuleOther
	KindWhole
	KindNumber
	KindBool
	KindString
	KindList
	KindOther

	// credential_unavailable, step_up_required
	NotSignedIn
	MustSignIn
	SignInStronger
	SignInNone
	SignInUnusable
	NotVerified
	StrongerSignIn
	VerifiedAt
	VerifiedReason
	VerifyWith
	DoNotDoItAnotherWay
	LockedOutOfVerification
	VerifyPassed
	VerifyRetry
	VerifyBusy
	VerifyLockedOut

	// resource_scope
	NoResourceHeld
	InvalidSessionResource
	ResourceNotHeld
	ResourceNotFound

	// over_limit, rate_limit
	ValuedBelowZero
	Unvalued
	OverHardLimit
	CallUnvalued
	UsageUncounted
	OverCallLimit
	OverValueLimit
	SignedInPerson
	NothingPlanned
	DryRunRefused
	Released

	// tool_denied at routing: no approver
	ApproverUnknown
	NoApprover
	NoApproverWorth

	// already_pending, idempotency_conflict
	AlreadyPending
	OtherCall
	OtherCallInUse
	EarlierRun

	// rejected, locked, expired
	Rejected
	RejectedWithNote
	Locked
	Expired
	SignInExpired

	// timeout, upstream_unavailable, definition_changed, upstream_error
	TimedOutSafe
	TimedOutUnknown
	Unavailable
	UnavailableNote
	UnavailableUnknown
	DefinitionChanged
	UpstreamRefused
	UpstreamRefusedBy
	FailedUnexpectedly
	EndedWithoutResult
	NotStarted
	StatusArgs
	StatusUnreadable
	NoSuchCall

	// withdrawn
	Withdrawn
	WithdrawnWithNote
	WithdrawArgs
	NotWithdrawable

	// A list cut to fit (sanitize).
	PageNote
	CutPageNote
	CutNote

	// The MCP server's own words to a model it serves.
	MCPInstructions
	MCPPending
	MCPProgress
	MCPOutcome
	MCPConfirm
	MCPSignIn
	MCPConfirmInClient

	keys
)

// table holds the words, by key.
var table = [keys]string{
	Allowed:           "Allowed.",
	AwaitingApproval:  "Waiting for a person to approve.",
	NeedsDryRun:       "Needs a dry run.",
	Done:              "Done. Quote the result to the person in your own words.",
	DoneAsEdited:      "Done, as an approver edited it: what ran is in the result, and it differs from what you proposed. Tell the person what ran, in your own words.",
	PendingApproval:   "Waiting for %s to approve the card (until %s). Tell the person it is waiting; do not call again.",
	ApproverOne:       "a %s",
	ApproversMany:     "%d different people with the role %s",
	ApprovedSoFar:     "Approval %d of %d: %s approved; the card waits for %d more.",
	ApprovedSoFarNote: " Their note: %s",
	Edited:            "Version %d: %s edited %s; %s (was %s), routed to the %s.",
	Escalated:         "Nobody answered within %s: the card is also offered to the %s. It still expires at %s.",
	StillWaiting:      "Still %s (until %s). Tell the person; check again later.",

	UnknownTool:      "There is no tool called %q. Use only the tools you were given: %s. Do not retry this name.",
	ToolDenied:       "%s is not available to assistants. Do not retry; tell the person this has to be done by the responsible team.",
	MalformedSession: "The session sent with this call is malformed: %s. Do not retry; the agent backend must fix the session.",
	RoleNotOffered:   "%s is not available to the role %q of the signed-in person. Do not retry; tell the person who can do it.",

	ArgsUnjudged:   "The arguments could not be judged (%v). Do not retry; tell the person this tool is misconfigured.",
	ArgsUnencoded:  "The arguments could not be encoded: %v. Check them and call again.",
	CallUnreadable: "The call could not be read. Check the arguments and call again.",
	BadIDs:         "The call's IDs cannot name it: %s. Nothing ran; the agent backend must start it again with valid IDs.",

	ArgsTooLong:      "The arguments are %d bytes, more than the %d allowed. Send only the fields %s, with short values.",
	ArgsNotUTF8:      "The arguments are not valid UTF-8 text. Send them again as plain JSON.",
	ArgsNotAnObject:  "The arguments must be one JSON object with the fields %s. Call again with an object such as %s.",
	ArgsNotOneObject: "The arguments must be one JSON object: %v.",
	ArgsNotJSON:      "The arguments are not valid JSON: %v. Send them again as one JSON object.",
	ArgsNotJSONAgain: "The arguments are not valid JSON: %v.",
	UnknownField:     "Unknown field %q. The only fields are %s (names are case-sensitive). Remove %q and call again.",
	FieldTwice:       "Field %q is given twice. Give each field once and call again.",
	ValueNotJSON:     "The value of %q is not valid JSON: %v.",
	ExtraData:        "The arguments have extra data after the JSON object. Send exactly one object.",
	FieldWrongType:   "Field %q must be %s, not a JSON %s. Fix %q and call again.",
	SomeOtherType:    "a value of another type",
	ArgsSyntax:       "The arguments are not valid JSON (%v at byte %d). Send them again as one JSON object.",
	ArgsUnread:       "The arguments could not be read: %v. Use only the fields %s.",
	ArgsInvalid:      "The arguments are not valid: %v.",
	OneOfTwoRequired: "Give %q or %q: one of the two is required. Call %s again with one of them.",
	FieldBreaksRule:  "Field %q %s. Fix %q and call %s again.",
	RuleRequired:     "is required",
	RuleMinLength:    "must be at least %s characters long",
	RuleMinItems:     "must hold at least %s items",
	RuleMin:          "must be at least %s",
	RuleMaxLength:    "must be at most %s characters long",
	RuleMaxItems:     "must hold at most %s items",
	RuleMax:          "must be at most %s",
	RuleOneOf:        "must be one of: %s",
	RuleDate:         "must be a date written YYYY-MM-DD, e.g. 2026-12-01",
	RuleCursor:       "must be the nextCursor of a previous answer (digits only)",
	RuleStartsWith:   "must start with %q",
	RuleOther:        "fails the rule %q",
	KindWhole:        "a whole number",
	KindNumber:       "a number",
	KindBool:         "true or false",
	KindString:       "a string",
	KindList:         "a list, each item %s",
	KindOther:        "a %s",

	NotSignedIn:             "The person is not signed in, so this cannot run on their behalf. Ask them to sign in, then call the tool again with the same arguments.",
	MustSignIn:              "The person must sign in before this can run on their behalf (%s). Ask them to sign in; the call waits until %s and carries on by itself once they have. Do not call again.",
	SignInStronger:          "this tool needs a stronger sign-in than theirs",
	SignInNone:              "they are not signed in, or their sign-in can no longer be used",
	SignInUnusable:          "The person's sign-in could not be used (expired, revoked, or it does not hold what the session claims). Ask them to sign in again, then call again with the same arguments.",
	NotVerified:             "The caller is not verified for this. Do not do it another way; tell the caller.",
	StrongerSignIn:          "This tool needs a stronger sign-in than the person's (result: requiredTier, heldTier). Do not retry: ask the person to sign in again with the stronger method, then call again with the same arguments.",
	VerifiedAt:              "This needs the caller verified at %s; they hold %s.",
	VerifiedReason:          " %s.",
	VerifyWith:              " Ask the caller for their %s and call %s with it, then call this again with the same arguments.",
	DoNotDoItAnotherWay:     " Do not do it another way.",
	LockedOutOfVerification: "The caller is locked out of verification with %s after too many wrong answers, in this call or an earlier one: nothing that needs a verified caller can be done until a person hands them back. Do not ask for any factor again and do not do this another way; tell the caller and hand them to a person.",
	VerifyPassed:            "Verified: the caller now holds %s. Call again what needed it.",
	VerifyRetry:             "That did not match. The caller may try once more: %d attempt(s) left.",
	VerifyBusy:              "Another answer is being checked: this one was not. Wait for that result before asking again.",
	VerifyLockedOut:         "The caller is locked out: nothing that needs verification can be done, now or on another call, until a person hands them back. Do not ask again, do not switch to another factor, and do not do what they asked another way; hand them to a person.",

	NoResourceHeld:         "The signed-in person has no %[1]s, so there is no default %[1]s for this call. Do not retry; tell the person their account has no %[1]s assigned.",
	InvalidSessionResource: "The signed-in person's session names %[1]s %[2]s, which is not a valid %[1]s. Do not retry; tell the person their session needs fixing.",
	ResourceNotHeld:        "%[1]s %[2]s is not one of the signed-in person's %[3]s (%[4]s). Call again with %[5]s set to one of them, or leave %[5]s out.",
	ResourceNotFound:       "No %s %q was found. Check %s and call again, or leave %s out.",

	ValuedBelowZero: "%s was valued below zero, which no call is worth. Do not retry; tell the person.",
	Unvalued:        "%s could not be valued, so it cannot be checked against its limit. Retry once; if it fails again, tell the person.",
	OverHardLimit:   "This %s is worth %s, above the limit of %s for one call. Propose a smaller quantity, or tell the person it needs a manual request.",
	CallUnvalued:    "The call could not be valued, so it cannot be checked against its limits. Retry once; if it fails again, tell the person.",
	UsageUncounted:  "Usage could not be counted, so limits cannot be checked. Retry in a minute.",
	OverCallLimit:   "%s has reached its limit of %d calls per %s for %s. Do not retry now; tell the person it can be done again later.",
	OverValueLimit:  "This %s would take %s over its limit of %s per %s (%s already used). Do not retry now; propose less or tell the person.",
	SignedInPerson:  "the signed-in person",
	NothingPlanned:  "Nothing can be planned: %s. Propose a smaller quantity, or tell the person.",
	DryRunRefused:   "The dry run could not plan this: %s",
	Released:        "Nothing was sent upstream, so what the call reserved against its limits is given back.",

	ApproverUnknown: "The approver of this %s could not be worked out (%v). Do not retry; tell the person it needs a manual request.",
	NoApprover:      "No one can approve a %s. Do not retry; tell the person it needs a manual request.",
	NoApproverWorth: "No one can approve a %s worth %s. Do not retry; tell the person it needs a manual request.",

	AlreadyPending: "An equivalent request is already waiting for a person to approve it, until %s. Do not call again: tell the person it is waiting, and wait for that decision.",
	OtherCall:      "This toolCallId was already used for a different call (another tool, other arguments or another session), so nothing ran. Use a new toolCallId for a new call.",
	OtherCallInUse: "This toolCallId is already in use for a different call (another tool, other arguments or another session), so nothing ran. Use a new toolCallId for a new call.",
	EarlierRun:     "This toolCallId was already used by an earlier run (%s), so nothing ran again. Tell the person; if the call is still needed, use a new toolCallId.",

	Rejected:         "%s rejected the card, so nothing ran. Do not propose it again unless the person asks.",
	RejectedWithNote: "%s rejected the card, so nothing ran. Their note (result.note) says why: tell the person, and do not propose it again unless they ask.",
	Locked:           "The card was locked after %d refused decisions, so nothing ran and nobody can approve it now. Tell the person; if the move is still needed, it takes a new call with a new toolCallId.",
	Expired:          "Nobody approved the card within %s, so nothing ran. If it is still needed, call %s again for a fresh preview.",
	SignInExpired:    "The person did not sign in within %s, so nothing ran. If it is still needed, call %s again once they have signed in.",

	TimedOutSafe:       "%s did not answer in time. It is safe to call again with the same arguments.",
	TimedOutUnknown:    "%s did not answer in time, so it is unknown whether this took effect. Do not call again; tell the person to check before trying again.",
	Unavailable:        "%s is unavailable right now. Call again in a minute with the same arguments.",
	UnavailableNote:    "%s is unavailable right now. %s",
	UnavailableUnknown: "%s is unavailable right now and it is unknown whether this took effect. Do not call again; tell the person to check shortly.",
	DefinitionChanged:  "%s now defines this tool otherwise than a person accepted, so it was not run. Do not call it again; tell the person that an operator must read and accept its new definition first.",
	UpstreamRefused:    "%s refused the call: %s. Fix the request if you can; otherwise tell the person.",
	UpstreamRefusedBy:  "%s refused the call: ",
	FailedUnexpectedly: "The call failed in an unexpected way. Do not retry; tell the person.",
	EndedWithoutResult: "The call ended without a result; tell the person to check with support.",
	NotStarted:         "toolgate could not start this call: %s. Try again in a moment with the same arguments.",
	StatusArgs:         `arguments must be {"callId": "<the idempotencyKey of an earlier result>"}`,
	StatusUnreadable:   "The call's status could not be read right now; try again in a moment.",
	NoSuchCall:         "No call %q of yours was found. Use the idempotencyKey of one of your own results.",

	Withdrawn:         "%s withdrew this call before anyone decided it, so nothing ran. Do not call again unless the person asks for it anew.",
	WithdrawnWithNote: "%s withdrew this call before anyone decided it, so nothing ran. Their note (result.note) says why; do not call again unless the person asks for it anew.",
	WithdrawArgs:      `arguments must be {"callId": "<the idempotencyKey of an earlier result>"}, and optionally "reason": the person's words, at most 500 characters`,
	NotWithdrawable:   "Call %q is not waiting for a person to approve it, so there is nothing to withdraw; read its outcome with toolgate_call_status.",

	PageNote:    "Showing %d of %d items. Call again with cursor %q for more.",
	CutPageNote: "Cut to fit %d characters: showing %d of %d items on this page. Call again with cursor %q for the rest.",
	CutNote:     "Cut to fit %d characters: showing %d of %d items; ask a narrower question for the rest.",

	MCPInstructions:    "Every call is checked against toolgate's policy for the signed-in person; some wait for a person to approve. Follow each result's message: it says what to do next.",
	MCPPending:         "A person must approve this before it runs. The card: %s\n%s\nLater, call %s with callId %q to read the outcome.",
	MCPProgress:        "Waiting for a %s to approve: %s (until %s)",
	MCPOutcome:         "%s (%s): %s",
	MCPConfirm:         "Confirm or reject this in toolgate's card page, signed in as yourself: %s",
	MCPSignIn:          "Sign in at this page, as yourself, so the call can carry on (%s); it waits until %s.",
	MCPConfirmInClient: "Approve or reject this yourself; your answer is recorded as confirmed in your client, signed in as you are here: %s",
}
