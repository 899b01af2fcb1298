package policy

import (
	"encoding/json"
	"reflect"
	"time"
)

// Tier is a tool's risk tier. It sets a floor on the decision that a policy
// row can raise but never lower.
type Tier string

// The risk tiers of docs/contract.md.
const (
	TierRead            Tier = "read"
	TierWriteReversible Tier = "write_reversible"
	TierWrite           Tier = "write"
	TierIrreversible    Tier = "irreversible"
)

// Floor is the least strict decision the tier permits.
func (t Tier) Floor() Decision {
	switch t {
	case TierRead, TierWriteReversible:
		return DecisionAllow
	case TierWrite, TierIrreversible:
		return DecisionApprove
	}
	return DecisionDeny // an unclassified tier is never allowed
}

// ToolSpec describes one tool: what the model sees and how toolgate treats it.
type ToolSpec struct {
	// Name is the wire name the model calls.
	Name string
	// Description says when to use the tool and when not to.
	Description string
	// Args is the Go type the arguments decode into strictly.
	Args reflect.Type
	// Tier is the risk tier.
	Tier Tier
	// Idempotent tools may be retried; the others run at most once.
	Idempotent bool
	// RequiresCredential means the call runs as the signed-in person.
	RequiresCredential bool
	// Timeout bounds one upstream attempt.
	Timeout time.Duration
	// DryRun tools are previewed read-only, as the user, before step 6: the
	// preview values the call and makes the choices the approver sees.
	DryRun bool
	// Example is a valid call's args, for docs and tests.
	Example string
	// Route is the upstream request an authorized call makes; a tool
	// without one (or an MCP target) cannot run.
	Route Route
	// MCP, when set, runs the call as one tools/call on a team's own MCP
	// server instead of a Route: the tool as that server defines it,
	// accepted by an operator at the pin its definition had then.
	MCP *MCPTarget
	// ValueArg, for a tool without a dry run, names the required integer
	// arg that is the call's value, in its pack's Unit (minor units of its
	// currency): what the hard limit, the spend limits and the approver
	// routing judge. A tool with neither has no value.
	ValueArg string
	// Shared says the tool acts on something several people share (a
	// warehouse's stock, a team's queue): two of them asking the same thing
	// want one card.
	// Otherwise each requester's intent is their own.
	Shared bool
	// Resource names the arg that holds the resource the call acts on,
	// which the session must hold (step 5); zero when it names none.
	Resource ResourceArg
	// Unavailable, when set, is told to the model beside an
	// upstream_unavailable: what to do instead, e.g. not to answer from
	// memory when a retrieval index is down. Idempotent tools only.
	Unavailable string
	// Verifies, when set, makes the tool one of its pack's verification
	// tools: its upstream says whether the factor matches, and toolgate,
	// not the model, raises the caller's tier or counts the miss.
	Verifies *Factor
	// Receipt, when set, names the field of the tool's result that
	// identifies what the call made upstream, for its executed card and
	// its story.
	Receipt *Receipt
}

// MCPTarget is one tool of an upstream MCP server: the server's name in
// its pack, the tool's own name there, and the pin (mcpupstream's hash of
// its definition) an operator accepted. A server that now defines the tool
// otherwise is not called.
type MCPTarget struct {
	Server string
	Tool   string
	Pin    string
	// KeyMeta is the _meta field the server takes an idempotency key in
	// (its keyMeta), "" when it takes none: then no key is sent.
	KeyMeta string
	// Preview, when set, is the tool's dry run: a read-only tool of the
	// same server whose answer the card shows beside the exact args.
	Preview *MCPPreview
}

// MCPPreview is a read-only, closed-world tool of the server, called with
// args taken from the call's (Args: the preview's arg name to the call's),
// as an operator accepted it (Pin).
type MCPPreview struct {
	Tool string
	Pin  string
	Args map[string]string
	// Row is the preview tool's own row (its wire name): the caller must
	// be allowed to read with it, the args as its row narrows them, since
	// what it reads goes on the card the caller is answered with.
	Row string
}

// Runnable reports whether a call of the tool has somewhere to go: an
// upstream route or an MCP target.
func (s ToolSpec) Runnable() bool { return s.Route.Path != "" || s.MCP != nil }

// Route is how a call's authorized args (canonical JSON, session filled)
// become one upstream request: data, so the activity looks it up.
type Route struct {
	// Method is GET or POST.
	Method string
	// Path has {field} placeholders filled from the args, e.g.
	// /v1/portals/{portalRef}/plan.
	Path string
	// Query maps query parameters to the arg fields that fill them, when present.
	Query map[string]string
	// Session maps query parameters to resource kinds of the tool's pack:
	// each is filled with the session's first resource of that kind, never
	// from the args, and left out when the session holds none (a corpus
	// scoped to the caller's company, which the model must not narrow).
	Session map[string]string
	// Body lists the arg fields sent as a JSON object.
	Body []string
	// Keyed writes send the call's workflow ID as the Idempotency-Key.
	Keyed bool
	// Dedupes is the pack's word that the upstream runs one
	// Idempotency-Key once, answering a repeat with the first call's
	// outcome: what lets an idempotent write (not a GET) be sent again.
	Dedupes bool
}

// JustificationOf reads the assistant's justification from canonical args,
// "" when there is none.
func JustificationOf(args json.RawMessage) string {
	var a struct {
		Justification string `json:"justification"`
	}
	_ = json.Unmarshal(args, &a)
	return a.Justification
}
