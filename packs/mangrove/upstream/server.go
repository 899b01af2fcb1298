// Package upstream is the Mangrove demo service that stands in for the
// store operations APIs toolgate calls. It issues short-lived tokens for
// client credentials, verifies them on every call, applies store scope
// itself and honours Idempotency-Key on writes with a unique constraint.
package upstream

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/packs/mangrove/upstream/api"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// TokenTTL is how long an access token lives.
const TokenTTL = 5 * time.Minute

// PageSize is the default and MaxPageSize the largest page of a list.
const (
	PageSize    = 10
	MaxPageSize = 50
)

// Scopes granted by role.
var roleScopes = map[string][]string{
	"store_manager": {"procedures:read", "stock:read", "deliveries:read", "grn:read", "tasks:write", "transfers:write"},
	"area_manager":  {"procedures:read", "stock:read", "deliveries:read", "grn:read", "tasks:write", "transfers:write"},
}

// Server serves the Mangrove demo API.
type Server struct {
	Pool   *pgxpool.Pool
	Key    []byte
	Logger *zap.Logger
	// Now is the clock for token issue and expiry; time.Now when nil.
	Now func() time.Time
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", s.issueToken)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Pool.Ping(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "database unreachable")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /v1/procedures", s.auth("procedures:read", s.searchProcedures))
	mux.Handle("GET /v1/stores/{store}/stock/{article}", s.auth("stock:read", s.storeScoped(s.getStock)))
	mux.Handle("GET /v1/stores/{store}/deliveries", s.auth("deliveries:read", s.storeScoped(s.getDeliveries)))
	mux.Handle("GET /v1/stores/{store}/grns/{grn}", s.auth("grn:read", s.storeScoped(s.getGRN)))
	mux.Handle("POST /v1/stores/{store}/tasks", s.auth("tasks:write", s.storeScoped(s.createTask)))
	mux.Handle("GET /v1/stores/{store}/transfer-preview", s.auth("stock:read", s.storeScoped(s.previewTransfer)))
	mux.Handle("POST /v1/stores/{store}/transfers", s.auth("transfers:write", s.storeScoped(s.createTransfer)))
	return mux
}

// TokenRequest exchanges client credentials for an access token.
type TokenRequest struct {
	UserID       string `json:"userId"`
	ClientSecret string `json:"clientSecret"`
}

// TokenResponse carries the access token.
type TokenResponse struct {
	AccessToken string `json:"accessToken"`
	ExpiresIn   int    `json:"expiresIn"`
}

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body must be {\"userId\", \"clientSecret\"}")
		return
	}
	var role, hash string
	err := s.Pool.QueryRow(r.Context(), `SELECT role, client_secret_sha256 FROM mangrove.users WHERE user_id = $1`, req.UserID).Scan(&role, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		// An outage is not a wrong secret: say unavailable, so the caller retries.
		s.fail(w, r, err)
		return
	}
	sum := sha256.Sum256([]byte(req.ClientSecret))
	if err != nil || subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(hash)) != 1 {
		writeError(w, http.StatusUnauthorized, "invalid_client", "unknown user or wrong secret")
		return
	}
	rows, err := s.Pool.Query(r.Context(), `SELECT store_id FROM mangrove.user_stores WHERE user_id = $1 ORDER BY store_id`, req.UserID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stores, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tok, err := Sign(s.Key, Claims{Subject: req.UserID, Role: role, Stores: stores, Scopes: roleScopes[role], Expires: s.now().Add(TokenTTL).Unix()})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TokenResponse{AccessToken: tok, ExpiresIn: int(TokenTTL.Seconds())})
}

type claimsKey struct{}

func claimsOf(r *http.Request) Claims { return r.Context().Value(claimsKey{}).(Claims) }

