package workflows

import (
	"fmt"

	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Search attributes every call keeps current, so ops can find calls in
// Temporal Web or with `temporal workflow list --query`.
var (
	ToolNameKey     = temporal.NewSearchAttributeKeyKeyword("ToolName")
	ToolStatusKey   = temporal.NewSearchAttributeKeyKeyword("ToolStatus")
	ToolCodeKey     = temporal.NewSearchAttributeKeyKeyword("ToolCode")
	RequestedByKey  = temporal.NewSearchAttributeKeyKeyword("RequestedBy")
	ApproverRoleKey = temporal.NewSearchAttributeKeyKeyword("ApproverRole")
	StoreIDKey      = temporal.NewSearchAttributeKeyInt64("StoreId")
	ValueCentsKey   = temporal.NewSearchAttributeKeyInt64("ValueCents")
)

// SearchAttributes names each attribute with its type, as a dev server's
// --search-attribute flag and `temporal operator search-attribute create` want them.
var SearchAttributes = []struct{ Name, Type string }{
	{"ToolName", "Keyword"}, {"ToolStatus", "Keyword"}, {"ToolCode", "Keyword"}, {"RequestedBy", "Keyword"},
	{"ApproverRole", "Keyword"}, {"StoreId", "Int"}, {"ValueCents", "Int"},
}

// StartAttributes are the search attributes a client sets when it starts a
// call, so it is findable before its first workflow task runs.
func StartAttributes(in ToolCallInput) temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		ToolNameKey.ValueSet(in.Tool), ToolStatusKey.ValueSet(StatusDeciding), RequestedByKey.ValueSet(in.Session.UserID),
	}
	if len(in.Session.StoreIDs) > 0 {
		updates = append(updates, StoreIDKey.ValueSet(in.Session.StoreIDs[0]))
	}
	return temporal.NewSearchAttributes(updates...)
}

// StaticSummary is the one line Temporal Web shows for a call.
func StaticSummary(in ToolCallInput) string {
	store := "no store"
	if len(in.Session.StoreIDs) > 0 {
		store = fmt.Sprintf("store %d", in.Session.StoreIDs[0])
	}
	return fmt.Sprintf("%s by %s (%s) for %s", in.Tool, in.Session.UserID, in.Session.Role, store)
}

// setStatus moves the call to a new status: the status query, the search
// attributes and the current details all follow.
func (c *call) setStatus(status string, code policy.Code) {
	c.status.Status = status
	if !c.visible {
		return
	}
	updates := []temporal.SearchAttributeUpdate{ToolNameKey.ValueSet(c.in.Tool), ToolStatusKey.ValueSet(status), RequestedByKey.ValueSet(c.in.Session.UserID)}
	if code != "" {
		updates = append(updates, ToolCodeKey.ValueSet(string(code)))
	}
	if c.status.storeID != 0 {
		updates = append(updates, StoreIDKey.ValueSet(c.status.storeID))
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
	d := fmt.Sprintf("**%s** · %s by %s (%s)", c.status.Status, c.in.Tool, c.in.Session.UserID, c.in.Session.Role)
	if code != "" && code != policy.CodeOK {
		d += fmt.Sprintf(" · code `%s`", code)
	}
	if c.status.storeID != 0 {
		d += fmt.Sprintf(" · store %d", c.status.storeID)
	}
	if c.status.Card != "" {
		d += fmt.Sprintf("\n\nCard: %s\n\nRouted to %s, expires %s, args hash `%s`", c.status.Card, c.status.ApproverRole, c.status.ExpiresAt, c.status.ArgsHash)
	}
	return d
}
