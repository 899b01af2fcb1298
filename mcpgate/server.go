// Package mcpgate is toolgate's front door for agents that speak the Model
// Context Protocol: an OAuth-protected MCP server (streamable HTTP, the
// official Go SDK) whose tools are toolgate's, each call a ToolCall
// workflow started with Update-with-Start (docs/contract.md).
package mcpgate

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"github.com/toolgate/toolgate/workflows"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// Wire names of the MCP server (docs/contract.md).
const (
	// Path is where the MCP endpoint is served.
	Path = "/mcp"
	// MetadataPath serves the protected-resource metadata (RFC 9728).
	MetadataPath = "/.well-known/oauth-protected-resource"
	// IdempotencyKeyMeta is the _meta key a client sets on tools/call so a
	// retry attaches to the same call.
	IdempotencyKeyMeta = "toolgate/idempotencyKey"
	// ConversationMeta is the _meta key a client sets on tools/call to name
	// the conversation the call belongs to: what a verification tool earns
	// is held for that conversation (and the sign-in) alone. It is the only
	// conversation a sessionless revision has.
	ConversationMeta = "toolgate/conversation"
	// FirstSessionlessRevision is the first protocol revision without MCP
	// sessions (SEP-2575): its requests are served statelessly.
	FirstSessionlessRevision = "2026-07-28"
	// StatusTool reads a call's outcome by its workflow ID.
	StatusTool = "toolgate_call_status"
	// WithdrawTool takes back one of the caller's own calls that waits for
	// a person: its card closes withdrawn and nothing runs. It is offered
	// where the server holds the key decisions are signed with (Signer).
	WithdrawTool = "toolgate_call_withdraw"
	// BackChannelLogoutPath takes the provider's logout tokens for the MCP
	// client (OpenID Connect Back-Channel Logout 1.0): a lock or a role
	// change ends the person's authority here too.
	BackChannelLogoutPath = "/backchannel-logout"
)

// Identity is who an access token says is calling, and how they signed in.
type Identity struct {
	Issuer  string
	Subject string
	UserID  string
	Role    policy.Role
	// Resources are what the token's claims grant, by kind.
	Resources policy.Resources
	ACR       string
	AuthTime  time.Time
	Expiry    time.Time
	// Token is the bearer access token itself, exchanged for the sign-in's
	// grant when a token exchange is configured; never logged or stored.
	Token string `json:"-"`
}

// Conversation is a person's keyed conversation: "mcp." and 32 hex digits
// of SHA-256 over the issuer and subject of their sign-in, so two people
// never share one (whatever their user IDs, and however long) and one
// person has one under any display name.
func Conversation(issuer, subject string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	return "mcp." + hex.EncodeToString(sum[:16])
}

// maxRequestBytes bounds one MCP request body.
const maxRequestBytes = 256 << 10

// NamedConversation is a conversation a client names (ConversationMeta):
// "mcp." and 32 hex digits of SHA-256 over the sign-in's issuer and
// subject and the name, each length-prefixed under a label of its own, so
// two people naming the same conversation never share one, and no
// subject can make it a person's keyed conversation (Conversation).
func NamedConversation(issuer, subject, name string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "named:%d:%s%d:%s%d:%s", len(issuer), issuer, len(subject), subject, len(name), name))
	return "mcp." + hex.EncodeToString(sum[:16])
}