func (s *Server) auth(scope string, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "a bearer token is required")
			return
		}
		c, err := Verify(s.Key, raw, s.now())
		if err != nil {
			writeError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
			return
		}
		if !c.HasScope(scope) {
			writeError(w, http.StatusForbidden, "scope", "the token lacks scope "+scope)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	})
}

// storeScoped refuses any store the token does not cover, whatever the caller checked.
func (s *Server) storeScoped(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("store"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "store must be a number")
			return
		}
		if !claimsOf(r).CoversStore(id) {
			writeError(w, http.StatusForbidden, "store_scope", fmt.Sprintf("store %d is not one of your stores", id))
			return
		}
		next(w, r)
	}
}

// Page is a list answer. NextCursor is the offset to ask for next.
type Page[T any] struct {
	Items      []T    `json:"items"`
	Offset     int    `json:"offset"`
	Total      int    `json:"total"`
	NextCursor string `json:"nextCursor,omitempty"`
}

func pageArgs(r *http.Request) (offset, limit int, err error) {
	limit = PageSize
	if v := r.URL.Query().Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, fmt.Errorf("offset must be a whole number ≥ 0")
		}
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPageSize {
			return 0, 0, fmt.Errorf("limit must be 1..%d", MaxPageSize)
		}
	}
	return offset, limit, nil
}

func finishPage[T any](items []T, offset, total int) Page[T] {
	p := Page[T]{Items: items, Offset: offset, Total: total}
	if p.Items == nil {
		p.Items = []T{}
	}
	if offset+len(items) < total {
		p.NextCursor = strconv.Itoa(offset + len(items))
	}
	return p
}

// Procedure is one search hit.
type Procedure struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

func (s *Server) searchProcedures(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	offset, limit, err := pageArgs(r)
	if err != nil || q == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "q is required; "+errText(err))
		return
	}
	words := strings.Fields(strings.ToLower(q))
	rows, err := s.Pool.Query(r.Context(), `
		SELECT procedure_id, title, body, count(*) OVER ()
		FROM mangrove.procedures
		WHERE (SELECT bool_or(lower(title || ' ' || body) LIKE '%' || w || '%') FROM unnest($1::text[]) AS w)
		ORDER BY procedure_id OFFSET $2 LIMIT $3`, words, offset, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var total int
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Procedure, error) {
		var p Procedure
		return p, row.Scan(&p.ID, &p.Title, &p.Text, &total)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(items) == 0 && offset > 0 {
		total = offset
	}
	writeJSON(w, http.StatusOK, finishPage(items, offset, total))
}

// Stock is one article's stock in one store.
type Stock struct {
	ArticleID int64  `json:"articleId"`
	Article   string `json:"article"`
	StoreID   int64  `json:"storeId"`
	Cases     int    `json:"cases"`
	Summary   string `json:"summary"`
}

