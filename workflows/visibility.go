package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// StartAttributes are the search attributes a client sets when it starts a
// call, so it is findable before its first workflow task runs.
func StartAttributes(p *policy.Policy, in ToolCallInput) temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		ToolNameKey.ValueSet(toolLabel(p, in.Tool)), ToolStatusKey.ValueSet(string(StatusDeciding)), RequestedByKey.ValueSet(label(in.Session.UserID)),
	}
	if r := p.ResourceAbout(in.Tool, nil, in.Session); r.Kind != "" {
		updates = append(updates, ResourceKey.ValueSet(resourceLabel(r)))
	}
	return temporal.NewSearchAttributes(updates...)
}

// StaticSummary is the one line Temporal Web shows for a call.
func StaticSummary(p *policy.Policy, in ToolCallInput) string {
	about := "no resource"
	if r := p.ResourceAbout(in.Tool, nil, in.Session); r.Kind != "" {
		about = label(r.String())
	}
	return fmt.Sprintf("%s by %s (%s) for %s", toolLabel(p, in.Tool), label(in.Session.UserID), label(string(in.Session.Role)), about)
}

// toolLabel names a tool for search attributes, summaries and metrics: a
// registered name as is; anything else, which came from the model, marked
// and cut short, so it cannot exceed Temporal's size limits or mislead.
func toolLabel(p *policy.Policy, name string) string {
	if _, ok := p.Spec(name); ok {
		return name
	}
	return "unknown_tool:" + label(name)
}

// label makes caller text printable and at most 64 characters.
func label(s string) string {
	r := []rune(strings.ToValidUTF8(s, "?"))
	if len(r) > 64 {
		r = append(r[:64], '…')
	}
	for i, c := range r {
		if !unicode.IsPrint(c) {
			r[i] = '?'
		}
	}
	return string(r)
}

// board is what a call shows of itself: the status query's answer, the
// search attributes and current details ops read in Temporal Web, and the
// results and first outcome an agent backend gets. All of them follow
// set, and, while a card is up, show.
type board struct {
	ctx    workflow.Context
	policy *policy.Policy
	in     ToolCallInput
	key    string
	shape  shape
	status Status
	// first is the call's first outcome: a card or a sign-in wait, else
	// its result.
	first *Outcome
}

// show puts what card k shows on the board: the status query's card
// fields, and the search attributes and details that follow from them at
// the next set.
func (b *board) show(k *card) {
	s := &b.status
	s.Card, s.ValueCents, s.ApproverRole, s.ArgsHash = k.pending.Card, k.pending.ValueCents, k.Role, k.ArgsHash
	s.ExpiresAt, s.SignedVersion, s.ApprovalsNeeded, s.EscalatedTo = k.pending.ExpiresAt, k.Card.Version, k.Need, k.escalatedTo
	s.resource, s.ApprovedBy, s.Version, s.CardResource, s.ConfirmInClient = k.d.verdict.Resource, nil, 0, nil, nil
	if r := k.d.verdict.Resource; r.Kind != "" {
		s.CardResource = &r
	}
	if k.ConfirmInClient && k.Evidence != nil {
		e := *k.Evidence
		s.ConfirmInClient = &e
	}
	for _, a := range k.pending.Approvals {
		s.ApprovedBy = append(s.ApprovedBy, a.UserID)
	}
	if k.version > firstCardVersion {
		s.Version = k.version
	}
}