// Server is the MCP server's dependencies.
type Server struct {
	Temporal client.Client
	// TaskQueue is where calls run; QueueFor, when set, names a tool's own
	// (config.Config.QueueFor).
	TaskQueue string
	QueueFor  func(tool string) string
	// Policy is the packs the worker gates: the tools a person's role is offered.
	Policy *policy.Policy
	// Verify checks a bearer access token (signature, issuer, audience,
	// expiry) and returns who it is for.
	Verify func(ctx context.Context, token string) (Identity, error)
	// Credential returns the credential handle for a sign-in, issued once
	// per sign-in: the model and the client never name one.
	Credential func(ctx context.Context, id Identity) (string, error)
	// Revoked reports whether the provider has ended a sign-in's authority
	// since it was made (a lock, a role change); a token for it is
	// refused, and so is every token while it cannot answer.
	Revoked func(ctx context.Context, id Identity) (bool, error)
	// Seal keeps a factor a caller spoke (a verification tool's arg) in
	// the vault for one call and returns its one-time reference, which is
	// all the call's history, logs and audit rows hold (VaultSeal). With
	// none, a verification tool cannot be called.
	Seal func(ctx context.Context, credentialRef, tool, factor string) (string, error)
	// Logout, when set, verifies a logout token (signature, issuer, the MCP
	// client as audience, the back-channel logout event, no nonce) and
	// says whose sign-ins it ends; Revoke ends them (vault.revoke_sign_in).
	Logout func(ctx context.Context, raw string) (Logout, error)
	Revoke func(ctx context.Context, l Logout) error
	// Resource is this server's URL as clients reach it (…/mcp);
	// AuthorizationServer is the OpenID provider that issues its tokens.
	Resource            string
	AuthorizationServer string
	// MaxWait bounds how long a tools/call waits, sending progress, for a
	// person to decide a card before it answers that the card is pending.
	MaxWait time.Duration
	// Signer signs a person's withdrawal of their own card with a key the
	// worker takes for withdrawals alone (TOOLGATE_WITHDRAW_SIGNING_KEY),
	// never an approval; with none, WithdrawTool is not offered.
	Signer *signoff.Signer
	// TaskWait is how long a call from a client that declares the tasks
	// extension waits for its first outcome before it answers with a task
	// handle (DefaultTaskWait when 0).
	TaskWait time.Duration

	// Codec seals the requestState of an input-required result, SpendState
	// spends each one once, and CardsURL is the card UI as people reach it
	// (TOOLGATE_CARDS_URL): with all three, a client that speaks 2026-07-28
	// and declares URL elicitation is sent to decide its own card there,
	// and, with TakeSignIn, to sign in there for a call that waits for it.
	Codec      *codec.Codec
	SpendState StateSpender
	CardsURL   string
	// TakeSignIn takes, once, the sign-in the card UI recorded for a call
	// by one person (VaultSignIns).
	TakeSignIn SignInTaker
	Logger     *zap.Logger

	mu          sync.Mutex
	credentials map[string]string
}

// Handler serves the MCP endpoint, behind the bearer-token check and
// cross-origin protection, and the protected-resource metadata.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = zap.NewNop()
	}
	origin := strings.TrimSuffix(s.Resource, Path)
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: s.Resource,
		AuthorizationServers: []string{s.AuthorizationServer}, BearerMethodsSupported: []string{"header"}, ScopesSupported: []string{"openid", "profile"},
		ResourceName: "toolgate"})
	mux := http.NewServeMux()
	mux.Handle("GET "+MetadataPath, meta)
	mux.Handle("GET "+MetadataPath+Path, meta)
	sessions := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute, MaxRequestBodyBytes: maxRequestBytes})
	stateless := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, MaxRequestBodyBytes: maxRequestBytes})
	bearer := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: origin + MetadataPath + Path})
	mux.Handle(Path, bearer(http.NewCrossOriginProtection().Handler(noBatches(s.tasks(byRevision(sessions, stateless))))))
	if s.Logout != nil && s.Revoke != nil {
		mux.HandleFunc("POST "+BackChannelLogoutPath, s.backChannelLogout)
	}
	return mux
}

// Logout is whose sign-ins a logout token ends, and why.
type Logout struct {
	Issuer, Subject, Reason string
}

