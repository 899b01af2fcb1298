package upstream

import (
	"context"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/packs/mangrove/upstream/api"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// TransferPreview is api.TransferPreview, the wire type clients read.
type TransferPreview = api.TransferPreview

// previewTransfer picks the nearest other store of the receiving store's
// area that holds enough stock, and prices the quantity at cost. It changes nothing.
func (s *Server) previewTransfer(w http.ResponseWriter, r *http.Request) {
	to, _ := strconv.ParseInt(r.PathValue("store"), 10, 64)
	article, err1 := strconv.ParseInt(r.URL.Query().Get("articleId"), 10, 64)
	qty, err2 := strconv.Atoi(r.URL.Query().Get("quantity"))
	if err1 != nil || err2 != nil || qty < 1 {
		writeError(w, http.StatusBadRequest, "bad_request", "articleId and quantity (≥ 1) are required")
		return
	}
	p := TransferPreview{ArticleID: article, Quantity: qty, ToStoreID: to}
	err := s.Pool.QueryRow(r.Context(), `SELECT name, unit, cost_cents * $2 FROM mangrove.articles WHERE article_id = $1`, article, qty).
		Scan(&p.Article, &p.Unit, &p.ValueCents)
	if errors.Is(err, pgx.ErrNoRows) {
		s.unknownArticle(w, r, article)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.Pool.QueryRow(r.Context(), `
		SELECT src.store_id, round(sqrt(power(src.x_km - dst.x_km, 2) + power(src.y_km - dst.y_km, 2))::numeric, 1)::float8,
		       to_char(current_date + 1, 'YYYY-MM-DD')
		FROM mangrove.stores dst
		JOIN mangrove.stores src ON src.area = dst.area AND src.store_id <> dst.store_id
		JOIN mangrove.stock st ON st.store_id = src.store_id AND st.article_id = $2 AND st.cases >= $3
		WHERE dst.store_id = $1
		ORDER BY power(src.x_km - dst.x_km, 2) + power(src.y_km - dst.y_km, 2), src.store_id
		LIMIT 1`, to, article, qty).Scan(&p.FromStoreID, &p.DistanceKm, &p.ArrivalDate)
	if errors.Is(err, pgx.ErrNoRows) {
		// Still valued, so limits can judge it; there is just nothing to move.
		p.Shortfall = fmt.Sprintf("no store in the area holds %d of %s", qty, p.Article)
		writeJSON(w, http.StatusOK, p)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Arrival = "tomorrow by 10:00"
	writeJSON(w, http.StatusOK, p)
}

// TransferRequest is api.TransferRequest, the wire type clients read.
type TransferRequest = api.TransferRequest

// Transfer is an executed transfer. Replayed is true when the
// Idempotency-Key had already executed it.
type Transfer struct {
	TransferNumber string `json:"transferNumber"`
	ArticleID      int64  `json:"articleId"`
	Quantity       int    `json:"quantity"`
	FromStoreID    int64  `json:"fromStoreId"`
	ToStoreID      int64  `json:"toStoreId"`
	ValueCents     int64  `json:"valueCents"`
	Replayed       bool   `json:"replayed"`
}

// createTransfer moves stock once per Idempotency-Key, in one transaction.
func (s *Server) createTransfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	to, key, err := writeRequest(w, r, 4096, &req)
	if key == "" {
		return
	}
	if err != nil || req.Quantity < 1 || req.FromStoreID == to {
		writeError(w, http.StatusBadRequest, "bad_request", "body must be {articleId, quantity ≥ 1, fromStoreId (another store), reason}")
		return
	}
	ctx := r.Context()
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Serialize by key so a concurrent repeat waits and then finds the first result.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('transfer:' || $1::text))`, key); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := loadTransfer(ctx, tx, key)
	if err == nil {
		if t.ToStoreID != to || t.ArticleID != req.ArticleID || t.Quantity != req.Quantity || t.FromStoreID != req.FromStoreID {
			writeError(w, http.StatusConflict, "idempotency_key", "this Idempotency-Key was already used for a different transfer")
			return
		}
		t.Replayed = true
		writeJSON(w, http.StatusOK, t)
		return
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		s.fail(w, r, err)
		return
	}
	var sameArea bool
	if err := tx.QueryRow(ctx, `SELECT a.area = b.area FROM mangrove.stores a, mangrove.stores b WHERE a.store_id = $1 AND b.store_id = $2`, req.FromStoreID, to).Scan(&sameArea); err != nil || !sameArea {
		writeError(w, http.StatusBadRequest, "bad_request", "the source store must be a store of the same area")
		return
	}
	tag, err := tx.Exec(ctx, `UPDATE mangrove.stock SET cases = cases - $3 WHERE store_id = $1 AND article_id = $2 AND cases >= $3`, req.FromStoreID, req.ArticleID, req.Quantity)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if tag.RowsAffected() != 1 {
		writeError(w, http.StatusConflict, "insufficient_stock", fmt.Sprintf("store %d no longer holds %d of article %d", req.FromStoreID, req.Quantity, req.ArticleID))
		return
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO mangrove.stock (store_id, article_id, cases) VALUES ($1, $2, $3)
		ON CONFLICT (store_id, article_id) DO UPDATE SET cases = mangrove.stock.cases + EXCLUDED.cases`, to, req.ArticleID, req.Quantity); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO mangrove.transfers (article_id, quantity, from_store_id, to_store_id, reason, value_cents, requested_by, idempotency_key)
		SELECT $1, $2::integer, $3, $4, $5, cost_cents * $2::integer, $6, $7 FROM mangrove.articles WHERE article_id = $1`,
		req.ArticleID, req.Quantity, req.FromStoreID, to, req.Reason, claimsOf(r).Subject, key); err != nil {
		s.fail(w, r, err)
		return
	}
	if t, err = loadTransfer(ctx, tx, key); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func loadTransfer(ctx context.Context, tx pgx.Tx, key string) (Transfer, error) {
	var t Transfer
	var id int64
	err := tx.QueryRow(ctx, `SELECT transfer_id, article_id, quantity, from_store_id, to_store_id, value_cents FROM mangrove.transfers WHERE idempotency_key = $1`, key).
		Scan(&id, &t.ArticleID, &t.Quantity, &t.FromStoreID, &t.ToStoreID, &t.ValueCents)
	t.TransferNumber = fmt.Sprintf("TR-%06d", id)
	return t, err
}
