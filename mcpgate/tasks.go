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
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
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
	// startWait bounds the start of a call answered with a task; startDeadline
	// how long a request waits for its workflow to be there; startPoll how
	// often it looks.
	startWait     = 5 * time.Minute
	startDeadline = 30 * time.Second
	startPoll     = 200 * time.Millisecond
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
	RunID      string `json:"run"`
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
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Raw     json.RawMessage `json:"params"`
	Params  rpcParams       `json:"-"`
}

// rpcParams are the params of the methods answered here.
type rpcParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	Meta           map[string]any             `json:"_meta"`
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

func isTaskMethod(m string) bool {
	return m == taskMethodGet || m == taskMethodUpdate || m == taskMethodCancel
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
		if !s.offersTasks() || r.Method != http.MethodPost || r.Header.Get("MCP-Protocol-Version") != FirstSessionlessRevision {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var q rpcRequest
		if json.Unmarshal(body, &q) != nil || q.JSONRPC != "2.0" || len(q.ID) == 0 || r.Header.Get("MCP-Protocol-Version") != FirstSessionlessRevision {
			next.ServeHTTP(w, r) // the SDK answers a malformed request, a notification or another revision
			return
		}
		id, ok := identityOf(auth.TokenInfoFromContext(r.Context()))
		if !ok || (!isTaskMethod(q.Method) && q.Method != "tools/call") {
			next.ServeHTTP(w, r)
			return
		}
		if len(q.Raw) > 0 && json.Unmarshal(q.Raw, &q.Params) != nil {
			if isTaskMethod(q.Method) {
				writeRPC(w, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params: taskId must be a string and inputResponses an object"})
				return
			}
			next.ServeHTTP(w, r) // the SDK answers a tools/call's malformed params
			return
		}
		switch {
		case isTaskMethod(q.Method):
			s.serveTask(w, r, &q, id)
		case q.declaresTasks() && q.Params.RequestState == "" && s.offered(id, q.Params.Name):
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
func checkHeaders(r *http.Request, q *rpcRequest, name string) *jsonrpc.Error {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback(local.String()) && !loopback(r.Host) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid Host header"}
	}
	mismatch := func(msg string) *jsonrpc.Error { return &jsonrpc.Error{Code: codeHeaderMismatch, Message: msg} }
	version, _ := q.Params.Meta[protocolVersionMeta].(string)
	switch {
	case version == "":
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing or invalid _meta field " + protocolVersionMeta}
	case r.Header.Get("Mcp-Method") != q.Method:
		return mismatch("the Mcp-Method header must be the request's method, " + q.Method)
	case r.Header.Get("Mcp-Name") != name:
		return mismatch("the Mcp-Name header must be the request's " + map[bool]string{true: "taskId", false: "name"}[isTaskMethod(q.Method)])
	case version != r.Header.Get("MCP-Protocol-Version"):
		return mismatch("the MCP-Protocol-Version header must be the request's _meta " + protocolVersionMeta)
	}
	return nil
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
// HTTP status SEP-2575 and SEP-2243 give its code (a forged Host is 403).
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rpcErr *jsonrpc.Error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg, status := map[string]any{"jsonrpc": "2.0", "id": id}, http.StatusOK
	if rpcErr != nil {
		msg["error"] = rpcErr
		switch rpcErr.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case jsonrpc.CodeInvalidParams, codeMissingRequiredCapability, codeHeaderMismatch:
			status = http.StatusBadRequest
		case jsonrpc.CodeInvalidRequest:
			status = http.StatusForbidden
		}
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
// Server.TaskWait, the confirmation a card its requester may decide asks
// for, or else a task handle, once the call's workflow is durably there.
func (s *Server) callAsTask(w http.ResponseWriter, r *http.Request, q *rpcRequest, id Identity) {
	if err := checkHeaders(r, q, q.Params.Name); err != nil {
		writeRPC(w, q.ID, nil, err)
		return
	}
	req := &mcp.CallToolRequest{Session: &mcp.ServerSession{}, Params: &mcp.CallToolParamsRaw{Name: q.Params.Name, Arguments: q.Params.Arguments, Meta: q.Params.Meta},
		Extra: &mcp.RequestExtra{Header: r.Header, TokenInfo: auth.TokenInfoFromContext(r.Context())}}
	answer := func(res any) {
		m, err := complete(res)
		if err != nil {
			writeRPC(w, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be written"})
			return
		}
		writeRPC(w, q.ID, m, nil)
	}
	in, err := s.input(r.Context(), id, req, q.Params.Name)
	if err != nil {
		answer(failure(err.Error()))
		return
	}
	wf := workflows.WorkflowID(in.Session.ConversationID, in.ToolCallID)
	// A workflow already there is an earlier call under the client's key:
	// its answer (its outcome, or idempotency_conflict) comes from the
	// update, never a handle to that call taken on the timer. An unkeyed
	// call's ID is new, so only a keyed one is looked up.
	fresh := true
	if _, keyed := q.Params.Meta[IdempotencyKeyMeta]; keyed {
		_, absent := s.Temporal.DescribeWorkflow(r.Context(), wf, "")
		fresh = absent != nil
	}
	deadline := time.Now().Add(startDeadline)
	if !fresh {
		deadline = time.Now().Add(startWait)
	}
	type first struct {
		out workflows.Outcome
		run bool
		err error
	}
	started := make(chan first, 1)
	// The start is bounded, and given up once this request has its answer
	// or is gone: a handle is only handed out once the workflow is there,
	// and it runs on whether or not anyone waits for its first outcome.
	sctx, stop := context.WithTimeout(context.WithoutCancel(r.Context()), startWait)
	defer stop()
	go func() {
		out, run, err := workflows.Call(sctx, s.Temporal, s.Policy, s.queue(q.Params.Name), in, workflows.StartedBy(signoff.Person{Issuer: id.Issuer, Subject: id.Subject}))
		started <- first{out, run != nil, err}
	}()
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
	case <-r.Context().Done():
		return
	}
	runID := ""
	for f == nil {
		if fresh {
			if desc, err := s.Temporal.DescribeWorkflow(r.Context(), wf, ""); err == nil {
				runID = desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
				break
			}
		}
		if time.Now().After(deadline) {
			s.Logger.Warn("a task's call did not start in time", zap.String("workflowId", wf))
			answer(failure(sentences.Say(sentences.NotStarted, "it did not start in time")))
			return
		}
		select {
		case got := <-started:
			f = &got
		case <-time.After(startPoll):
		case <-r.Context().Done():
			return
		}
	}
	if f != nil {
		card := outcomeCard(f.out)
		mode := s.confirmMode(req, id, card)
		switch {
		case f.err != nil:
			s.Logger.Warn("tool call not started", zap.String("tool", q.Params.Name), zap.Error(f.err))
			answer(failure(sentences.Say(sentences.NotStarted, f.err.Error())))
			return
		case f.out.Status == workflows.StatusPendingApproval && f.run && mode != "":
			inputRequired(w, q.ID)(s.askToConfirm(q.Params.Name, req, id, mode, card))
			return
		case f.out.Status == workflows.StatusAwaitingSignIn && f.run && s.TakeSignIn != nil && s.asksByURL(req):
			inputRequired(w, q.ID)(s.askToSignIn(q.Params.Name, req, id, f.out.IdempotencyKey, f.out.RunID, f.out.Code, f.out.ExpiresAt))
			return
		case !f.run || f.out.Status != workflows.StatusPendingApproval:
			// Final, or a wait for a sign-in, whose answer tells the person
			// what to do: the result itself.
			s.Logger.Info("tool call", zap.String("tool", q.Params.Name), zap.String("user", id.UserID), zap.String("callId", f.out.IdempotencyKey),
				zap.String("status", string(f.out.Status)), zap.String("code", string(f.out.Code)))
			answer(result(f.out.ToolCallResult))
			return
		}
		wf, runID = f.out.IdempotencyKey, f.out.RunID
	}
	h := taskHandle{Issuer: id.Issuer, Subject: id.Subject, WorkflowID: wf, RunID: runID, Created: time.Now().UnixMilli()}
	taskID, err := sealTask(s.Codec, h)
	if err != nil {
		writeRPC(w, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be sealed"})
		return
	}
	task, res, rpcErr := s.task(r.Context(), taskID, h)
	switch {
	case rpcErr != nil:
		writeRPC(w, q.ID, nil, rpcErr)
		return
	case res != nil:
		answer(result(*res)) // ended already: the result itself, not a handle to it
		return
	case task["status"] != taskWorking:
		writeRPC(w, q.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: sentences.Say(sentences.EndedWithoutResult)})
		return
	}
	task["resultType"] = "task"
	s.Logger.Info("tool call answered with a task", zap.String("tool", q.Params.Name), zap.String("user", id.UserID), zap.String("callId", wf))
	writeRPC(w, q.ID, task, nil)
}

// serveTask answers tasks/get, tasks/update and tasks/cancel for a task of
// the person's own.
func (s *Server) serveTask(w http.ResponseWriter, r *http.Request, q *rpcRequest, id Identity) {
	if err := checkHeaders(r, q, q.Params.TaskID); err != nil {
		writeRPC(w, q.ID, nil, err)
		return
	}
	if !q.declaresTasks() {
		writeRPC(w, q.ID, nil, &jsonrpc.Error{Code: codeMissingRequiredCapability,
			Message: "declare the " + TasksExtension + " extension in this request's _meta " + clientCapabilitiesMeta,
			Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)})
		return
	}
	h, ok := openTask(s.Codec, q.Params.TaskID, id)
	if !ok {
		writeRPC(w, q.ID, nil, errUnknownTask)
		return
	}
	task, _, err := s.task(r.Context(), q.Params.TaskID, h)
	if err != nil {
		writeRPC(w, q.ID, nil, err)
		return
	}
	switch q.Method {
	case taskMethodGet:
		task["resultType"] = "complete"
		writeRPC(w, q.ID, task, nil)
	case taskMethodUpdate:
		// No input request of a toolgate task is ever outstanding (a card
		// is decided in the card UI), so every response is ignored.
		writeRPC(w, q.ID, map[string]any{"resultType": "complete"}, nil)
	case taskMethodCancel:
		if task["status"] == taskWorking {
			if err := s.sendWithdrawal(r.Context(), id, h.WorkflowID, "", ""); err != nil {
				s.Logger.Info("a task's cancellation withdrew nothing", zap.String("workflowId", h.WorkflowID), zap.Error(err))
			}
		}
		writeRPC(w, q.ID, map[string]any{"resultType": "complete"}, nil)
	}
}

var errUnknownTask = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task: no task of yours has this taskId"}

// task is the detailed task of a call's run (SEP-2663): working while it
// waits or runs; completed with the call's result inlined once it has
// ended (res), a refusal being a tool result with isError; cancelled once
// withdrawn; failed when the run ended without a result. A run Temporal
// does not know is an unknown task; one it cannot read now is an error
// that changes nothing of the task.
func (s *Server) task(ctx context.Context, taskID string, h taskHandle) (map[string]any, *workflows.ToolCallResult, *jsonrpc.Error) {
	unreadable := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call cannot be read now; ask again"}
	desc, err := s.Temporal.DescribeWorkflow(ctx, h.WorkflowID, h.RunID)
	var missing *serviceerror.NotFound
	if errors.As(err, &missing) {
		return nil, nil, errUnknownTask
	}
	if err != nil {
		return nil, nil, unreadable
	}
	created := time.UnixMilli(h.Created).UTC()
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	task := map[string]any{"taskId": taskID, "createdAt": created.Format(time.RFC3339Nano), "lastUpdatedAt": created.Format(time.RFC3339Nano),
		"ttlMs": TaskTTL.Milliseconds(), "pollIntervalMs": TaskPollInterval.Milliseconds(), "status": taskWorking}
	if info.GetCloseTime() == nil {
		v, err := s.Temporal.QueryWorkflow(ctx, h.WorkflowID, h.RunID, workflows.StatusQuery)
		var st workflows.Status
		if err == nil && v.Get(&st) == nil {
			task["statusMessage"] = sentences.Say(sentences.StillWaiting, st.Status, st.ExpiresAt)
		}
		return task, nil, nil
	}
	if closed := info.GetCloseTime().AsTime().UTC(); closed.After(created) {
		task["lastUpdatedAt"] = closed.Format(time.RFC3339Nano)
	}
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		task["status"], task["error"] = taskFailed, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: sentences.Say(sentences.EndedWithoutResult)}
		return task, nil, nil
	}
	var res workflows.ToolCallResult
	if err := s.Temporal.GetWorkflow(ctx, h.WorkflowID, h.RunID).Get(ctx, &res); err != nil {
		return nil, nil, unreadable
	}
	if res.Status == workflows.StatusWithdrawn {
		task["status"], task["statusMessage"] = taskCancelled, res.Message
		return task, &res, nil
	}
	inlined, err := complete(result(res))
	if err != nil {
		return nil, nil, unreadable
	}
	delete(inlined, "resultType")
	task["status"], task["result"] = taskCompleted, inlined
	return task, &res, nil
}

// errNoSigner: this server signs no withdrawals.
var errNoSigner = errors.New("this server holds no withdrawal key")

// inputRequired writes an input-required result (askToConfirm's or
// askToSignIn's) as the answer to request id.
func inputRequired(w http.ResponseWriter, id json.RawMessage) func(*mcp.CallToolResult, error) {
	return func(res *mcp.CallToolResult, err error) {
		if err != nil {
			writeRPC(w, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the requestState could not be sealed"})
			return
		}
		m, _ := complete(res)
		m["resultType"] = "input_required"
		writeRPC(w, id, m, nil)
	}
}