// backChannelLogout ends the authority of a logout token's subject: every
// credential of their sign-ins is revoked, and their tokens are refused
// from then on. A token that does not verify is 400; a revocation that
// fails is 500, so the provider tries again.
func (s *Server) backChannelLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	l, err := s.Logout(r.Context(), r.PostFormValue("logout_token"))
	if err != nil {
		http.Error(w, "invalid logout token", http.StatusBadRequest)
		return
	}
	if err := s.Revoke(r.Context(), l); err != nil {
		s.Logger.Error("revoke a sign-in", zap.String("subject", l.Subject), zap.Error(err))
		http.Error(w, "could not revoke the sign-in", http.StatusInternalServerError)
		return
	}
	s.Logger.Info("sign-in revoked by the provider", zap.String("subject", l.Subject), zap.String("reason", l.Reason))
	w.WriteHeader(http.StatusOK)
}

// byRevision serves a request that names a sessionless protocol revision
// in its MCP-Protocol-Version header (2026-07-28 and later, SEP-2575, which
// the SDK serves only statelessly) without a session, and every other one
// (an initialize, or a request of an earlier revision's session) with
// sessions. The SDK requires a sessionless request's header to match the
// revision its body names, so the header alone decides.
func byRevision(sessions, stateless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= FirstSessionlessRevision {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// noBatches refuses a JSON-RPC batch: the protocol versions served
// (2025-06-18 and later) have none, so a batch is an attempt to slip
// several requests past per-request checks.
func noBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			br := bufio.NewReader(r.Body)
			for {
				b, err := br.Peek(1)
				if err != nil || (b[0] != ' ' && b[0] != '\t' && b[0] != '\r' && b[0] != '\n') {
					break
				}
				_, _ = br.ReadByte()
			}
			if b, err := br.Peek(1); err == nil && b[0] == '[' {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported: send one request per POST"}}`))
				return
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{br, r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

// verify adapts Verify to the SDK: the token's subject becomes the
// session's user, so a session ID presented with another person's token is
// refused by the SDK.
func (s *Server) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	id, err := s.Verify(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if s.Revoked == nil {
		return nil, fmt.Errorf("%w: no revocation check is configured", auth.ErrInvalidToken)
	}
	if revoked, err := s.Revoked(ctx, id); err != nil || revoked {
		s.Logger.Warn("a token for a revoked sign-in, or the check failed", zap.String("subject", id.Subject), zap.Bool("revoked", revoked), zap.Error(err))
		return nil, fmt.Errorf("%w: the sign-in behind this token has been revoked (sign in again)", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: id.Issuer + "|" + id.Subject, Expiration: id.Expiry, Extra: map[string]any{"identity": id}}, nil
}

func identityOf(ti *auth.TokenInfo) (Identity, bool) {
	if ti == nil {
		return Identity{}, false
	}
	id, ok := ti.Extra["identity"].(Identity)
	return id, ok
}

// serverFor builds the MCP server of a new session: the tools the token's
// role may be offered, and the status tool. Denied tools never appear.
func (s *Server) serverFor(r *http.Request) *mcp.Server {
	id, ok := identityOf(auth.TokenInfoFromContext(r.Context()))
	if !ok {
		return nil
	}
	// The SDK answers prompts/list whether or not a server has prompts, so
	// the capability says so (an empty list).
	caps := &mcp.ServerCapabilities{Prompts: &mcp.PromptCapabilities{}}
	if s.offersTasks() {
		caps.AddExtension(TasksExtension, nil)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolgate", Title: "toolgate: tools behind policy, approval and audit", Version: "1"}, &mcp.ServerOptions{
		Instructions: sentences.Say(sentences.MCPInstructions), Capabilities: caps})
	for _, d := range s.Policy.DefinitionsFor(id.Role) {
		destructive, open := d.Tier == policy.TierWrite || d.Tier == policy.TierIrreversible, false
		srv.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema, Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint: d.Tier == policy.TierRead, DestructiveHint: &destructive, IdempotentHint: d.Idempotent, OpenWorldHint: &open}}, s.call(d.Name))
	}
	readOnly := true
	srv.AddTool(&mcp.Tool{Name: StatusTool, Description: "Reads the outcome of one of your earlier toolgate calls by its callId (the idempotencyKey of its result), for example a card that was waiting for a person.",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"callId"},
			"properties": map[string]any{"callId": map[string]any{"type": "string", "maxLength": 200, "description": "the call's idempotencyKey"}}},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &readOnly}}, s.status)
	if s.Signer != nil {
		destructive := false
		srv.AddTool(&mcp.Tool{Name: WithdrawTool, Description: "Takes back one of your earlier toolgate calls that still waits for a person to approve it, when the person no longer wants it: its card closes and nothing runs.",
			InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"callId"},
				"properties": map[string]any{"callId": map[string]any{"type": "string", "maxLength": 200, "description": "the call's idempotencyKey"},
					"reason": map[string]any{"type": "string", "maxLength": signoff.MaxReasonRunes, "description": "optional: why the person took it back, in their words"}}},
			Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &destructive, OpenWorldHint: &readOnly}}, s.withdraw)
	}
	return srv
}

