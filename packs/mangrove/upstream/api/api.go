// Package api is the Mangrove demo API's wire: the requests and answers a
// client sends and reads. toolgate's activities use it; the upstream server
// serves it. It imports nothing of toolgate.
package api

// Candidate is an article a person may have meant.
type Candidate struct {
	ArticleID int64  `json:"articleId"`
	Name      string `json:"name"`
}

// TaskRequest creates a task: what to do, about which article, by when.
type TaskRequest struct {
	Kind      string `json:"kind"`
	ArticleID int64  `json:"articleId,omitempty"`
	DueBy     string `json:"dueBy"`
	Note      string `json:"note,omitempty"`
}

// Task is a created task. Replayed is true when the Idempotency-Key had
// already created it.
type Task struct {
	TaskNumber string `json:"taskNumber"`
	StoreID    int64  `json:"storeId"`
	Kind       string `json:"kind"`
	ArticleID  int64  `json:"articleId,omitempty"`
	Title      string `json:"title"`
	DueBy      string `json:"dueBy"`
	Replayed   bool   `json:"replayed"`
	Summary    string `json:"summary"`
}

// Error is the body of every error answer. Candidates, when set, are the
// articles an unknown article id may stand for.
type Error struct {
	Code       string      `json:"code"`
	Message    string      `json:"message"`
	Candidates []Candidate `json:"candidates,omitempty"`
}

// TransferPreview is the read-only dry run of a stock transfer into a store:
// the source the system picks, the value at cost and the arrival.
type TransferPreview struct {
	ArticleID   int64   `json:"articleId"`
	Article     string  `json:"article"`
	Unit        string  `json:"unit"`
	Quantity    int     `json:"quantity"`
	FromStoreID int64   `json:"fromStoreId"`
	ToStoreID   int64   `json:"toStoreId"`
	DistanceKm  float64 `json:"distanceKm"`
	ValueCents  int64   `json:"valueCents"`
	Arrival     string  `json:"arrival"`
	ArrivalDate string  `json:"arrivalDate"`
	// Shortfall is set, and FromStoreID 0, when no store can supply it.
	Shortfall string `json:"shortfall,omitempty"`
}

// TransferRequest executes a previewed transfer.
type TransferRequest struct {
	ArticleID   int64  `json:"articleId"`
	Quantity    int    `json:"quantity"`
	FromStoreID int64  `json:"fromStoreId"`
	Reason      string `json:"reason"`
}
