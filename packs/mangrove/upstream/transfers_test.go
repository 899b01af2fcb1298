package upstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove/upstream"
)

// TestTransferPreviewAndExecute: the dry run of 40 cases of 40211 into 112
// picks store 118 at 2.4 km and values it at 38400 cents, changing nothing;
// executing it with one key from several clients moves the stock once.
func TestTransferPreviewAndExecute(t *testing.T) {
	url := testenv.Database(t)
	srv := testenv.Upstream(t, url)
	tok, _ := token(t, srv.URL, "ama", "demo-secret-ama")

	code, body := call(t, "GET", srv.URL+"/v1/stores/112/transfer-preview?articleId=40211&quantity=40", tok, "", "")
	var p upstream.TransferPreview
	_ = json.Unmarshal([]byte(body), &p)
	if code != 200 || p.FromStoreID != 118 || p.DistanceKm != 2.4 || p.ValueCents != 38400 || p.Article != "UHT milk 1 L, case of 12" || p.Arrival != "tomorrow by 10:00" {
		t.Fatalf("preview: %d %s", code, body)
	}
	if code, _ := call(t, "GET", srv.URL+"/v1/stores/118/transfer-preview?articleId=40211&quantity=40", tok, "", ""); code != http.StatusForbidden {
		t.Fatalf("preview into another store: %d", code)
	}
	code, body = call(t, "GET", srv.URL+"/v1/stores/112/transfer-preview?articleId=40211&quantity=5000", tok, "", "")
	if err := json.Unmarshal([]byte(body), &p); err != nil || code != 200 || p.FromStoreID != 0 || p.ValueCents != 4800000 || p.Shortfall == "" {
		t.Fatalf("no store holds 5000: %d %s", code, body)
	}

	req := `{"articleId":40211,"quantity":40,"fromStoreId":118,"reason":"stockout_risk"}`
	var wg sync.WaitGroup
	numbers := make([]string, 6)
	for i := range numbers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := call(t, "POST", srv.URL+"/v1/stores/112/transfers", tok, "toolcall-c1-call7", req)
			var tr upstream.Transfer
			_ = json.Unmarshal([]byte(body), &tr)
			if code != 201 && code != 200 {
				t.Errorf("execute: %d %s", code, body)
			}
			numbers[i] = tr.TransferNumber
		}()
	}
	wg.Wait()
	for _, n := range numbers {
		if n == "" || n != numbers[0] {
			t.Fatalf("transfer numbers %v, want one", numbers)
		}
	}
	owner := testenv.OwnerPool(t, url)
	var at112, at118, transfers int
	_ = owner.QueryRow(context.Background(), `SELECT
		(SELECT cases FROM mangrove.stock WHERE store_id = 112 AND article_id = 40211),
		(SELECT cases FROM mangrove.stock WHERE store_id = 118 AND article_id = 40211),
		(SELECT count(*) FROM mangrove.transfers)`).Scan(&at112, &at118, &transfers)
	if at112 != 46 || at118 != 160 || transfers != 1 {
		t.Fatalf("after: 112 has %d, 118 has %d, %d transfers; want 46, 160, 1", at112, at118, transfers)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stores/112/transfers", tok, "toolcall-c1-call7", `{"articleId":40211,"quantity":41,"fromStoreId":118,"reason":"x"}`); code != http.StatusConflict {
		t.Fatalf("same key, other transfer: %d", code)
	}
}