// call is the handler of one toolgate tool: it starts (or attaches to) the
// ToolCall and answers with its outcome.
func (s *Server) call(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, ok := identityOf(req.Extra.TokenInfo)
		if !ok {
			return nil, errors.New("no signed-in person")
		}
		if req.Params.RequestState != "" {
			return s.resume(ctx, tool, req, id)
		}
		in, err := s.input(ctx, id, req, tool)
		if err != nil {
			return failure(err.Error()), nil
		}
		out, run, err := workflows.Call(ctx, s.Temporal, s.Policy, s.queue(tool), in, workflows.StartedBy(signoff.Person{Issuer: id.Issuer, Subject: id.Subject}))
		if err != nil {
			s.Logger.Warn("tool call not started", zap.String("tool", tool), zap.Error(err))
			return failure(sentences.Say(sentences.NotStarted, err.Error())), nil
		}
		s.Logger.Info("tool call", zap.String("tool", tool), zap.String("user", id.UserID), zap.String("callId", out.IdempotencyKey),
			zap.String("status", string(out.Status)), zap.String("code", string(out.Code)))
		if out.Status == workflows.StatusAwaitingSignIn && run != nil && s.TakeSignIn != nil && s.asksByURL(req) {
			return s.askToSignIn(tool, req, id, out.IdempotencyKey, out.RunID, out.Code, out.ExpiresAt)
		}
		if card := outcomeCard(out); out.Status == workflows.StatusPendingApproval && run != nil {
			if mode := s.confirmMode(req, id, card); mode != "" {
				return s.askToConfirm(tool, req, id, mode, card)
			}
		}
		if out.Status == workflows.StatusPendingApproval && run != nil {
			if final, done := s.await(ctx, req, run, out); done {
				return result(final), nil
			}
		}
		return result(out.ToolCallResult), nil
	}
}

// queue is the task queue tool's calls run on.
func (s *Server) queue(tool string) string {
	if s.QueueFor != nil {
		return s.QueueFor(tool)
	}
	return s.TaskQueue
}

// input is the ToolCall input of an MCP tools/call: the session comes
// from the access token and the credential from its sign-in, never from
// the client or the model.
func (s *Server) input(ctx context.Context, id Identity, req *mcp.CallToolRequest, tool string) (workflows.ToolCallInput, error) {
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	conv, callID, err := s.conversation(id, req, tool)
	if err != nil {
		return workflows.ToolCallInput{}, err
	}
	ref, err := s.credential(ctx, id)
	if err != nil {
		return workflows.ToolCallInput{}, err
	}
	if args, err = s.sealed(ctx, tool, ref, args); err != nil {
		return workflows.ToolCallInput{}, err
	}
	return workflows.ToolCallInput{Tool: tool, ToolCallID: callID, Args: args, Session: policy.Session{UserID: id.UserID, Role: id.Role,
		Resources: id.Resources, SessionID: conv, ConversationID: conv, CredentialRef: ref}}, nil
}

