package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/domains/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/upstream/api"
	"go.temporal.io/sdk/temporal"
)

// PreviewInput asks for a tool's dry run, run as the user.
type PreviewInput struct {
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args"`
	StoreID       int64           `json:"storeId"`
	UserID        string          `json:"userId"`
	CredentialRef string          `json:"credentialRef"`
	// Role, StoreIDs and RequiredTier are as in CallInput.
	Role         policy.Role `json:"role,omitempty"`
	StoreIDs     []int64     `json:"storeIds,omitempty"`
	RequiredTier string      `json:"requiredTier,omitempty"`
	// RequiredMaxAgeSeconds and AskedAt are as in CallInput.
	RequiredMaxAgeSeconds int64  `json:"requiredMaxAgeSeconds,omitempty"`
	AskedAt               string `json:"askedAt,omitempty"`
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

// Preview runs a tool's read-only dry run as the signed-in person.
func (a *Activities) Preview(ctx context.Context, in PreviewInput) (PreviewResult, error) {
	if in.Tool != mangrove.ToolRequestStockTransfer {
		return PreviewResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s has no dry run", in.Tool), ErrBadInput, nil)
	}
	var args mangrove.RequestStockTransferArgs
	if err := json.Unmarshal(in.Args, &args); err != nil {
		return PreviewResult{}, badArgs(err)
	}
	token, err := a.exchange(ctx, CallInput{UserID: in.UserID, CredentialRef: in.CredentialRef, Role: in.Role, StoreIDs: in.StoreIDs, RequiredTier: in.RequiredTier,
		RequiredMaxAgeSeconds: in.RequiredMaxAgeSeconds, AskedAt: in.AskedAt})
	if err != nil {
		return PreviewResult{}, err
	}
	q := url.Values{"articleId": {fmt.Sprint(args.ArticleID)}, "quantity": {fmt.Sprint(args.Quantity)}}
	body, err := a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/stores/%d/transfer-preview?%s", in.StoreID, q.Encode()), token, "", nil)
	if err != nil {
		return PreviewResult{}, err
	}
	var p api.TransferPreview
	if err := json.Unmarshal(body, &p); err != nil || p.ToStoreID != in.StoreID || int64(p.Quantity) != args.Quantity {
		return PreviewResult{}, temporal.NewApplicationError("the transfer preview did not match the request", ErrUnavailable)
	}
	if p.FromStoreID == 0 {
		return PreviewResult{ValueCents: p.ValueCents, Shortfall: p.Shortfall}, nil
	}
	action, _ := json.Marshal(mangrove.TransferAction{ArticleID: args.ArticleID, Quantity: args.Quantity, Reason: args.Reason, StoreID: in.StoreID, FromStoreID: p.FromStoreID})
	return PreviewResult{Action: action, ValueCents: p.ValueCents, Card: TransferCard(p)}, nil
}

// TransferCard is the sentence an approver decides on, from the preview alone.
func TransferCard(p api.TransferPreview) string {
	unit := p.Unit
	if p.Quantity != 1 {
		unit += "s"
	}
	return fmt.Sprintf("Move %d %s of %s (%s at cost) from store %d to store %d, arriving %s.",
		p.Quantity, unit, p.Article, policy.Dollars(p.ValueCents), p.FromStoreID, p.ToStoreID, strings.TrimSuffix(p.Arrival, "."))
}
