package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
)

// PreviewInput asks for a tool's dry run, run as the user.
type PreviewInput struct {
	Acting
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

// Preview runs a tool's read-only dry run (its pack's Previewer) as the
// signed-in person.
func (a *Activities) Preview(ctx context.Context, in PreviewInput) (PreviewResult, error) {
	preview := a.Previewers[in.Tool]
	if spec, _ := a.Policy.Spec(in.Tool); preview == nil && (spec.MCP == nil || spec.MCP.Preview == nil) {
		return PreviewResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s has no dry run", in.Tool), ErrBadInput, nil)
	}
	as := in.Acting
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
		return PreviewResult{Action: p.Action, ValueCents: p.ValueCents, Card: p.CardText, Shortfall: p.Shortfall}, nil
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