// conversation is the conversation and the call ID of a tools/call. A
// conversation the client names is the person's under that name; else a
// keyed call's is the person's, so one key is one call whichever session
// retries it; else the MCP session's. A sessionless request that names
// none is a conversation of one call, and a verification tool, whose tier
// would end with it, is refused with what to send.
func (s *Server) conversation(id Identity, req *mcp.CallToolRequest, tool string) (conv, callID string, err error) {
	callID = "c" + strings.ToLower(rand.Text())
	key, keyed := req.Params.Meta[IdempotencyKeyMeta].(string)
	if keyed && !policy.ValidToolCallID(key) {
		return "", "", fmt.Errorf("_meta %q must be 1 to 64 letters, digits, '_', '.' or ':'", IdempotencyKeyMeta)
	}
	if keyed {
		callID = key
	}
	name, named := req.Params.Meta[ConversationMeta].(string)
	session := strings.NewReplacer("-", "", "_", "").Replace(req.Session.ID())
	switch {
	case req.Params.Meta[ConversationMeta] != nil && (!named || !policy.ValidToolCallID(name)):
		return "", "", fmt.Errorf("_meta %q must be 1 to 64 letters, digits, '_', '.' or ':'", ConversationMeta)
	case named:
		conv = NamedConversation(id.Issuer, id.Subject, name)
	case keyed:
		conv = Conversation(id.Issuer, id.Subject)
	case session != "":
		conv = "mcp." + session
	default:
		if spec, ok := s.Policy.Spec(tool); ok && spec.Verifies != nil {
			return "", "", fmt.Errorf("%s earns a tier for one conversation, and this request has no MCP session to hold it: name the conversation in _meta %q (1 to 64 letters, digits, '_', '.' or ':') on this call and on the calls that need the tier", tool, ConversationMeta)
		}
		conv = "mcp." + callID
	}
	if len(conv) > policy.MaxIDLength {
		conv = conv[:policy.MaxIDLength]
	}
	return conv, callID, nil
}

// sealed is a verification tool's args with the factor sealed: the value
// the model passed never reaches the workflow. A verification tool takes
// its factor alone, a string: any other shape (another key, another
// spelling, a non-string) is refused here, before anything records it.
func (s *Server) sealed(ctx context.Context, tool, credentialRef string, args json.RawMessage) (json.RawMessage, error) {
	spec, ok := s.Policy.Spec(tool)
	if !ok || spec.Verifies == nil {
		return args, nil
	}
	arg := spec.Verifies.Arg
	var fields map[string]json.RawMessage
	var factor string
	if json.Unmarshal(args, &fields) != nil || len(fields) != 1 || json.Unmarshal(fields[arg], &factor) != nil || strings.TrimSpace(factor) == "" {
		return nil, fmt.Errorf("%s takes one field, %q: the caller's %s exactly as they said it, as a string; nothing else", tool, arg, spec.Verifies.Name)
	}
	if s.Seal == nil {
		return nil, errors.New("this server cannot take a verification factor (no vault to seal it in)")
	}
	ref, err := s.Seal(ctx, credentialRef, tool, factor)
	if err != nil {
		return nil, fmt.Errorf("the factor could not be sealed: %w", err)
	}
	fields[arg], _ = json.Marshal(ref)
	return json.Marshal(fields)
}

// credential issues the sign-in's credential once and keeps its handle.
func (s *Server) credential(ctx context.Context, id Identity) (string, error) {
	key := fmt.Sprintf("%s|%s|%d|%s", id.Issuer, id.Subject, id.AuthTime.Unix(), id.ACR)
	s.mu.Lock()
	ref, ok := s.credentials[key]
	s.mu.Unlock()
	if ok {
		return ref, nil
	}
	ref, err := s.Credential(ctx, id)
	if err != nil {
		s.Logger.Warn("no credential for the sign-in", zap.String("user", id.UserID), zap.Error(err))
		return "", errors.New("the signed-in person has no credential for the tools' systems; ask them to sign in again")
	}
	s.mu.Lock()
	if s.credentials == nil {
		s.credentials = map[string]string{}
	}
	s.credentials[key] = ref
	s.mu.Unlock()
	return ref, nil
}

