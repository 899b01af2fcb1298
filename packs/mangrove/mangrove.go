// Package mangrove is the demo pack: Mangrove's store operations tools
// (../../../shared/background/designing-tools-and-permissions.txt), the
// policy rows that gate them, the evidence their approvals need and the
// roles they name. It registers through the same public API as any other
// pack (policy.Pack); the engine knows nothing of it.
package mangrove

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// Name is the pack's name in TOOLGATE_PACKS.
const Name = "mangrove"

// Policy is the Mangrove pack's policy. Its slices are its own copies, so a test
// may change one without changing the pack.
func Policy() policy.Pack {
	return policy.Pack{
		Name:   Name,
		System: "the store system",
		Roles: []policy.RoleSpec{
			{Name: RoleStoreManager, Label: "Store manager"},
			{Name: RoleAreaManager, Label: "Area manager"},
		},
		Tools:    slices.Clone(Tools),
		Rows:     slices.Clone(Table),
		Evidence: slices.Clone(Evidence),
		Formats:  []policy.Format{{Tag: "grnid", Pattern: GRNID, Rule: `must be a GRN id such as "GRN-88213", as get_deliveries returns it`}},
		// Values are US cents: the dry run values a transfer at cost.
		Unit: policy.Unit{Currency: "USD"},
		// A person's stores come in the provider's toolgate_stores claim.
		Resources: []policy.ResourceKind{{Name: KindStore, Plural: "stores", Claim: "toolgate_stores", Example: "112"}},
	}
}

// Roles of the Mangrove pack.
const (
	RoleStoreManager policy.Role = "store_manager"
	RoleAreaManager  policy.Role = "area_manager"
)

// GRNID is the shape of a goods received note id (validate tag grnid).
var GRNID = regexp.MustCompile(`^GRN-[0-9]{1,10}$`)

// Evidence is the table beside the policy table: for each approve row, the
// evidence an approval needs by the card's value, first match wins.
var Evidence = []policy.EvidenceRule{
	{Tool: ToolRequestStockTransfer, UpToCents: 50000, ACR: policy.ACRPassword, MaxAge: 8 * time.Hour},
	{Tool: ToolRequestStockTransfer, ACR: policy.ACRMFA, MaxAge: 5 * time.Minute},
}

// Table is the shipped policy table: one row per tool.
var managers = []policy.Role{RoleStoreManager, RoleAreaManager}

var Table = []policy.Row{
	{Tool: ToolSearchProcedures, Roles: managers, Decision: policy.DecisionAllow, Limits: []policy.Limit{{Scope: policy.PerUser, Window: policy.Hour, MaxCalls: 60}}},
	{Tool: ToolGetStock, Roles: managers, Decision: policy.DecisionAllow},
	{Tool: ToolGetDeliveries, Roles: managers, Decision: policy.DecisionAllow},
	{Tool: ToolGetGRN, Roles: managers, Decision: policy.DecisionAllow},
	{Tool: ToolCreateTask, Roles: managers, Decision: policy.DecisionAllow, Limits: []policy.Limit{{Scope: policy.PerResource, Window: policy.Day, MaxCalls: 30}}},
	{Tool: ToolRequestStockTransfer, Roles: managers, Decision: policy.DecisionApprove, HardLimitCents: 200000,
		Limits:    []policy.Limit{{Scope: policy.PerResource, Window: policy.Day, MaxCalls: 5, MaxCents: 200000}},
		Approvers: []policy.Approver{{Role: RoleStoreManager, UpToCents: 50000}, {Role: RoleAreaManager}},
		Quorum:    []policy.Quorum{{AboveCents: 150000, Approvals: 2}}, Editable: []string{"quantity"}},
	{Tool: ToolChangePrice, Roles: nil, Decision: policy.DecisionDeny},
}

// StoreArg is embedded in args that name a store. The JSON name is storeId;
// the tools that embed it name it as their resource (ByStore).
type StoreArg struct {
	StoreID *int64 `json:"storeId,omitempty" validate:"omitempty,min=1,max=99999" desc:"Store number. Leave it out to use the signed-in person's own store."`
}

// KindStore is the pack's one resource kind: a store, by its number.
const KindStore = "store"

// ByStore is the resource of every tool whose args embed StoreArg.
var ByStore = policy.ResourceArg{Arg: "storeId", Kind: KindStore}

