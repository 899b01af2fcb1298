package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.uber.org/zap"
)

// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) as
// toolgate serves it to a 2026-07-28 client that declares it on a request:
// a tools/call that is not final within Server.TaskWait (a card that waits for a
// person, a sign-in, a slow upstream) answers with a task handle instead
// of "pending"; tasks/get reads the call from its workflow; tasks/cancel
// withdraws a card that still waits. The SDK (v1.8.0) has no tasks, so
// these requests are answered before it sees them.
const (
	// TasksExtension is the extension's identifier, in server/discover's
	// capabilities and in a request's client capabilities.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// DefaultTaskWait is how long a tools/call waits for its first outcome
	// before it answers with a task handle, unless Server.TaskWait says.
	DefaultTaskWait = 2 * time.Second
	// TaskTTL is how long a task is answered after it was created: the
	// Temporal namespace must keep closed calls at least this long.
	TaskTTL = 24 * time.Hour
	// TaskPollInterval is the polling interval a task suggests.
	TaskPollInterval = 2 * time.Second
	// taskPurpose is what a task handle is sealed for (codec.Seal).
	taskPurpose = "mcp task v1"
	// startWait bounds how long a call answered with a task handle goes on
	// waiting, in the background, for its first outcome.
	startWait = 5 * time.Minute
)

// The statuses of a task (SEP-2663).
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// JSON-RPC codes of the 2026-07-28 revision the SDK does not export as
// jsonrpc codes (SEP-2243, SEP-2575).
const (
	codeHeaderMismatch              = -32020
	codeMissingRequiredCapability   = -32021
	clientCapabilitiesMeta          = "io.modelcontextprotocol/clientCapabilities"
	protocolVersionMeta             = "io.modelcontextprotocol/protocolVersion"
	taskMethodGet, taskMethodCancel = "tasks/get", "tasks/cancel"
	taskMethodUpdate                = "tasks/update"
)

// taskHandle is what a task ID seals: the call and the person it is bound
// to, and when it was created. Another person's, or an altered one, is an
// unknown task.
type taskHandle struct {
	Issuer     string `json:"iss"`
	Subject    string `json:"sub"`
	WorkflowID string `json:"wf"`
	Created    int64  `json:"created"`
}

func sealTask(c *codec.Codec, h taskHandle) (string, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	return c.Seal(taskPurpose, b)
}

// openTask opens a task ID for the person id: unknown unless it was sealed
// here for them.
func openTask(c *codec.Codec, taskID string, id Identity) (taskHandle, bool) {
	var h taskHandle
	plain, err := c.Open(taskPurpose, taskID)
	if err != nil || json.Unmarshal(plain, &h) != nil || h.WorkflowID == "" || h.Issuer != id.Issuer || h.Subject != id.Subject {
		return taskHandle{}, false
	}
	return h, true
}

// rpcRequest is one JSON-RPC request on the wire, and the params of the
// methods answered here.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name           string                     `json:"name"`
		Arguments      json.RawMessage            `json:"arguments"`
		Meta           map[string]any             `json:"_meta"`
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
	} `json:"params"`
}

