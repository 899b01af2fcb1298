package workflows

import (
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

// setStatus moves the call to a new status: the status query, the search
// attributes and the current details all follow.
func (c *call) setStatus(status CallStatus, code policy.Code) {
	c.status.Status = status
	if status == StatusExecuting {
		if c.status.Card == "" {
			return // a call without a card runs in the same task; its final status follows at once
		}
		if c.version >= shapeLean {
			// The run is short and its end upserts: the status query and the
			// current details say executing meanwhile, at no action's cost.
			workflow.SetCurrentDetails(c.ctx, c.details(code))
			return
		}
	}
	updates := []temporal.SearchAttributeUpdate{ToolNameKey.ValueSet(toolLabel(c.settings.Policy, c.in.Tool)), ToolStatusKey.ValueSet(string(status)), RequestedByKey.ValueSet(label(c.in.Session.UserID))}
	if code != "" {
		updates = append(updates, ToolCodeKey.ValueSet(string(code)))
	}
	if c.status.resource.Kind != "" {
		updates = append(updates, ResourceKey.ValueSet(resourceLabel(c.status.resource)))
	}
	if c.status.ValueCents != 0 {
		updates = append(updates, ValueCentsKey.ValueSet(c.status.ValueCents))
	}
	if c.status.ApproverRole != "" {
		updates = append(updates, ApproverRoleKey.ValueSet(string(c.status.ApproverRole)))
	}
	if err := workflow.UpsertTypedSearchAttributes(c.ctx, updates...); err != nil {
		workflow.GetLogger(c.ctx).Warn("search attributes not updated", "error", err)
	}
	workflow.SetCurrentDetails(c.ctx, c.details(code))
}

// details is the Markdown Temporal Web shows as the call's current details.
func (c *call) details(code policy.Code) string {
	d := fmt.Sprintf("**%s** · %s by %s (%s)", c.status.Status, toolLabel(c.settings.Policy, c.in.Tool), label(c.in.Session.UserID), label(string(c.in.Session.Role)))
	if code != "" && code != policy.CodeOK {
		d += fmt.Sprintf(" · code `%s`", code)
	}
	if c.status.resource.Kind != "" {
		d += " · " + label(c.status.resource.String())
	}
	if c.status.Card != "" {
		d += fmt.Sprintf("\n\nCard: %s\n\nRouted to %s, expires %s, args hash `%s`", c.status.Card, c.status.ApproverRole, c.status.ExpiresAt, c.status.ArgsHash)
	}
	return d
}

// resourceLabel is a resource as the Resource search attribute holds it:
// "kind/id", e.g. "portal/PRT-40122".
func resourceLabel(r policy.ResourceRef) string { return label(r.Kind + "/" + r.ID) }
