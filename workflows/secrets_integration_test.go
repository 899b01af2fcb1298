package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// spy sits between the worker and the upstream: it records every bearer
// token the worker sent, and can fail the first API calls with a 503.
type spy struct {
	tokens   []string
	apiCalls atomic.Int32
	fail503  atomic.Int32
}

func (sp *spy) serve(t *testing.T, target string) string {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			sp.tokens = append(sp.tokens, tok)
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			sp.apiCalls.Add(1)
			if sp.fail503.Add(-1) >= 0 {
				http.Error(w, `{"code":"unavailable","message":"maintenance"}`, http.StatusServiceUnavailable)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTokenNeverLeavesTheActivity: the upstream token and the vault secret
// appear in no workflow history, log line, result or audit row.
func TestTokenNeverLeavesTheActivity(t *testing.T) {
	s := testenv.NewStack(t)
	sp := &spy{}
	s.Activities.UpstreamURL = sp.serve(t, s.Upstream.URL)
	calls := []workflows.ToolCallInput{
		{Tool: "get_stock", ToolCallID: "a", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("tok")},
		{Tool: "create_task", ToolCallID: "b", Args: task(112, "Recount milk"), Session: ama("tok")},
		{Tool: "get_grn", ToolCallID: "c", Args: json.RawMessage(`{"grnId":"GRN-88190"}`), Session: ama("tok")},
	}
	var results []string
	for _, in := range calls {
		b, _ := json.Marshal(s.Run(t, in))
		results = append(results, string(b))
	}
	if len(sp.tokens) < len(calls) {
		t.Fatalf("the spy saw %d tokens for %d calls", len(sp.tokens), len(calls))
	}
	secrets := append([]string{"demo-secret-ama", "Bearer "}, sp.tokens...)

	var haystacks []string
	for _, in := range calls {
		haystacks = append(haystacks, historyTexts(t, s, workflows.WorkflowID("tok", in.ToolCallID), true)...)
	}
	logs, rows := logAndAuditTexts(t, s, "true")
	haystacks = append(append(haystacks, logs...), rows...)
	haystacks = append(haystacks, results...)
	if len(haystacks) < 20 {
		t.Fatalf("only %d places searched", len(haystacks))
	}
	for _, h := range haystacks {
		for _, secret := range secrets {
			if strings.Contains(h, secret) {
				t.Fatalf("%.12s… found in %.300s", secret, h)
			}
		}
	}
}

// TestRetriesOnlyForIdempotentTools: a 503 is retried for a read and never
// for create_task, which fails upstream_unavailable, not retryable.
func TestRetriesOnlyForIdempotentTools(t *testing.T) {
	s := testenv.NewStack(t)
	sp := &spy{}
	s.Activities.UpstreamURL = sp.serve(t, s.Upstream.URL)

	sp.fail503.Store(1)
	res := s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "read", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("retry")})
	if res.Status != "executed" || sp.apiCalls.Load() != 2 {
		t.Fatalf("read: %s/%s after %d upstream calls, want executed after 2", res.Status, res.Code, sp.apiCalls.Load())
	}

	sp.apiCalls.Store(0)
	sp.fail503.Store(1)
	res = s.Run(t, workflows.ToolCallInput{Tool: "create_task", ToolCallID: "write", Args: task(112, "Mop aisle 4"), Session: ama("retry")})
	if res.Status != "failed" || res.Code != "upstream_unavailable" || res.Retryable || sp.apiCalls.Load() != 1 {
		t.Fatalf("write: %s/%s retryable=%v after %d upstream calls, want failed/upstream_unavailable, not retryable, 1 call", res.Status, res.Code, res.Retryable, sp.apiCalls.Load())
	}
	if n := countTasks(t, s, 112); n != 0 {
		t.Fatalf("%d tasks", n)
	}

	sp.fail503.Store(100)
	sp.apiCalls.Store(0)
	res = s.Run(t, workflows.ToolCallInput{Tool: "get_stock", ToolCallID: "down", Args: json.RawMessage(`{"articleId":40211}`), Session: ama("retry")})
	if res.Status != "failed" || res.Code != "upstream_unavailable" || !res.Retryable || sp.apiCalls.Load() != 4 {
		t.Fatalf("read while down: %s/%s retryable=%v after %d calls", res.Status, res.Code, res.Retryable, sp.apiCalls.Load())
	}
	var failed int
	_ = s.Owner.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE event = 'failed' AND reason = 'upstream_unavailable'`).Scan(&failed)
	if failed != 2 {
		t.Fatalf("%d failed rows in audit_log, want 2", failed)
	}
}

// TestLongResultIsCutOnARecordBoundary: a search answer too long for
// TOOL_MAX_RESULT_CHARS keeps whole records, says so, and its cursor
// continues exactly where the cut was.
func TestLongResultIsCutOnARecordBoundary(t *testing.T) {
	s := testenv.NewStack(t)
	res := s.Run(t, workflows.ToolCallInput{Tool: "search_procedures", ToolCallID: "long", Args: json.RawMessage(`{"query":"milk handling"}`), Session: ama("cut")})
	if res.Status != "executed" {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	if n := utf8.RuneCount(res.Result); n > 4000 {
		t.Fatalf("result has %d characters", n)
	}
	var page struct {
		Items []struct {
			ID   int    `json:"id"`
			Text string `json:"text"`
		} `json:"items"`
		NextCursor string `json:"nextCursor"`
		Note       string `json:"note"`
	}
	if err := json.Unmarshal(res.Result, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) == 0 || len(page.Items) >= 10 || !strings.Contains(page.Note, "Cut to fit 4000") {
		t.Fatalf("%d items, note %q", len(page.Items), page.Note)
	}
	for _, it := range page.Items {
		if strings.Contains(it.Text, "[cut") || !strings.HasSuffix(it.Text, "record the check. ") {
			t.Fatalf("record %d was cut inside: %.80q", it.ID, it.Text)
		}
	}
	if page.NextCursor != fmt.Sprint(len(page.Items)) {
		t.Fatalf("cursor %q after %d items", page.NextCursor, len(page.Items))
	}
	lastID := page.Items[len(page.Items)-1].ID
	next := s.Run(t, workflows.ToolCallInput{Tool: "search_procedures", ToolCallID: "long2",
		Args: json.RawMessage(fmt.Sprintf(`{"query":"milk handling","cursor":%q}`, page.NextCursor)), Session: ama("cut")})
	if err := json.Unmarshal(next.Result, &page); err != nil {
		t.Fatal(err)
	}
	if page.Items[0].ID != lastID+1 {
		t.Fatalf("the next page starts at %d, want %d", page.Items[0].ID, lastID+1)
	}
}

func upstreamToken(t *testing.T, base, user, secret string) string {
	t.Helper()
	resp, err := http.Post(base+"/oauth/token", "application/json", strings.NewReader(fmt.Sprintf(`{"userId":%q,"clientSecret":%q}`, user, secret)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"accessToken"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	return tr.AccessToken
}

func upstreamPost(t *testing.T, url, token, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// disguisedSecrets are secrets dressed to slip past pattern matching (the
// sanitizer's own table has more): each must be gone from every audit row,
// log line and result.
var disguisedSecrets = []struct{ text, leak string }{
	{"mail ａｍａ＠ｍａｎｇｒｏｖｅ．ｅｘａｍｐｌｅ", "ｍａｎｇｒｏｖｅ"},
	{"key sk-\u200dproj4f9a8b7c6d5e4f3a2b1c", "proj4f9a8b7c6d5e4f3a2b1c"},
	{"gh ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"},
	{"aws AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"},
	{"slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"},
	{"jwt eyJhbGci.eyJzdWIi.c2ln", "eyJzdWIi"},
	{"db postgres://admin:hunter2@db.example/prod", "hunter2"},
	{"phone ＋２３３ ２４ ５５５ ０１２３", "５５５ ０１２３"},
}

// TestDisguisedSecretsAreRedacted sends disguised secrets through the real
// stack both ways: in a task's details (the args the audit log keeps) and
// in an upstream answer (the result the model, the history and the audit
// log see). None survives in an audit row, a log line, a result or the
// history's results.
func TestDisguisedSecretsAreRedacted(t *testing.T) {
	s := testenv.NewStack(t)
	ctx := context.Background()
	var texts []string
	for _, d := range disguisedSecrets {
		texts = append(texts, d.text)
	}
	body := "Supplier portal access. " + strings.Join(texts, ". ")
	if _, err := s.Owner.Exec(ctx, `INSERT INTO mangrove.procedures VALUES (999, 'Supplier portal access', $1)`, body); err != nil {
		t.Fatal(err)
	}
	// Each secret in the note of its own task (a note is at most 200 characters).
	var calls []workflows.ToolCallInput
	for i, text := range texts {
		note, _ := json.Marshal(text)
		calls = append(calls, workflows.ToolCallInput{Tool: "create_task", ToolCallID: fmt.Sprint("args", i),
			Args: json.RawMessage(`{"kind":"call_supplier","dueBy":"today","note":` + string(note) + `}`), Session: ama("disguised")})
	}
	calls = append(calls, workflows.ToolCallInput{Tool: "search_procedures", ToolCallID: "result", Args: json.RawMessage(`{"query":"supplier portal"}`), Session: ama("disguised")})
	var haystacks []string
	for _, in := range calls {
		res := s.Run(t, in)
		if res.Status != workflows.StatusExecuted {
			t.Fatalf("%s: %s/%s %s", in.Tool, res.Status, res.Code, res.Message)
		}
		haystacks = append(haystacks, string(res.Result))
	}
	if last := haystacks[len(haystacks)-1]; !strings.Contains(last, "Supplier portal access") {
		t.Fatalf("the search did not find the seeded procedure: %s", last)
	}
	// The result as the history holds it (the call's activity result, decrypted).
	haystacks = append(haystacks, historyTexts(t, s, workflows.WorkflowID("disguised", "result"), false)...)
	logs, rows := logAndAuditTexts(t, s, "true")
	haystacks = append(append(haystacks, logs...), rows...)
	audited := len(rows)
	if audited < 2*len(disguisedSecrets) {
		t.Fatalf("only %d audit rows", audited)
	}
	for _, h := range haystacks {
		for _, d := range disguisedSecrets {
			if strings.Contains(h, d.leak) {
				t.Errorf("%q survived in %.300s", d.leak, h)
			}
		}
	}
	t.Logf("%d disguised secrets, %d places searched, none survived", len(disguisedSecrets), len(haystacks))
}
