package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
)

// PreviewInput asks for a tool's dry run, run as the user.
type PreviewInput struct {
	Tool     string             `json:"tool"`
	Args     json.RawMessage    `json:"args"`
	Resource policy.ResourceRef `json:"resource,omitzero"`
	policy.EarlierResource
	UserID        string `json:"userId"`
	CredentialRef string `json:"credentialRef"`
	// Role, Resources and RequiredTier are as in CallInput.
	Role      policy.Role      `json:"role,omitempty"`
	Resources policy.Resources `json:"resources,omitempty"`
	policy.EarlierResources
	RequiredTier string `json:"requiredTier,omitempty"`
	// RequiredMaxAgeSeconds and AskedAt are as in CallInput.
	RequiredMaxAgeSeconds int64  `json:"requiredMaxAgeSeconds,omitempty"`
	AskedAt               string `json:"askedAt,omitempty"`
	// Verified and ConversationID are as in CallInput: a dry run reads the
	// pack's system as the caller, so it needs their tier too.
	Verified       *policy.VerifiedNeed `json:"verified,omitempty"`
	ConversationID string               `json:"conversationId,omitempty"`
}

// PreviewResult is what the dry run decided: the exact args that will run
// if approved, their value, and the card built only from the preview.
type PreviewResult struct {
	Action     json.RawMessage `json:"action"`
	ValueCents int64           `json:"valueCents"`
	Card       string          `json:"card"`
	// Shortfall says why nothing can be planned, though the call was valued.
	Shortfall string `json:"shortfall,omitempty"`
}

// acting is the person a dry run (or a check before a card) acts as, in a
// call's terms.
func (in PreviewInput) acting() CallInput {
	return CallInput{Tool: in.Tool, UserID: in.UserID, CredentialRef: in.CredentialRef, Role: in.Role, Resources: in.EarlierResources.Or(in.Resources), RequiredTier: in.RequiredTier,
		RequiredMaxAgeSeconds: in.RequiredMaxAgeSeconds, AskedAt: in.AskedAt, Verified: in.Verified, ConversationID: in.ConversationID}
}

// Preview runs a tool's read-only dry run (its pack's Previewer) as the
// signed-in person.
func (a *Activities) Preview(ctx context.Context, in PreviewInput) (PreviewResult, error) {
	preview := a.Previewers[in.Tool]
	if spec, _ := a.Policy.Spec(in.Tool); preview == nil && (spec.MCP == nil || spec.MCP.Preview == nil) {
		return PreviewResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s has no dry run", in.Tool), ErrBadInput, nil)
	}
	as := in.acting()
	token, err := a.exchange(ctx, as)
	if err != nil {
		return PreviewResult{}, err
	}
	if err := a.checkVerified(ctx, as); err != nil {
		return PreviewResult{}, err
	}
	if spec, _ := a.Policy.Spec(in.Tool); spec.MCP != nil && spec.MCP.Preview != nil {
		return a.previewMCP(ctx, in, spec, token)
	}
	p, err := preview(ctx, pack.PreviewRequest{Tool: in.Tool, Args: in.Args, Resource: in.EarlierResource.Or(in.Resource)}, system{a: a, base: a.upstream(in.Tool), token: token})
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return PreviewResult{Action: p.Action, ValueCents: p.ValueCents, Card: p.Card, Shortfall: p.Shortfall}, nil
	case errors.As(err, &app):
		return PreviewResult{}, err // the system's own refusal or outage, from Get
	case errors.Is(err, pack.ErrUnavailable):
		return PreviewResult{}, temporal.NewApplicationError(sanitize.Text(err.Error()), ErrUnavailable)
	}
	return PreviewResult{}, temporal.NewNonRetryableApplicationError(sanitize.Text(err.Error()), ErrBadInput, nil)
}

// system is a pack's upstream as one person: the token stays in here.
type system struct {
	a     *Activities
	base  string
	token string
}

// Get reads path as the person.
func (s system) Get(ctx context.Context, path string) ([]byte, error) {
	return s.a.do(ctx, s.base, http.MethodGet, path, s.token, "", nil)
}