// declaresTasks says the request's own client capabilities name the tasks
// extension (a session's earlier declaration does not count: SEP-2663).
func (q *rpcRequest) declaresTasks() bool {
	caps, _ := q.Params.Meta[clientCapabilitiesMeta].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// offersTasks says this server can hand out task handles: it seals them
// with the codec.
func (s *Server) offersTasks() bool { return s.Codec != nil }

// tasks answers the task methods, and a tools/call for a toolgate tool from
// a client that declares the extension, for a 2026-07-28 request; every
// other request goes on to the SDK.
func (s *Server) tasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.offersTasks() || r.Method != http.MethodPost || r.Header.Get("MCP-Protocol-Version") < FirstSessionlessRevision {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			writeRPC(w, http.StatusRequestEntityTooLarge, nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the request body is too large"})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var q rpcRequest
		if json.Unmarshal(body, &q) != nil || len(q.ID) == 0 {
			next.ServeHTTP(w, r) // the SDK answers a malformed request or a notification
			return
		}
		id, ok := identityOf(auth.TokenInfoFromContext(r.Context()))
		switch {
		case !ok:
			next.ServeHTTP(w, r)
		case q.Method == taskMethodGet || q.Method == taskMethodUpdate || q.Method == taskMethodCancel:
			s.serveTask(w, r, &q, id)
		case q.Method == "tools/call" && q.declaresTasks() && q.Params.RequestState == "" && s.offered(id, q.Params.Name):
			s.callAsTask(w, r, &q, id)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// offered says tool is a toolgate tool the person's role is offered (the
// status and withdraw tools answer at once, through the SDK).
func (s *Server) offered(id Identity, tool string) bool {
	for _, d := range s.Policy.DefinitionsFor(id.Role) {
		if d.Name == tool {
			return true
		}
	}
	return false
}

// checkHeaders holds a request answered here to what the SDK holds the
// others to: a loopback server answers loopback hosts alone (DNS
// rebinding), the Mcp-Method and Mcp-Name headers match the body
// (SEP-2243; a task method's name is its task ID), and the protocol
// version header matches the request's _meta.
func checkHeaders(r *http.Request, q *rpcRequest, name string) (int, *jsonrpc.Error) {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback(local.String()) && !loopback(r.Host) {
		return http.StatusForbidden, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid Host header"}
	}
	mismatch := func(msg string) (int, *jsonrpc.Error) {
		return http.StatusBadRequest, &jsonrpc.Error{Code: codeHeaderMismatch, Message: msg}
	}
	switch {
	case r.Header.Get("Mcp-Method") != q.Method:
		return mismatch("the Mcp-Method header must be the request's method, " + q.Method)
	case r.Header.Get("Mcp-Name") != name:
		return mismatch("the Mcp-Name header must be the request's " + map[bool]string{true: "taskId", false: "name"}[q.Params.TaskID != "" || q.Method != "tools/call"])
	case q.Params.Meta[protocolVersionMeta] != r.Header.Get("MCP-Protocol-Version"):
		return mismatch("the MCP-Protocol-Version header must be the request's _meta " + protocolVersionMeta)
	}
	return 0, nil
}

func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// writeRPC writes one JSON-RPC response: a result, or an error with the
// HTTP status SEP-2575 gives it.
func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, result any, rpcErr *jsonrpc.Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		msg["error"] = rpcErr
	} else {
		msg["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(msg)
}

// complete is a result of the standard shape, as 2026-07-28 marks it.
func complete(res any) (map[string]any, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if _, set := m["resultType"]; !set {
		m["resultType"] = "complete"
	}
	return m, nil
}

// callAsTask starts (or attaches to) a call for a client that declares the
// tasks extension, and answers its outcome if it is final within
// TaskWait, the confirmation a card its requester may decide asks for,
// or else a task handle, once the call's workflow is durably there.
func (s *Server) callAsTask(w http.ResponseWriter, r *http.Request, q *rpcRequest, id Identity) {
	if status, err := checkHeaders(r, q, q.Params.Name); err != nil {
		writeRPC(w, status, q.ID, nil, err)
		return
	}
	req := &mcp.CallToolRequest{Session: &mcp.ServerSession{}, Params: &mcp.CallToolParamsRaw{Name: q.Params.Name, Arguments: q.Params.Arguments, Meta: q.Params.Meta},
		Extra: &mcp.RequestExtra{Header: r.Header, TokenInfo: auth.TokenInfoFromContext(r.Context())}}
	answer := func(res any) {
		m, err := complete(res)
		if err != nil {
			writeRPC(w, http.StatusOK, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be written"})
			return
		}
		writeRPC(w, http.StatusOK, q.ID, m, nil)
	}
	in, err := s.input(r.Context(), id, req, q.Params.Name)
	if err != nil {
		answer(failure(err.Error()))
		return
	}
	queue := s.TaskQueue
	if s.QueueFor != nil {
		queue = s.QueueFor(q.Params.Name)
	}
	type first struct {
		out workflows.Outcome
		run bool
		err error
	}
	started := make(chan first, 1)
	go func() {
		// The call goes on when the answer is a task handle: its first
		// outcome is awaited here, not by the client.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), startWait)
		defer cancel()
		out, run, err := workflows.Call(ctx, s.Temporal, s.Policy, queue, in, workflows.StartedBy(signoff.Person{Issuer: id.Issuer, Subject: id.Subject}))
		started <- first{out, run != nil, err}
	}()
	wf := workflows.WorkflowID(in.Session.ConversationID, in.ToolCallID)
	wait := s.TaskWait
	if wait <= 0 {
		wait = DefaultTaskWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var f *first
	select {
	case got := <-started:
		f = &got
	case <-timer.C:
	}
	// A handle only once the call's workflow is there (SEP-2663: a tasks/get
	// for it must resolve), however long its start takes.
	for f == nil {
		if _, err := s.Temporal.DescribeWorkflow(r.Context(), wf, ""); err == nil {
			break
		}
		select {
		case got := <-started:
			f = &got
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if f != nil {
		switch {
		case f.err != nil:
			s.Logger.Warn("tool call not started", zap.String("tool", q.Params.Name), zap.Error(f.err))
			answer(failure(sentences.Say(sentences.NotStarted, f.err.Error())))
			return
		case f.out.Status == workflows.StatusPendingApproval && f.run && s.confirmable(req, id, f.out):
			res, err := s.askToConfirm(q.Params.Name, req, id, f.out.IdempotencyKey, f.out.RunID, f.out.ArgsHash, f.out.Card)
			if err != nil {
				writeRPC(w, http.StatusOK, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the confirmation could not be sealed"})
				return
			}
			m, _ := complete(res)
			m["resultType"] = "input_required"
			writeRPC(w, http.StatusOK, q.ID, m, nil)
			return
		case !f.run || (f.out.Status != workflows.StatusPendingApproval && f.out.Status != workflows.StatusAwaitingSignIn):
			answer(result(f.out.ToolCallResult))
			return
		}
		wf = f.out.IdempotencyKey
	}
	h := taskHandle{Issuer: id.Issuer, Subject: id.Subject, WorkflowID: wf, Created: time.Now().UnixMilli()}
	taskID, err := sealTask(s.Codec, h)
	if err != nil {
		writeRPC(w, http.StatusOK, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be sealed"})
		return
	}
	task, rpcErr := s.task(r.Context(), taskID, h)
	if rpcErr != nil {
		writeRPC(w, http.StatusOK, q.ID, nil, rpcErr)
		return
	}
	if task["status"] != taskWorking {
		// Final already: the result itself, not a handle to it.
		if res, ok := task["result"]; ok {
			answer(res)
			return
		}
	}
	delete(task, "result")
	task["resultType"] = "task"
	s.Logger.Info("tool call answered with a task", zap.String("tool", q.Params.Name), zap.String("callId", wf))
	writeRPC(w, http.StatusOK, q.ID, task, nil)
}

// serveTask answers tasks/get, tasks/update and tasks/cancel for a task of
// the person's own.
func (s *Server) serveTask(w http.ResponseWriter, r *http.Request, q *rpcRequest, id Identity) {
	if status, err := checkHeaders(r, q, q.Params.TaskID); err != nil {
		writeRPC(w, status, q.ID, nil, err)
		return
	}
	if !q.declaresTasks() {
		writeRPC(w, http.StatusBadRequest, q.ID, nil, &jsonrpc.Error{Code: codeMissingRequiredCapability,
			Message: "declare the " + TasksExtension + " extension in this request's _meta " + clientCapabilitiesMeta,
			Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)})
		return
	}
	h, ok := openTask(s.Codec, q.Params.TaskID, id)
	if !ok {
		writeRPC(w, http.StatusBadRequest, q.ID, nil, errUnknownTask)
		return
	}
	switch q.Method {
	case taskMethodGet:
		task, err := s.task(r.Context(), q.Params.TaskID, h)
		if err != nil {
			writeRPC(w, http.StatusBadRequest, q.ID, nil, err)
			return
		}
		task["resultType"] = "complete"
		writeRPC(w, http.StatusOK, q.ID, task, nil)
	case taskMethodUpdate:
		// No input request of a toolgate task is ever outstanding (a card
		// is decided in the card UI), so every response is ignored.
		if _, err := s.task(r.Context(), q.Params.TaskID, h); err != nil {
			writeRPC(w, http.StatusBadRequest, q.ID, nil, err)
			return
		}
		writeRPC(w, http.StatusOK, q.ID, map[string]any{"resultType": "complete"}, nil)
	case taskMethodCancel:
		closed, ok := s.own(r.Context(), id, h.WorkflowID)
		if !ok {
			writeRPC(w, http.StatusBadRequest, q.ID, nil, errUnknownTask)
			return
		}
		if !closed {
			if err := s.sendWithdrawal(r.Context(), id, h.WorkflowID, "", ""); err != nil {
				s.Logger.Info("a task's cancellation withdrew nothing", zap.String("workflowId", h.WorkflowID), zap.Error(err))
			}
		}
		writeRPC(w, http.StatusOK, q.ID, map[string]any{"resultType": "complete"}, nil)
	}
}

var errUnknownTask = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task: no task of yours has this taskId"}

// task is the detailed task of a call (SEP-2663): working while it waits or
// runs; completed with the call's result inlined once it has ended, a
// refusal being a tool result with isError; cancelled once withdrawn;
// failed when it ended without a result.
func (s *Server) task(ctx context.Context, taskID string, h taskHandle) (map[string]any, *jsonrpc.Error) {
	desc, err := s.Temporal.DescribeWorkflow(ctx, h.WorkflowID, "")
	if err != nil {
		return nil, errUnknownTask
	}
	created := time.UnixMilli(h.Created).UTC()
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	task := map[string]any{"taskId": taskID, "createdAt": created.Format(time.RFC3339Nano), "lastUpdatedAt": created.Format(time.RFC3339Nano),
		"ttlMs": TaskTTL.Milliseconds(), "pollIntervalMs": TaskPollInterval.Milliseconds(), "status": taskWorking}
	if info.GetCloseTime() == nil {
		v, err := s.Temporal.QueryWorkflow(ctx, h.WorkflowID, "", workflows.StatusQuery)
		var st workflows.Status
		if err == nil && v.Get(&st) == nil {
			task["statusMessage"] = sentences.Say(sentences.StillWaiting, st.Status, st.ExpiresAt)
		}
		return task, nil
	}
	if closed := info.GetCloseTime().AsTime().UTC(); closed.After(created) {
		task["lastUpdatedAt"] = closed.Format(time.RFC3339Nano)
	}
	var res workflows.ToolCallResult
	if err := s.Temporal.GetWorkflow(ctx, h.WorkflowID, "").Get(ctx, &res); err != nil {
		task["status"], task["error"] = taskFailed, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: sentences.Say(sentences.EndedWithoutResult)}
		return task, nil
	}
	if res.Status == workflows.StatusWithdrawn {
		task["status"], task["statusMessage"] = taskCancelled, res.Message
		return task, nil
	}
	inlined, err := complete(result(res))
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be read"}
	}
	delete(inlined, "resultType")
	task["status"], task["result"] = taskCompleted, inlined
	return task, nil
}

// errNoSigner: this server signs no withdrawals.
var errNoSigner = errors.New("this server holds no withdrawal key")
