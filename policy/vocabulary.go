package policy

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