// The read tools' arguments.
type (
	// SearchProceduresArgs are the arguments of search_procedures.
	SearchProceduresArgs struct {
		Query  string `json:"query" validate:"required,min=2,max=200" desc:"What to look for, in plain words, e.g. \"cold chain breach\"."`
		Cursor string `json:"cursor,omitempty" validate:"omitempty,numeric,max=6" desc:"The nextCursor of a previous answer, to read the next page."`
	}

	// GetStockArgs are the arguments of get_stock.
	GetStockArgs struct {
		StoreArg
		ArticleID int64 `json:"articleId" validate:"required,min=1,max=99999999" desc:"Article number, e.g. 40211. Never guess one: ask the person, or use one a tool returned."`
	}

	// GetDeliveriesArgs are the arguments of get_deliveries.
	GetDeliveriesArgs struct {
		StoreArg
		Day    string `json:"day,omitempty" validate:"omitempty,oneof=yesterday today tomorrow" default:"today" desc:"Which day's deliveries; today when left out."`
		Status string `json:"status,omitempty" validate:"omitempty,oneof=expected on_the_way arrived received delayed" desc:"Only deliveries in this state; all when left out."`
		Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=20" default:"10" desc:"Deliveries per page, 1 to 20; 10 when left out."`
		Cursor string `json:"cursor,omitempty" validate:"omitempty,numeric,max=6" desc:"The nextCursor of the previous page, to read the next one."`
	}

	// GetGRNArgs are the arguments of get_grn.
	GetGRNArgs struct {
		StoreArg
		GRNID string `json:"grnId" validate:"required,grnid" desc:"Goods received note id as get_deliveries returns it, e.g. GRN-88213."`
	}
)

// CreateTaskArgs are the arguments of create_task. The task's title is the
// system's, written from the kind and the article.
type CreateTaskArgs struct {
	StoreArg
	Kind      string `json:"kind" validate:"required,oneof=recount shelf_check expiry_check call_supplier pricing_desk" desc:"What the staff should do."`
	ArticleID int64  `json:"articleId,omitempty" validate:"omitempty,min=1,max=99999999" desc:"The article it is about, from get_stock results. Never guess an id."`
	DueBy     string `json:"dueBy" validate:"required,oneof=today tomorrow this_week" desc:"When it must be done."`
	Note      string `json:"note,omitempty" validate:"max=200" redact:"pii" desc:"One line for the staff, at most 200 characters. Phone numbers, e-mail addresses and secrets are removed."`
}