// await waits for a pending card's decision while the client keeps the
// request open, sending progress every few seconds, up to MaxWait.
func (s *Server) await(ctx context.Context, req *mcp.CallToolRequest, run client.WorkflowRun, out workflows.Outcome) (workflows.ToolCallResult, bool) {
	wait := s.MaxWait
	if wait <= 0 {
		return workflows.ToolCallResult{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := make(chan workflows.ToolCallResult, 1)
	go func() {
		var res workflows.ToolCallResult
		if run.Get(ctx, &res) == nil {
			done <- res
		}
	}()
	token := req.Params.GetProgressToken()
	notify := func(n int) {
		if token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
				Message: sentences.Say(sentences.MCPProgress, out.ApproverRole, out.Card, out.ExpiresAt)})
		}
	}
	notify(1) // at once: the client learns a person must decide
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for n := 2; ; n++ {
		select {
		case res := <-done:
			return res, true
		case <-ctx.Done():
			return workflows.ToolCallResult{}, false
		case <-tick.C:
			notify(n)
		}
	}
}

// result is the MCP result of a toolgate outcome: executed results as text
// and structured content; refusals as isError with the code and the
// message for the model; a pending card as a plain answer that a person
// must approve.
func result(r workflows.ToolCallResult) *mcp.CallToolResult {
	structured := map[string]any{"status": r.Status, "code": r.Code, "message": r.Message, "retryable": r.Retryable, "authRequired": r.AuthRequired,
		"result": r.Result, "card": r.Card, "callId": r.IdempotencyKey}
	var text string
	switch r.Status {
	case workflows.StatusExecuted:
		text = r.Message + "\n" + string(r.Result)
	case workflows.StatusPendingApproval:
		text = sentences.Say(sentences.MCPPending, r.Card, r.Message, StatusTool, r.IdempotencyKey)
	default:
		text = sentences.Say(sentences.MCPOutcome, r.Status, r.Code, r.Message)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured,
		IsError: r.Status != workflows.StatusExecuted && r.Status != workflows.StatusPendingApproval}
}

func failure(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}

// status reads one of the caller's own calls: a call another person made
// is not found, by the issuer and subject of the sign-in that started it
// (its memo), never by user ID alone, which two people may share.
func (s *Server) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, ok := identityOf(req.Extra.TokenInfo)
	if !ok {
		return nil, errors.New("no signed-in person")
	}
	args, err := policy.DecodeStrict[struct {
		CallID string `json:"callId"`
	}](req.Params.Arguments, 1<<10)
	if err != nil || args.CallID == "" {
		return failure(sentences.Say(sentences.StatusArgs)), nil
	}
	return s.outcome(ctx, id, args.CallID), nil
}

// outcome answers where one of the person's own calls stands: its result
// once it has ended, else its status; another person's call, or none, is
// not found.
func (s *Server) outcome(ctx context.Context, id Identity, callID string) *mcp.CallToolResult {
	closed, ok := s.own(ctx, id, callID)
	if !ok {
		return failure(sentences.Say(sentences.NoSuchCall, clipped(callID)))
	}
	if closed {
		var res workflows.ToolCallResult
		if err := s.Temporal.GetWorkflow(ctx, callID, "").Get(ctx, &res); err != nil {
			return failure(sentences.Say(sentences.EndedWithoutResult))
		}
		return result(res)
	}
	v, err := s.Temporal.QueryWorkflow(ctx, callID, "", workflows.StatusQuery)
	var st workflows.Status
	if err != nil || v.Get(&st) != nil {
		return failure(sentences.Say(sentences.StatusUnreadable))
	}
	return result(workflows.ToolCallResult{Status: st.Status, Code: policy.CodeOK, Message: sentences.Say(sentences.StillWaiting, st.Status, st.ExpiresAt), Card: st.Card, IdempotencyKey: callID, Result: json.RawMessage("{}")})
}

