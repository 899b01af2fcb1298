package policy

import (
	"reflect"
	"time"
)

// Tier is a tool's risk tier. It sets a floor on the decision that a policy
// row can raise but never lower.
type Tier string

// The risk tiers of DESIGN.md.
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
}

// StoreScoped is implemented by args that name a store the session must own.
// A missing store defaults to the session's first store.
type StoreScoped interface {
	Store() *int64
	SetStore(int64)
}

// StoreArg is embedded in args that name a store. The JSON name is storeId.
type StoreArg struct {
	StoreID *int64 `json:"storeId,omitempty" validate:"omitempty,min=1,max=99999" desc:"Store number. Leave it out to use the signed-in person's own store."`
}

// Store returns the named store, or nil when the model left it out.
func (s *StoreArg) Store() *int64 { return s.StoreID }

// SetStore fills the store from the session.
func (s *StoreArg) SetStore(id int64) { s.StoreID = &id }

// SearchProceduresArgs are the arguments of search_procedures.
type SearchProceduresArgs struct {
	Query  string `json:"query" validate:"required,min=2,max=200" desc:"What to look for, in plain words, e.g. \"cold chain breach\"."`
	Cursor string `json:"cursor,omitempty" validate:"omitempty,numeric,max=6" desc:"The nextCursor of a previous answer, to read the next page."`
}

// GetStockArgs are the arguments of get_stock.
type GetStockArgs struct {
	ArticleID int64 `json:"articleId" validate:"required,min=1,max=99999999" desc:"Article number, e.g. 40211."`
	StoreArg
}

// GetDeliveriesArgs are the arguments of get_deliveries.
type GetDeliveriesArgs struct {
	StoreArg
	Date   string `json:"date,omitempty" validate:"omitempty,datetime=2006-01-02" desc:"Delivery day as YYYY-MM-DD. Leave it out for upcoming deliveries."`
	Cursor string `json:"cursor,omitempty" validate:"omitempty,numeric,max=6" desc:"The nextCursor of a previous answer, to read the next page."`
}

// GetGRNArgs are the arguments of get_grn.
type GetGRNArgs struct {
	GRNNumber string `json:"grnNumber" validate:"required,startswith=GRN-,max=20" desc:"Goods received note number as printed, e.g. GRN-88213."`
	StoreArg
}

// CreateTaskArgs are the arguments of create_task.
type CreateTaskArgs struct {
	Title    string `json:"title" validate:"required,min=3,max=120" desc:"Short imperative title a colleague can act on, e.g. \"Check cooler 3 temperature\"."`
	Details  string `json:"details,omitempty" validate:"max=1000" desc:"What to do and why, in a few sentences."`
	Priority string `json:"priority,omitempty" validate:"omitempty,oneof=low normal high" desc:"How urgent the task is; normal when left out."`
	DueDate  string `json:"dueDate,omitempty" validate:"omitempty,datetime=2006-01-02" desc:"Day the task is due, YYYY-MM-DD."`
	StoreArg
}

// RequestStockTransferArgs are what the model may say about a transfer into
// a store. The source store and the value are the system's, from the dry run.
type RequestStockTransferArgs struct {
	ArticleID int64  `json:"articleId" validate:"required,min=1,max=99999999" desc:"Article number to bring in, e.g. 40211."`
	Quantity  int64  `json:"quantity" validate:"required,min=1,max=10000" desc:"How many cases (or bags) to bring in."`
	Reason    string `json:"reason" validate:"required,oneof=stockout_risk promotion damaged_stock other" desc:"Why the store needs it."`
	StoreArg
}

// TransferAction is exactly what an approved transfer runs: the model's
// args after session fill plus the dry run's choice of source store.
type TransferAction struct {
	ArticleID   int64  `json:"articleId"`
	Quantity    int64  `json:"quantity"`
	Reason      string `json:"reason"`
	StoreID     int64  `json:"storeId"`
	FromStoreID int64  `json:"fromStoreId"`
}

// ChangePriceArgs are the arguments of change_price.
type ChangePriceArgs struct {
	ArticleID     int64 `json:"articleId" validate:"required,min=1,max=99999999" desc:"Article number."`
	NewPriceCents int64 `json:"newPriceCents" validate:"required,min=1,max=10000000" desc:"New shelf price in cents."`
	StoreArg
}

// Tools is the registry of the Mangrove store operations tools.
var Tools = []ToolSpec{
	{
		Name:    "search_procedures",
		Example: `{"query":"cold chain breach"}`,
		Description: "Search Mangrove's store operating procedures (food safety, cash handling, deliveries) and return matching titles with short excerpts. " +
			"Use it when someone asks how something is supposed to be done. Do not use it for live data such as stock or deliveries.",
		Args: reflect.TypeFor[SearchProceduresArgs](), Tier: TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    "get_stock",
		Example: `{"articleId":40211}`,
		Description: "Get the current stock of one article in one store, in cases and units. " +
			"Use it before suggesting a reorder or a transfer. Do not use it to search articles by name; ask for the article number.",
		Args: reflect.TypeFor[GetStockArgs](), Tier: TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    "get_deliveries",
		Example: `{"date":"2026-12-01"}`,
		Description: "List deliveries to a store, upcoming or on one day, with supplier, status and expected time. " +
			"Use it to answer \"when does X arrive\". Do not use it for what was actually received; use get_grn for that.",
		Args: reflect.TypeFor[GetDeliveriesArgs](), Tier: TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    "get_grn",
		Example: `{"grnNumber":"GRN-88213"}`,
		Description: "Get one goods received note (what a delivery actually brought in, line by line, with any shortages). " +
			"Use it to check a delivery that arrived. Do not use it for deliveries still on the way; use get_deliveries.",
		Args: reflect.TypeFor[GetGRNArgs](), Tier: TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    "create_task",
		Example: `{"title":"Check cooler 3 temperature","priority":"high"}`,
		Description: "Create a task on a store's task board for the staff to do. " +
			"Use it when someone asks to have something done in a store. Do not use it for stock moves or price changes.",
		Args: reflect.TypeFor[CreateTaskArgs](), Tier: TierWriteReversible, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second,
	},
	{
		Name:    "request_stock_transfer",
		Example: `{"articleId":40211,"quantity":40,"reason":"stockout_risk"}`,
		Description: "Ask for stock to be moved into a store from another store of the same area. The system picks the source store, values the move at cost, " +
			"and a manager approves it on a card before anything moves. Use it when a store will run out before its next delivery. " +
			"Do not use it to check stock (use get_stock) or to order from a supplier.",
		Args: reflect.TypeFor[RequestStockTransferArgs](), Tier: TierWrite, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second, DryRun: true,
	},
	{
		Name:        "change_price",
		Example:     `{"articleId":40211,"newPriceCents":899}`,
		Description: "Change the shelf price of an article in a store. Never offered to a model: prices are changed by pricing staff.",
		Args:        reflect.TypeFor[ChangePriceArgs](), Tier: TierIrreversible, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second,
	},
}
