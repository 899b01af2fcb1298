package policy

// Code is one member of the contract's (docs/contract.md) closed set of outcome codes. The
// model-facing message, the audit reason and the tests all key off these
// exact strings.
type Code string

// The closed set of codes.
const (
	CodeOK                    Code = "ok"
	CodeUnknownTool           Code = "unknown_tool"
	CodeToolDenied            Code = "tool_denied"
	CodeRole                  Code = "role"
	CodeInvalidArguments      Code = "invalid_arguments"
	CodeCredentialUnavailable Code = "credential_unavailable"
	// CodeResourceScope refuses a resource the session does not hold
	// (CodeStoreScope where recorded before the rename).
	CodeResourceScope       Code = "resource_scope"
	CodeOverLimit           Code = "over_limit"
	CodeRateLimit           Code = "rate_limit"
	CodeRejected            Code = "rejected"
	CodeExpired             Code = "expired"
	CodeTimeout             Code = "timeout"
	CodeUpstreamUnavailable Code = "upstream_unavailable"
	CodeUpstreamError       Code = "upstream_error"
	// CodeLocked ends a card that took more refused decisions than
	// MaxRefusedDecisions: it is closed for good and nothing runs.
	CodeLocked Code = "locked"
	// CodeIdempotencyConflict answers a tool-call ID reused with another
	// tool, other args or another session.
	CodeIdempotencyConflict Code = "idempotency_conflict"
	// CodeStepUpRequired refuses a decision (or a call) whose sign-in is
	// weaker or older than what it needs: the person must sign in again.
	CodeStepUpRequired Code = "step_up_required"
	// CodeAlreadyPending ends a call whose equivalent card (same tool,
	// resource and canonical args) is already waiting for a person.
	CodeAlreadyPending Code = "already_pending"
	// CodeDefinitionChanged ends a call of a team's MCP server's tool that
	// the server now defines otherwise than an operator accepted: nothing
	// was sent, and a person must accept the new definition first.
	CodeDefinitionChanged Code = "definition_changed"
	// CodeWithdrawn ends a card its requester took back before anyone
	// decided it: nothing ran.
	CodeWithdrawn Code = "withdrawn"
)

// CodeStoreScope was CodeResourceScope's wire value, a demo pack's word.
// It is no longer in the closed set and no new call says it; histories,
// audit rows, eval records and results written before still carry it, and
// a card put up before keeps it to its end (Canonical reads it as
// CodeResourceScope).
const CodeStoreScope Code = "store_scope"

// Canonical is the closed set's member c stands for: CodeResourceScope for
// the recorded CodeStoreScope, c itself otherwise. Whatever compares or
// groups codes read from a record compares c.Canonical().
func (c Code) Canonical() Code {
	if c == CodeStoreScope {
		return CodeResourceScope
	}
	return c
}

// Codes lists the whole closed set, in the contract's (docs/contract.md) order.
var Codes = []Code{
	CodeOK, CodeUnknownTool, CodeToolDenied, CodeRole, CodeInvalidArguments,
	CodeCredentialUnavailable, CodeResourceScope, CodeOverLimit, CodeRateLimit,
	CodeRejected, CodeExpired, CodeTimeout, CodeUpstreamUnavailable, CodeUpstreamError,
	CodeLocked, CodeIdempotencyConflict, CodeStepUpRequired, CodeAlreadyPending, CodeDefinitionChanged,
	CodeWithdrawn,
}

// Valid reports whether c is in the closed set.
func (c Code) Valid() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// Step is a position in the authorization chain of docs/contract.md.
type Step int

// The steps of the chain, in the order they run.
const (
	StepRegistered Step = iota
	StepNotDenied
	StepRole
	StepArguments
	StepCredential
	StepResourceScope
	StepHardLimit
	StepRateLimit
)

// Steps lists the chain in order.
var Steps = []Step{StepRegistered, StepNotDenied, StepRole, StepArguments, StepCredential, StepResourceScope, StepHardLimit, StepRateLimit}

// Code is the failure code of the step.
func (s Step) Code() Code {
	return [...]Code{CodeUnknownTool, CodeToolDenied, CodeRole, CodeInvalidArguments,
		CodeCredentialUnavailable, CodeResourceScope, CodeOverLimit, CodeRateLimit}[s]
}

func (s Step) String() string { return string(s.Code()) }
