package mcpgate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/idp"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/mcpgate"
	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
)

// rpcCall is one stateless 2026-07-28 request, as a client of the tasks
// extension sends it: the headers SEP-2243 asks for, and the request's own
// client capabilities in _meta.
type rpcCall struct {
	token, method, name string
	params              map[string]any
	tasks               bool // declares io.modelcontextprotocol/tasks
	elicitURL           bool // declares URL elicitation
	meta                map[string]any
	header              string // Mcp-Name when it differs from name
}

// rpcAnswer is a JSON-RPC response and its HTTP status.
type rpcAnswer struct {
	status int
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func (g *gate) rpc(t *testing.T, c rpcCall) rpcAnswer {
	t.Helper()
	params := map[string]any{}
	for k, v := range c.params {
		params[k] = v
	}
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{mcpgate.TasksExtension: map[string]any{}}
	}
	if c.elicitURL {
		caps["elicitation"] = map[string]any{"url": map[string]any{}}
	}
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": mcpgate.FirstSessionlessRevision, "io.modelcontextprotocol/clientCapabilities": caps}
	for k, v := range c.meta {
		meta[k] = v
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": c.method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, g.url+mcpgate.Path, bytes.NewReader(body))
	name := c.name
	if c.header != "" {
		name = c.header
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": mcpgate.FirstSessionlessRevision,
		"Mcp-Method": c.method, "Mcp-Name": name} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := testenv.Bearer(c.token).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw := new(bytes.Buffer)
	_, _ = raw.ReadFrom(resp.Body)
	data := raw.Bytes()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(line)
			}
		}
	}
	a := rpcAnswer{status: resp.StatusCode}
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("%s answered %d %q", c.method, resp.StatusCode, data)
	}
	return a
}

// until polls tasks/get until the task's status is want, up to 30 s.
func (g *gate) until(t *testing.T, token, taskID, want string) map[string]any {
	t.Helper()
	var last rpcAnswer
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		last = g.rpc(t, rpcCall{token: token, method: "tasks/get", name: taskID, params: map[string]any{"taskId": taskID}, tasks: true})
		if last.Result["status"] == want {
			return last.Result
		}
	}
	t.Fatalf("task never %s: %+v", want, last)
	return nil
}

