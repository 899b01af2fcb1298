package mangrove

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/pack"
	"github.com/toolgate/toolgate/packs/mangrove/upstream/api"
	"github.com/toolgate/toolgate/policy"
)

// Pack is the Mangrove pack with its dry run: a transfer is previewed by the
// store system, which picks the source store and values the move at cost.
func Pack() pack.Pack {
	return pack.Pack{Policy: Policy(), Previewers: map[string]pack.Previewer{ToolRequestStockTransfer: previewTransfer}}
}

// previewTransfer asks the store system where the stock would come from and
// what it is worth; the action is the model's args plus that source.
func previewTransfer(ctx context.Context, req pack.PreviewRequest, sys pack.System) (pack.Preview, error) {
	var args RequestStockTransferArgs
	if err := json.Unmarshal(req.Args, &args); err != nil {
		return pack.Preview{}, fmt.Errorf("authorized args do not decode: %w", err)
	}
	if args.StoreID == nil {
		return pack.Preview{}, fmt.Errorf("authorized args name no store")
	}
	store := *args.StoreID
	q := url.Values{"articleId": {fmt.Sprint(args.ArticleID)}, "quantity": {fmt.Sprint(args.Quantity)}}
	body, err := sys.Get(ctx, fmt.Sprintf("/v1/stores/%d/transfer-preview?%s", store, q.Encode()))
	if err != nil {
		return pack.Preview{}, err
	}
	var p api.TransferPreview
	if err := json.Unmarshal(body, &p); err != nil || p.ToStoreID != store || int64(p.Quantity) != args.Quantity {
		return pack.Preview{}, pack.Unavailable("the transfer preview did not match the request")
	}
	if p.FromStoreID == 0 {
		return pack.Preview{ValueCents: p.ValueCents, Shortfall: p.Shortfall}, nil
	}
	action, _ := json.Marshal(TransferAction{ArticleID: args.ArticleID, Quantity: args.Quantity, Reason: args.Reason, StoreID: store, FromStoreID: p.FromStoreID})
	return pack.Preview{Action: action, ValueCents: p.ValueCents, CardText: TransferCard(p)}, nil
}

// TransferCard is the sentence an approver decides on, from the preview alone.
func TransferCard(p api.TransferPreview) string {
	unit := p.Unit
	if p.Quantity != 1 {
		unit += "s"
	}
	return fmt.Sprintf("Move %d %s of %s (%s at cost) from store %d to store %d, arriving %s.",
		p.Quantity, policy.CardValue(unit), policy.CardValue(p.Article), policy.Dollars(p.ValueCents), p.FromStoreID, p.ToStoreID, policy.CardValue(strings.TrimSuffix(p.Arrival, ".")))
}