// RequestStockTransferArgs are what the model may say about a transfer into
// a store. The source store and the value are the system's, from the dry run.
type RequestStockTransferArgs struct {
	StoreArg
	ArticleID int64  `json:"articleId" validate:"required,min=1,max=99999999" desc:"Article number to bring in, from get_stock results, e.g. 40211."`
	Quantity  int64  `json:"quantity" validate:"required,min=1,max=500" desc:"How many cases (or bags) to bring in, 1 to 500."`
	Reason    string `json:"reason" validate:"required,oneof=stockout_risk festival_peak damaged_delivery" desc:"Why the store needs it."`
	// Justification is the assistant's own words, shown on the card apart
	// from the system-written line; it is not part of what runs.
	Justification string `json:"justification,omitempty" validate:"max=280" redact:"pii" desc:"Optional: in your own words, why you propose this, at most 280 characters. The approver sees it marked as the assistant's words. Phone numbers, e-mail addresses and secrets are removed."`
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

// Tool names, the wire names a model calls.
const (
	ToolSearchProcedures     = "search_procedures"
	ToolGetStock             = "get_stock"
	ToolGetDeliveries        = "get_deliveries"
	ToolGetGRN               = "get_grn"
	ToolCreateTask           = "create_task"
	ToolRequestStockTransfer = "request_stock_transfer"
	ToolChangePrice          = "change_price"
)

// Tools are the Mangrove store operations tools.
var Tools = []policy.ToolSpec{
	{
		Name:    ToolSearchProcedures,
		Route:   policy.Route{Method: "GET", Path: "/v1/procedures", Query: map[string]string{"q": "query", "offset": "cursor"}},
		Example: `{"query":"cold chain breach"}`,
		Description: "Search Mangrove's store operating procedures (food safety, cash handling, deliveries) and return matching titles with short excerpts. " +
			"Use it when someone asks how something is supposed to be done. Do not use it for live data such as stock or deliveries.",
		Args: reflect.TypeFor[SearchProceduresArgs](), Tier: policy.TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    ToolGetStock,
		Route:   policy.Route{Method: "GET", Path: "/v1/stores/{storeId}/stock/{articleId}"},
		Example: `{"articleId":40211}`,
		Description: "Cases of one article on hand in one store. Use it for \"how many X do I have\" and before proposing a task or a transfer. " +
			"Not for deliveries on the way (use get_deliveries). It takes an article number, never a name: an unknown number is answered with candidates to ask the person about.",
		Args: reflect.TypeFor[GetStockArgs](), Resource: ByStore, Tier: policy.TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    ToolGetDeliveries,
		Route:   policy.Route{Method: "GET", Path: "/v1/stores/{storeId}/deliveries", Query: map[string]string{"day": "day", "status": "status", "limit": "limit", "offset": "cursor"}},
		Example: `{"day":"today"}`,
		Description: "Status of supplier and DC deliveries to one store on one day: expected, on_the_way, arrived, received (with its GRN id) or delayed, " +
			"with the expected time and what it carries. Use it for \"where is my delivery\" or \"when does X arrive\". " +
			"Not for stock on the shelf (use get_stock) or for differences on a received delivery (use get_grn).",
		Args: reflect.TypeFor[GetDeliveriesArgs](), Resource: ByStore, Tier: policy.TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    ToolGetGRN,
		Route:   policy.Route{Method: "GET", Path: "/v1/stores/{storeId}/grns/{grnId}"},
		Example: `{"grnId":"GRN-88213"}`,
		Description: "One goods received note: what a delivery actually brought in, line by line, with any shortages. " +
			"Use it to check a received delivery; get_deliveries gives its GRN id. Not for deliveries still on the way (use get_deliveries).",
		Args: reflect.TypeFor[GetGRNArgs](), Resource: ByStore, Tier: policy.TierRead, Idempotent: true, RequiresCredential: true, Timeout: 10 * time.Second,
	},
	{
		Name:    ToolCreateTask,
		Route:   policy.Route{Method: "POST", Path: "/v1/stores/{storeId}/tasks", Body: []string{"kind", "articleId", "dueBy", "note"}, Keyed: true},
		Example: `{"kind":"recount","articleId":40211,"dueBy":"today"}`,
		Description: "Create a follow-up task for staff at one store, such as a recount or a shelf check; the system writes its title from the kind and the article. " +
			"Use it when the person wants someone to do something later, or when you believe a count is wrong: a person checks. " +
			"It does not change stock or prices, and it is not for moving stock (use request_stock_transfer).",
		Args: reflect.TypeFor[CreateTaskArgs](), Resource: ByStore, Tier: policy.TierWriteReversible, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second,
		Receipt: &policy.Receipt{Name: "task", Field: "taskNumber"},
	},
	{
		Name:    ToolRequestStockTransfer,
		Route:   policy.Route{Method: "POST", Path: "/v1/stores/{storeId}/transfers", Body: []string{"articleId", "quantity", "fromStoreId", "reason"}, Keyed: true},
		Example: `{"articleId":40211,"quantity":40,"reason":"stockout_risk"}`,
		Description: "Ask for stock to be moved into a store from a nearby store of the same area. The system picks the source store and values the move at cost, " +
			"and a manager always approves a card before anything moves. Use it only when stock will run out before the next delivery: check get_stock and get_deliveries first. " +
			"Not for ordering from a supplier.",
		Args: reflect.TypeFor[RequestStockTransferArgs](), Resource: ByStore, Tier: policy.TierWrite, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second, DryRun: true,
		// A store's stock is everyone's at the store: one card per transfer, whoever asks.
		Shared:  true,
		Receipt: &policy.Receipt{Name: "transfer", Field: "transferNumber"},
	},
	{
		Name:        ToolChangePrice,
		Example:     `{"articleId":40211,"newPriceCents":899}`,
		Description: "Change the shelf price of an article in a store. Never offered to a model: prices are changed by pricing staff.",
		Args:        reflect.TypeFor[ChangePriceArgs](), Resource: ByStore, Tier: policy.TierIrreversible, Idempotent: false, RequiresCredential: true, Timeout: 15 * time.Second,
	},
}

// Days a delivery or a task can be about: words, not dates, so the model
// never computes one.
const (
	DayYesterday = "yesterday"
	DayToday     = "today"
	DayTomorrow  = "tomorrow"
	DayThisWeek  = "this_week"
)

// Task kinds: the jobs a store's staff can be given.
const (
	TaskRecount      = "recount"
	TaskShelfCheck   = "shelf_check"
	TaskExpiryCheck  = "expiry_check"
	TaskCallSupplier = "call_supplier"
	TaskPricingDesk  = "pricing_desk"
)

// Transfer reasons: why a store needs stock moved in.
const (
	ReasonStockoutRisk    = "stockout_risk"
	ReasonFestivalPeak    = "festival_peak"
	ReasonDamagedDelivery = "damaged_delivery"
)

// MaxTransferQuantity is the most cases one transfer may move.
const MaxTransferQuantity = 500

// Stores are the resources a sign-in holds at these store numbers.
func Stores(ids ...int64) policy.Resources {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return policy.Resources{KindStore: out}
}

// ClaimMap is the pack's own claim for each resource kind, as a deployment
// with no TOOLGATE_RESOURCE_CLAIMS reads it.
func ClaimMap() policy.ClaimMap {
	m := policy.ClaimMap{}
	for _, k := range Policy().Resources {
		m[k.Name] = k.Claim
	}
	return m
}