// TestACallThatWaitsIsATask: a 2026-07-28 client that declares the tasks
// extension gets a task handle for ama's transfer card, not "pending";
// tasks/get reads it working, then completed with the executed call
// inlined once a store manager approves; tasks/cancel withdraws her next
// card, which ends cancelled with nothing run. The handle is hers alone:
// efua's, an altered one, an undeclared extension and a mismatched
// Mcp-Name are refused with the protocol's codes. A read that is final at
// once is answered as a plain result, and a client that declares nothing
// gets today's pending answer.
func TestACallThatWaitsIsATask(t *testing.T) {
	g := newGate(t, 0)
	ctx := context.Background()
	ama, efua := g.token(t, "ama", idp.ACRPassword), g.token(t, "efua", idp.ACRPassword)

	discover := g.rpc(t, rpcCall{token: ama, method: "server/discover"})
	if ext, _ := discover.Result["capabilities"].(map[string]any)["extensions"].(map[string]any); ext[mcpgate.TasksExtension] == nil {
		t.Fatalf("server/discover: %+v", discover)
	}
	transfer := func(quantity int) map[string]any {
		return map[string]any{"name": "request_stock_transfer", "arguments": map[string]any{"articleId": 40211, "quantity": quantity, "reason": "stockout_risk"}}
	}
	created := g.rpc(t, rpcCall{token: ama, method: "tools/call", name: "request_stock_transfer", params: transfer(40), tasks: true})
	taskID, _ := created.Result["taskId"].(string)
	if created.Result["resultType"] != "task" || created.Result["status"] != "working" || taskID == "" || created.Result["ttlMs"] != float64(mcpgate.TaskTTL.Milliseconds()) ||
		created.Result["pollIntervalMs"] != float64(mcpgate.TaskPollInterval.Milliseconds()) || created.Result["requestState"] != nil || created.Result["content"] != nil {
		t.Fatalf("ama's card as a task: %+v", created)
	}
	get := func(token, id string) rpcAnswer {
		return g.rpc(t, rpcCall{token: token, method: "tasks/get", name: id, params: map[string]any{"taskId": id}, tasks: true})
	}
	if now := get(ama, taskID); now.Result["resultType"] != "complete" || now.Result["status"] != "working" || now.Result["taskId"] != taskID ||
		!strings.Contains(now.Result["statusMessage"].(string), "pending_approval") {
		t.Fatalf("tasks/get at once: %+v", now)
	}
	altered := []byte(taskID)
	altered[len(altered)-3] ^= 1
	for name, try := range map[string]struct {
		call       rpcCall
		status     int
		code       int
		dataNeeded bool
	}{
		"efua reads ama's task":    {rpcCall{token: efua, method: "tasks/get", name: taskID, params: map[string]any{"taskId": taskID}, tasks: true}, 400, -32602, false},
		"efua cancels ama's task":  {rpcCall{token: efua, method: "tasks/cancel", name: taskID, params: map[string]any{"taskId": taskID}, tasks: true}, 400, -32602, false},
		"an altered task ID":       {rpcCall{token: ama, method: "tasks/get", name: string(altered), params: map[string]any{"taskId": string(altered)}, tasks: true}, 400, -32602, false},
		"the extension undeclared": {rpcCall{token: ama, method: "tasks/get", name: taskID, params: map[string]any{"taskId": taskID}}, 400, -32021, true},
		"another Mcp-Name":         {rpcCall{token: ama, method: "tasks/get", name: taskID, header: "x", params: map[string]any{"taskId": taskID}, tasks: true}, 400, -32020, false},
		"tasks/result is gone":     {rpcCall{token: ama, method: "tasks/result", name: taskID, params: map[string]any{"taskId": taskID}, tasks: true}, 404, -32601, false},
		"a tool outside the role":  {rpcCall{token: ama, method: "tools/call", name: "change_price", params: map[string]any{"name": "change_price", "arguments": map[string]any{}}, tasks: true}, 400, -32602, false},
		"tasks/list is gone":       {rpcCall{token: ama, method: "tasks/list", params: map[string]any{}, tasks: true}, 404, -32601, false},
	} {
		a := g.rpc(t, try.call)
		if a.status != try.status || a.Error == nil || a.Error.Code != try.code || (try.dataNeeded && a.Error.Data["requiredCapabilities"] == nil) {
			t.Errorf("%s: %d %+v, want %d %d", name, a.status, a.Error, try.status, try.code)
		}
	}
	if a := g.rpc(t, rpcCall{token: ama, method: "tasks/update", name: taskID, params: map[string]any{"taskId": taskID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}, tasks: true}); a.Error != nil || a.Result["resultType"] != "complete" || len(a.Result) != 1 {
		t.Fatalf("tasks/update: %+v", a)
	}

	var cardID string
	_ = g.s.Owner.QueryRow(ctx, `SELECT workflow_id FROM pending_action WHERE status = 'pending_approval' AND tool = 'request_stock_transfer'`).Scan(&cardID)
	if cardID == "" {
		t.Fatal("no card up")
	}
	if err := workflows.SendDecision(ctx, g.s.Client, cardID, signoff.Approval{Decision: signoff.Approve, Approver: policy.Identity{UserID: "ama",
		Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}, Evidence: testenv.Evidence("ama", time.Now())}, testenv.ApprovalSigner); err != nil {
		t.Fatal(err)
	}
	done := g.until(t, ama, taskID, "completed")
	res, _ := done["result"].(map[string]any)
	if st, _ := res["structuredContent"].(map[string]any); st["status"] != "executed" || st["callId"] != cardID || res["content"] == nil || res["isError"] == true ||
		res["_meta"] != nil || done["error"] != nil {
		t.Fatalf("the completed task: %+v", done)
	}
	var transfers int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE idempotency_key = $1`, cardID).Scan(&transfers)
	if transfers != 1 {
		t.Fatalf("%d transfers", transfers)
	}

	// Cancelled: her next card is withdrawn, nothing runs.
	created = g.rpc(t, rpcCall{token: ama, method: "tools/call", name: "request_stock_transfer", params: transfer(41), tasks: true})
	next, _ := created.Result["taskId"].(string)
	if next == "" || next == taskID {
		t.Fatalf("the second task: %+v", created)
	}
	cancel := rpcCall{token: ama, method: "tasks/cancel", name: next, params: map[string]any{"taskId": next}, tasks: true}
	if a := g.rpc(t, cancel); a.Error != nil || a.Result["resultType"] != "complete" || len(a.Result) != 1 {
		t.Fatalf("tasks/cancel: %+v", a)
	}
	if gone := g.until(t, ama, next, "cancelled"); gone["result"] != nil || !strings.Contains(gone["statusMessage"].(string), "ama withdrew this call") {
		t.Fatalf("the cancelled task: %+v", gone)
	}
	var withdrawn int
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM pending_action WHERE status = 'withdrawn' AND tool = 'request_stock_transfer'`).Scan(&withdrawn)
	_ = g.s.Owner.QueryRow(ctx, `SELECT count(*) FROM mangrove.transfers WHERE quantity = 41`).Scan(&transfers)
	if withdrawn != 1 || transfers != 0 {
		t.Fatalf("after the cancellation: %d withdrawn cards, %d transfers", withdrawn, transfers)
	}
	if a := g.rpc(t, cancel); a.Error != nil || a.Result["resultType"] != "complete" {
		t.Fatalf("tasks/cancel of a cancelled task: %+v", a)
	}

	// A task is its call's run: the key of a cancelled task asked again for
	// other arguments is refused at once, and the task still reads as it was.
	key := map[string]any{mcpgate.IdempotencyKeyMeta: "k43"}
	keyed := g.rpc(t, rpcCall{token: ama, method: "tools/call", name: "request_stock_transfer", params: transfer(43), tasks: true, meta: key})
	k43, _ := keyed.Result["taskId"].(string)
	if a := g.rpc(t, rpcCall{token: ama, method: "tasks/cancel", name: k43, params: map[string]any{"taskId": k43}, tasks: true}); k43 == "" || a.Error != nil {
		t.Fatalf("the keyed task: %+v %+v", keyed, a)
	}
	g.until(t, ama, k43, "cancelled")
	again := g.rpc(t, rpcCall{token: ama, method: "tools/call", name: "request_stock_transfer", params: transfer(44), tasks: true, meta: key})
	if st, _ := again.Result["structuredContent"].(map[string]any); again.Result["taskId"] != nil || st["code"] != "idempotency_conflict" {
		t.Fatalf("the same key for other arguments: %+v", again)
	}
	if now := get(ama, k43); now.Result["status"] != "cancelled" {
		t.Fatalf("the first task after its key was asked again: %+v", now)
	}

	// Final at once: a plain result. Undeclared: pending, as before.
	read := g.rpc(t, rpcCall{token: ama, method: "tools/call", name: "get_stock", params: map[string]any{"name": "get_stock", "arguments": map[string]any{"articleId": 40211}}, tasks: true})
	if read.Result["resultType"] != "complete" || read.Result["taskId"] != nil || read.Result["content"] == nil {
		t.Fatalf("a read as a task client: %+v", read)
	}
	slow := newGateWith(t, 0, mcpgate.DefaultClaims(testenv.Policy).User, testenv.StackOptions{UpstreamWrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * time.Second) // an upstream slower than the wait
			next.ServeHTTP(w, r)
		})
	}})
	slow.mcp.TaskWait = 500 * time.Millisecond
	ama = slow.token(t, "ama", idp.ACRPassword)
	read = slow.rpc(t, rpcCall{token: ama, method: "tools/call", name: "get_stock", params: map[string]any{"name": "get_stock", "arguments": map[string]any{"articleId": 40211}}, tasks: true})
	readID, _ := read.Result["taskId"].(string)
	if read.Result["resultType"] != "task" || readID == "" {
		t.Fatalf("a read that outlasts the wait: %+v", read)
	}
	if now := slow.rpc(t, rpcCall{token: ama, method: "tasks/get", name: readID, params: map[string]any{"taskId": readID}, tasks: true}); now.Error != nil {
		t.Fatalf("tasks/get at once after the handle: %+v", now)
	}
	if r, _ := slow.until(t, ama, readID, "completed")["result"].(map[string]any); r["structuredContent"].(map[string]any)["status"] != "executed" {
		t.Fatalf("the read's task: %+v", r)
	}
	plain := g.rpc(t, rpcCall{token: g.token(t, "ama", idp.ACRPassword), method: "tools/call", name: "request_stock_transfer", params: transfer(42)})
	if st, _ := plain.Result["structuredContent"].(map[string]any); plain.Result["taskId"] != nil || st["status"] != "pending_approval" {
		t.Fatalf("a client without the extension: %+v", plain)
	}
}