func (s *Server) getStock(w http.ResponseWriter, r *http.Request) {
	store, _ := strconv.ParseInt(r.PathValue("store"), 10, 64)
	article, err := strconv.ParseInt(r.PathValue("article"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "article must be a number")
		return
	}
	st := Stock{ArticleID: article, StoreID: store}
	err = s.Pool.QueryRow(r.Context(), `
		SELECT a.name, coalesce(s.cases, 0) FROM mangrove.articles a
		LEFT JOIN mangrove.stock s ON s.article_id = a.article_id AND s.store_id = $1
		WHERE a.article_id = $2`, store, article).Scan(&st.Article, &st.Cases)
	if errors.Is(err, pgx.ErrNoRows) {
		s.unknownArticle(w, r, article)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st.Summary = fmt.Sprintf("Store %d has %d cases of %s.", store, st.Cases, st.Article)
	writeJSON(w, http.StatusOK, st)
}

// Delivery is one delivery to a store, in words the model can quote.
type Delivery struct {
	DeliveryID string `json:"deliveryId"`
	Supplier   string `json:"supplier"`
	Expected   string `json:"expected"`
	Status     string `json:"status"`
	Contents   string `json:"contents"`
	GRNID      string `json:"grnId,omitempty"`
	Summary    string `json:"summary"`
}

// Delivery days and statuses the API answers for.
var (
	deliveryDays     = map[string]int{"yesterday": -1, "today": 0, "tomorrow": 1}
	deliveryStatuses = []string{"expected", "on_the_way", "arrived", "received", "delayed"}
)

func (s *Server) getDeliveries(w http.ResponseWriter, r *http.Request) {
	store, _ := strconv.ParseInt(r.PathValue("store"), 10, 64)
	offset, limit, err := pageArgs(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	q := r.URL.Query()
	day := q.Get("day")
	if day == "" {
		day = "today"
	}
	offsetDays, ok := deliveryDays[day]
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_request", "day must be yesterday, today or tomorrow")
		return
	}
	status := q.Get("status")
	if status != "" && !slices.Contains(deliveryStatuses, status) {
		writeError(w, http.StatusBadRequest, "bad_request", "status must be one of "+strings.Join(deliveryStatuses, ", "))
		return
	}
	rows, err := s.Pool.Query(r.Context(), `
		SELECT delivery_id, supplier, to_char(expected, 'HH24:MI'), status, summary, coalesce(grn_id, ''), count(*) OVER ()
		FROM mangrove.deliveries
		WHERE store_id = $1 AND day_offset = $2 AND ($3 = '' OR status = $3)
		ORDER BY expected, delivery_id OFFSET $4 LIMIT $5`, store, offsetDays, status, offset, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var total int
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := row.Scan(&d.DeliveryID, &d.Supplier, &d.Expected, &d.Status, &d.Contents, &d.GRNID, &total)
		d.Summary = deliverySummary(d, day)
		return d, err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, finishPage(items, offset, total))
}

// deliverySummary says where a delivery is, as a person would.
func deliverySummary(d Delivery, day string) string {
	switch d.Status {
	case "received":
		return fmt.Sprintf("%s: received %s at %s (%s).", d.Supplier, day, d.Expected, d.GRNID)
	case "arrived":
		return fmt.Sprintf("%s: arrived %s at %s, waiting to be counted.", d.Supplier, day, d.Expected)
	case "on_the_way":
		return fmt.Sprintf("%s: on the way, expected %s at %s.", d.Supplier, day, d.Expected)
	case "delayed":
		return fmt.Sprintf("%s: delayed, now expected %s at %s.", d.Supplier, day, d.Expected)
	}
	return fmt.Sprintf("%s: expected %s at %s.", d.Supplier, day, d.Expected)
}

// GRN is a goods received note.
type GRN struct {
	GRNID      string          `json:"grnId"`
	StoreID    int64           `json:"storeId"`
	DeliveryID string          `json:"deliveryId"`
	Received   string          `json:"received"`
	Lines      json.RawMessage `json:"lines"`
}

func (s *Server) getGRN(w http.ResponseWriter, r *http.Request) {
	store, _ := strconv.ParseInt(r.PathValue("store"), 10, 64)
	g := GRN{GRNID: r.PathValue("grn")}
	err := s.Pool.QueryRow(r.Context(), `
		SELECT store_id, delivery_id, to_char(current_date + day_offset, 'YYYY-MM-DD'), lines
		FROM mangrove.grns WHERE grn_number = $1`, g.GRNID).Scan(&g.StoreID, &g.DeliveryID, &g.Received, &g.Lines)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && g.StoreID != store) {
		// Another store's note is reported as missing, not as someone else's.
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("store %d has no goods received note %s; get_deliveries gives the GRN id of each received delivery", store, g.GRNID))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// TaskRequest is api.TaskRequest, the wire type clients read.
type TaskRequest = api.TaskRequest

// Task is api.Task, the wire type clients read.
type Task = api.Task

// taskTitles writes a task's title from its kind; %s is the article.
var taskTitles = map[string][2]string{
	"recount":       {"Recount %s", "Recount the stock"},
	"shelf_check":   {"Check the shelf of %s", "Check the shelves"},
	"expiry_check":  {"Check the expiry dates of %s", "Check expiry dates"},
	"call_supplier": {"Call the supplier of %s", "Call the supplier"},
	"pricing_desk":  {"Ask the pricing desk about %s", "Ask the pricing desk"},
}

var taskDue = map[string]string{"today": "current_date", "tomorrow": "current_date + 1", "this_week": "date_trunc('week', current_date)::date + 6"}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	var req TaskRequest
	store, key, err := writeRequest(w, r, 4096, &req)
	if key == "" {
		return
	}
	titles, okKind := taskTitles[req.Kind]
	due, okDue := taskDue[req.DueBy]
	if err != nil || !okKind || !okDue || len([]rune(req.Note)) > 200 {
		writeError(w, http.StatusBadRequest, "bad_request", "body must be {kind, articleId, dueBy, note}: kind recount, shelf_check, expiry_check, call_supplier or pricing_desk; dueBy today, tomorrow or this_week; note at most 200 characters")
		return
	}
	title := titles[1]
	var article *int64
	if req.ArticleID != 0 {
		var name string
		err := s.Pool.QueryRow(r.Context(), `SELECT name FROM mangrove.articles WHERE article_id = $1`, req.ArticleID).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			s.unknownArticle(w, r, req.ArticleID)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		title, article = fmt.Sprintf(titles[0], name), &req.ArticleID
	}
	c := claimsOf(r)
	var id int64
	err = s.Pool.QueryRow(r.Context(), `
		INSERT INTO mangrove.tasks (store_id, title, details, priority, due_date, created_by, idempotency_key, kind, article_id, due_by, note)
		VALUES ($1, $2, '', 'normal', `+due+`, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING task_id`,
		store, title, c.Subject, key, req.Kind, article, req.DueBy, req.Note).Scan(&id)
	replayed := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !replayed {
		s.fail(w, r, err)
		return
	}
	t := Task{Replayed: replayed}
	var articleOut *int64
	err = s.Pool.QueryRow(r.Context(), `
		SELECT task_id, store_id, coalesce(kind, ''), article_id, title, coalesce(due_by, '') FROM mangrove.tasks WHERE idempotency_key = $1`, key).
		Scan(&id, &t.StoreID, &t.Kind, &articleOut, &t.Title, &t.DueBy)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if t.StoreID != store {
		writeError(w, http.StatusConflict, "idempotency_key", "this Idempotency-Key was already used for another store")
		return
	}
	if articleOut != nil {
		t.ArticleID = *articleOut
	}
	t.TaskNumber = fmt.Sprintf("T-%06d", id)
	t.Summary = fmt.Sprintf("Task %s \"%s\" is on the board of store %d, due %s.", t.TaskNumber, t.Title, t.StoreID, strings.ReplaceAll(t.DueBy, "_", " "))
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
	}
	writeJSON(w, status, t)
}

// writeRequest reads what every write starts with: the store of the path,
// the Idempotency-Key (answering 400 and returning "" when it is missing)
// and a strict JSON body of at most limit bytes into body.
func writeRequest(w http.ResponseWriter, r *http.Request, limit int64, body any) (int64, string, error) {
	store, _ := strconv.ParseInt(r.PathValue("store"), 10, 64)
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		writeError(w, http.StatusBadRequest, "idempotency_key", "writes need an Idempotency-Key header (1-255 characters)")
		return store, "", nil
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	return store, key, dec.Decode(body)
}

// Error is api.Error, the wire type clients read.
type Error = api.Error

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, Error{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.Logger.Error("upstream request failed", zap.String("path", r.URL.Path), zap.Error(err))
	writeError(w, http.StatusServiceUnavailable, "unavailable", "the store system is temporarily unavailable; retry shortly")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