// own says whether callID is a call the person id started (and whether it
// has ended): by the issuer and subject of the sign-in that started it
// (its memo), never by user ID alone (RequestedBy), which two people may
// share.
func (s *Server) own(ctx context.Context, id Identity, callID string) (closed, ok bool) {
	desc, err := s.Temporal.DescribeWorkflow(ctx, callID, "")
	if err != nil || !ownedBy(desc.GetMemoValue, id) {
		return false, false
	}
	return desc.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() != nil, true
}

// ownedBy says a call's memo names the person id as the one who started it.
func ownedBy(memo func(key string, valuePtr any) error, id Identity) bool {
	var asker signoff.Person
	return memo(workflows.RequesterMemo, &asker) == nil && asker == (signoff.Person{Issuer: id.Issuer, Subject: id.Subject})
}

// withdrawWait is how long a withdrawal waits for its card to close before
// it answers where the call stands.
const withdrawWait = 10 * time.Second

// withdraw takes back one of the person's own calls whose card waits: it
// signs their withdrawal with their sign-in as evidence, and answers the
// call's outcome (withdrawn, or what won before it). The workflow judges
// it like any decision, so only the person who asked can withdraw.
func (s *Server) withdraw(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, ok := identityOf(req.Extra.TokenInfo)
	if !ok {
		return nil, errors.New("no signed-in person")
	}
	args, err := policy.DecodeStrict[struct {
		CallID string `json:"callId"`
		Reason string `json:"reason"`
	}](req.Params.Arguments, 4<<10)
	if err != nil || args.CallID == "" || utf8.RuneCountInString(args.Reason) > signoff.MaxReasonRunes {
		return failure(sentences.Say(sentences.WithdrawArgs)), nil
	}
	closed, ok := s.own(ctx, id, args.CallID)
	if !ok {
		return failure(sentences.Say(sentences.NoSuchCall, clipped(args.CallID))), nil
	}
	if closed {
		return s.outcome(ctx, id, args.CallID), nil
	}
	if err := s.sendWithdrawal(ctx, id, args.CallID, strings.TrimSpace(args.Reason), ""); err != nil {
		s.Logger.Info("withdrawal not sent", zap.String("workflowId", args.CallID), zap.Error(err))
		return failure(sentences.Say(sentences.NotWithdrawable, clipped(args.CallID))), nil
	}
	s.Logger.Info("withdrawal sent", zap.String("workflowId", args.CallID))
	wctx, cancel := context.WithTimeout(ctx, withdrawWait)
	defer cancel()
	var res workflows.ToolCallResult
	if err := s.Temporal.GetWorkflow(wctx, args.CallID, "").Get(wctx, &res); err == nil {
		return result(res), nil
	}
	return s.outcome(ctx, id, args.CallID), nil
}

// sendWithdrawal signs the person's withdrawal of the card call wf shows
// (of the version argsHash names, or the one it shows now), with their
// sign-in as evidence; the workflow judges it like any decision.
func (s *Server) sendWithdrawal(ctx context.Context, id Identity, wf, reason, argsHash string) error {
	if s.Signer == nil {
		return errNoSigner
	}
	a := signoff.Approval{Decision: signoff.Withdraw, ArgsHash: argsHash, Approver: policy.Identity{UserID: id.UserID, Role: id.Role}, Reason: reason,
		Evidence: &signoff.AuthEvidence{Issuer: id.Issuer, Subject: id.Subject, ACR: id.ACR, AuthTime: id.AuthTime.UTC().Format(time.RFC3339)}}
	return workflows.SendDecision(ctx, s.Temporal, wf, a, *s.Signer)
}

func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