// set moves the call to a new status: the status query, the search
// attributes and the current details all follow.
func (b *board) set(status CallStatus, code policy.Code) {
	b.status.Status = status
	if status == StatusExecuting {
		if b.status.Card == "" {
			return // a call without a card runs in the same task; its final status follows at once
		}
		if b.shape.lean() {
			// The run is short and its end upserts: the status query and the
			// current details say executing meanwhile, at no action's cost.
			workflow.SetCurrentDetails(b.ctx, b.details(code))
			return
		}
	}
	updates := []temporal.SearchAttributeUpdate{ToolNameKey.ValueSet(toolLabel(b.policy, b.in.Tool)), ToolStatusKey.ValueSet(string(status)), RequestedByKey.ValueSet(label(b.in.Session.UserID))}
	if code != "" {
		updates = append(updates, ToolCodeKey.ValueSet(string(code)))
	}
	if b.status.resource.Kind != "" {
		updates = append(updates, ResourceKey.ValueSet(resourceLabel(b.status.resource)))
	}
	if b.status.ValueCents != 0 {
		updates = append(updates, ValueCentsKey.ValueSet(b.status.ValueCents))
	}
	if b.status.ApproverRole != "" {
		updates = append(updates, ApproverRoleKey.ValueSet(string(b.status.ApproverRole)))
	}
	if err := workflow.UpsertTypedSearchAttributes(b.ctx, updates...); err != nil {
		workflow.GetLogger(b.ctx).Warn("search attributes not updated", "error", err)
	}
	workflow.SetCurrentDetails(b.ctx, b.details(code))
}

// details is the Markdown Temporal Web shows as the call's current details.
func (b *board) details(code policy.Code) string {
	s := b.status
	d := fmt.Sprintf("**%s** · %s by %s (%s)", s.Status, toolLabel(b.policy, b.in.Tool), label(b.in.Session.UserID), label(string(b.in.Session.Role)))
	if code != "" && code != policy.CodeOK {
		d += fmt.Sprintf(" · code `%s`", code)
	}
	if s.resource.Kind != "" {
		d += " · " + label(s.resource.String())
	}
	if s.Card != "" {
		d += fmt.Sprintf("\n\nCard: %s\n\nRouted to %s, expires %s, args hash `%s`", s.Card, s.ApproverRole, s.ExpiresAt, s.ArgsHash)
	}
	return d
}

// result is the call's result with status and code: msg and result for
// the model, the card it showed, the idempotency key.
func (b *board) result(status CallStatus, code policy.Code, msg string, retryable, auth bool, result json.RawMessage) ToolCallResult {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	return ToolCallResult{Status: status, Code: code, Message: msg, Retryable: retryable, AuthRequired: auth,
		Result: result, Card: b.status.Card, IdempotencyKey: b.key}
}

// outcome is res as the first outcome: with the card, if one is up.
func (b *board) outcome(res ToolCallResult) *Outcome {
	o := &Outcome{ToolCallResult: res, ValueCents: b.status.ValueCents, ApproverRole: b.status.ApproverRole,
		ExpiresAt: b.status.ExpiresAt, ArgsHash: b.status.ArgsHash, RunID: b.status.RunID, SignedVersion: b.status.SignedVersion}
	if res.Status == StatusPendingApproval {
		if r := b.status.resource; r.Kind != "" {
			o.Resource = &r
		}
		if b.status.ApprovalsNeeded > 1 {
			o.ApprovalsNeeded = b.status.ApprovalsNeeded
		}
		o.ConfirmInClient = b.status.ConfirmInClient
	}
	return o
}

// publish makes res the call's first outcome, unless one came before it.
func (b *board) publish(res ToolCallResult) {
	if b.first == nil {
		b.first = b.outcome(res)
	}
}

// about is the resource a refused call was about: the one it named, else
// the session's (policy.ResourceAbout), so "what happened at this
// resource" finds it.
func (b *board) about(v policy.Verdict) policy.ResourceRef {
	if v.Resource.Kind != "" {
		return v.Resource
	}
	return b.policy.ResourceAbout(b.in.Tool, b.in.Args, b.in.Session)
}

// resourceLabel is a resource as the Resource search attribute holds it:
// "kind/id", e.g. "portal/PRT-40122".
func resourceLabel(r policy.ResourceRef) string { return label(r.Kind + "/" + r.ID) }
