package upstream_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/packs/mangrove/upstream"
	"go.uber.org/zap"
)

func token(t *testing.T, base, user, secret string) (string, int) {
	t.Helper()
	body, _ := json.Marshal(upstream.TokenRequest{UserID: user, ClientSecret: secret})
	resp, err := http.Post(base+"/oauth/token", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr upstream.TokenResponse
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	return tr.AccessToken, resp.StatusCode
}

func call(t *testing.T, method, url, tok, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// TestUpstreamGuardsItself: the demo upstream verifies tokens, applies
// store scope and honours Idempotency-Key on its own, whatever toolgate checked.
func TestUpstreamGuardsItself(t *testing.T) {
	srv := testenv.Upstream(t, testenv.Database(t))
	if _, code := token(t, srv.URL, "ama", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", code)
	}
	tok, code := token(t, srv.URL, "ama", "demo-secret-ama")
	if code != http.StatusOK || !strings.HasPrefix(tok, upstream.TokenPrefix) {
		t.Fatalf("token: %d %q", code, tok)
	}
	if code, body := call(t, "GET", srv.URL+"/v1/stores/112/stock/40211", tok, "", ""); code != 200 || !strings.Contains(body, `"cases":6`) {
		t.Fatalf("own store: %d %s", code, body)
	}
	if code, body := call(t, "GET", srv.URL+"/v1/stores/118/stock/40211", tok, "", ""); code != http.StatusForbidden || !strings.Contains(body, "store_scope") {
		t.Fatalf("other store: %d %s", code, body)
	}
	if code, _ := call(t, "GET", srv.URL+"/v1/stores/112/stock/40211", "", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	forged := tok[:len(tok)-4] + "AAAA"
	if code, _ := call(t, "GET", srv.URL+"/v1/stores/112/stock/40211", forged, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("forged signature: %d", code)
	}
	expired, _ := upstream.Sign(testenv.UpstreamKey, upstream.Claims{Subject: "ama", Role: "store_manager", Stores: []int64{112},
		Scopes: []string{"stock:read"}, Expires: time.Now().Add(-time.Second).Unix()})
	if code, _ := call(t, "GET", srv.URL+"/v1/stores/112/stock/40211", expired, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("expired: %d", code)
	}
	noScope, _ := upstream.Sign(testenv.UpstreamKey, upstream.Claims{Subject: "ama", Stores: []int64{112}, Expires: time.Now().Add(time.Minute).Unix()})
	if code, _ := call(t, "GET", srv.URL+"/v1/stores/112/stock/40211", noScope, "", ""); code != http.StatusForbidden {
		t.Fatalf("missing scope: %d", code)
	}

	if code, _ := call(t, "POST", srv.URL+"/v1/stores/112/tasks", tok, "", `{"kind":"recount","dueBy":"today"}`); code != http.StatusBadRequest {
		t.Fatalf("write without Idempotency-Key: %d", code)
	}
	code1, first := call(t, "POST", srv.URL+"/v1/stores/112/tasks", tok, "toolcall-c1-k1", `{"kind":"recount","articleId":40211,"dueBy":"today"}`)
	code2, second := call(t, "POST", srv.URL+"/v1/stores/112/tasks", tok, "toolcall-c1-k1", `{"kind":"recount","articleId":40211,"dueBy":"today"}`)
	var a, b upstream.Task
	_ = json.Unmarshal([]byte(first), &a)
	_ = json.Unmarshal([]byte(second), &b)
	if code1 != 201 || code2 != 200 || a.TaskNumber == "" || a.TaskNumber != b.TaskNumber || a.Replayed || !b.Replayed {
		t.Fatalf("repeated key: %d %s / %d %s", code1, first, code2, second)
	}
	// The system writes the title from the kind and the article.
	if a.Title != "Recount UHT milk 1 L, case of 12" || a.Kind != "recount" || a.ArticleID != 40211 || a.DueBy != "today" {
		t.Fatalf("task: %+v", a)
	}
	// An article id nobody has gets candidates, not a bare "not found".
	for _, path := range []string{"/v1/stores/112/stock/4021", "/v1/stores/112/transfer-preview?articleId=40299&quantity=4"} {
		code, body := call(t, "GET", srv.URL+path, tok, "", "")
		var e upstream.Error
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusNotFound || e.Code != "unknown_article" || len(e.Candidates) < 2 || e.Candidates[0].ArticleID/100 != 402 ||
			!strings.Contains(e.Message, "UHT milk") {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	if code, body := call(t, "POST", srv.URL+"/v1/stores/112/tasks", tok, "toolcall-c1-k2", `{"kind":"recount","articleId":99,"dueBy":"today"}`); code != http.StatusNotFound ||
		!strings.Contains(body, "candidates") {
		t.Fatalf("a task about an unknown article: %d %s", code, body)
	}
}

// TestTokenEndpointDuringAnOutage: with its database gone the upstream says
// unavailable (retry), never "wrong secret" (found by the chaos run: that
// made toolgate ask the person to sign in again).
func TestTokenEndpointDuringAnOutage(t *testing.T) {
	pool := testenv.OwnerPool(t, testenv.Database(t))
	srv := httptest.NewServer((&upstream.Server{Pool: pool, Key: testenv.UpstreamKey, Logger: zap.NewNop()}).Handler())
	t.Cleanup(srv.Close)
	pool.Close()
	if _, code := token(t, srv.URL, "ama", "demo-secret-ama"); code != http.StatusServiceUnavailable {
		t.Fatalf("token endpoint without its database: %d, want 503", code)
	}
}
