package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/exchange"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// CallInput is one upstream call: the args as authorized (after session
// fill), whose credential to use, and the idempotency key.
type CallInput struct {
	Acting
	IdempotencyKey string `json:"idempotencyKey"`
	// ArgsHash, when set, must match the args: what runs is what was approved.
	ArgsHash string `json:"argsHash,omitempty"`
	// Before, when set, is written (audit row and card) before anything is
	// sent upstream: the approval's record, in the same activity as the call.
	Before *RecordInput `json:"before,omitempty"`
	// After, when set, is the outcome's record, written with the result as
	// soon as the upstream has answered: the call's own activity writes it,
	// so the workflow need not (CallResult.Recorded says it did).
	After *OutcomeRecord `json:"after,omitempty"`
}

// OutcomeRecord is an executed call's audit row and, for a call with a
// card, the card's final state; both take the upstream's result.
type OutcomeRecord struct {
	Audit AuditInput `json:"audit"`
	Card  *CardRow   `json:"card,omitempty"`
}

// CallResult is the sanitized answer of the upstream.
type CallResult struct {
	Result json.RawMessage `json:"result"`
	// Recorded says the activity wrote CallInput.After.
	Recorded bool `json:"recorded,omitempty"`
}

// afterBudget bounds the outcome's write after the upstream call: a slow
// database must not turn a call that ran into a timeout ("unknown whether
// this took effect"); the workflow writes what the activity could not.
const afterBudget = 2 * time.Second

// CallTool exchanges the session's credential for a short-lived token and
// makes the tool's upstream call with it. The token lives only inside this
// function and send: it is never returned, logged or put in an error.
func (a *Activities) CallTool(ctx context.Context, in CallInput) (CallResult, error) {
	info := activity.GetInfo(ctx)
	log := a.Logger.With(zap.String("tool", in.Tool), zap.String("workflowId", info.WorkflowExecution.ID),
		zap.String("runId", info.WorkflowExecution.RunID), zap.Int32("attempt", info.Attempt))
	if in.ArgsHash != "" {
		if h, err := signoff.ArgsHash(in.Tool, in.Args); err != nil || h != in.ArgsHash {
			return CallResult{}, temporal.NewNonRetryableApplicationError("the args to run do not match the approved card", ErrBadInput, nil)
		}
	}
	if in.Before != nil {
		if err := a.recordSafely(ctx, *in.Before); err != nil {
			return CallResult{}, err
		}
	}
	spec, ok := a.Policy.Spec(in.Tool)
	if !ok || !spec.Runnable() {
		return CallResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no upstream route is defined for %q", in.Tool), ErrUpstream, nil)
	}
	// A tool that runs as no one (a corpus the same for every caller) is
	// sent no token: the person's is not exchanged for a call that needs none.
	token := ""
	if spec.RequiresCredential {
		var err error
		if token, err = a.exchangeSafely(ctx, in.Acting); err != nil {
			log.Warn("credential exchange failed", zap.String("error", sanitize.Text(err.Error())))
			return CallResult{}, err
		}
	}
	if err := a.checkVerified(ctx, in.Acting); err != nil {
		log.Info("the caller is not verified at the row's tier")
		return CallResult{}, err
	}
	if spec.Verifies != nil {
		return a.verify(ctx, in, spec, token)
	}
	answer, err := a.send(ctx, in, spec, token)
	if err != nil {
		log.Warn("upstream call failed", zap.String("error", sanitize.Text(err.Error())))
		var app *temporal.ApplicationError
		if spec.Unavailable != "" && errors.As(err, &app) && app.Type() == ErrUnavailable {
			return CallResult{}, temporal.NewApplicationError(app.Message(), ErrUnavailable, UnavailableNote{Note: spec.Unavailable})
		}
		return CallResult{}, err
	}
	if shape := a.Shapers[in.Tool]; shape != nil {
		if answer, err = shape(in.Args, answer); err != nil {
			log.Warn("the upstream's answer did not read", zap.String("error", sanitize.Text(err.Error())))
			return CallResult{}, temporal.NewApplicationError("the upstream's answer did not read", ErrUnavailable)
		}
	}
	res := CallResult{Result: a.Sanitizer.Result(answer)}
	if in.After != nil {
		if err := a.recordAfter(ctx, *in.After, res.Result); err != nil {
			log.Warn("outcome not recorded by the call; the workflow records it", zap.String("error", sanitize.Text(err.Error())))
		} else {
			res.Recorded = true
		}
	}
	return res, nil
}

// send makes the call on its upstream: one HTTP request on its route, or
// one tools/call on its MCP server.
func (a *Activities) send(ctx context.Context, in CallInput, spec policy.ToolSpec, token string) (json.RawMessage, error) {
	if spec.MCP != nil {
		return a.callMCP(ctx, in, spec, token)
	}
	path, body, err := request(spec.Route, in.Args, in.Resources)
	if err != nil {
		return nil, badArgs(err)
	}
	key := ""
	if spec.Route.Keyed {
		key = in.IdempotencyKey
	}
	return a.do(ctx, a.upstream(in.Tool), spec.Route.Method, path, token, key, body)
}

// recordAfter writes an executed call's outcome with its result, within
// afterBudget or half the time the activity has left, whichever is less.
func (a *Activities) recordAfter(ctx context.Context, out OutcomeRecord, result json.RawMessage) error {
	budget := afterBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out.Audit.Result = result
	if out.Card == nil {
		return a.Audit(ctx, out.Audit)
	}
	card := *out.Card
	card.Result = result
	return a.Record(ctx, RecordInput{Audit: out.Audit, Card: card})
}

// request fills a route from a call's authorized args: the path's
// placeholders, the query parameters whose fields are present, the ones the
// route fills from the session's resources (held), and the body fields as a
// JSON object.
func request(r policy.Route, args json.RawMessage, held policy.Resources) (string, []byte, error) {
	fields := map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return "", nil, err
	}
	text := func(name string) (string, bool) {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		return string(raw), true
	}
	path := r.Path
	for {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(path[open:], '}') + open
		v, ok := text(path[open+1 : end])
		if !ok || v == "" {
			return "", nil, fmt.Errorf("the args have no %s for the route %s", path[open+1:end], r.Path)
		}
		if v == "." || v == ".." {
			// PathEscape keeps dots: the segment would name another path.
			return "", nil, fmt.Errorf("the %s %q cannot fill a path segment of %s", path[open+1:end], v, r.Path)
		}
		path = path[:open] + url.PathEscape(v) + path[end+1:]
	}
	q := url.Values{}
	for param, field := range r.Query {
		if v, ok := text(field); ok && v != "" {
			q.Set(param, v)
		}
	}
	for param, kind := range r.Session {
		if ids := held[kind]; len(ids) > 0 {
			q.Set(param, ids[0])
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if r.Body == nil {
		return path, nil, nil
	}
	body := map[string]json.RawMessage{}
	for _, f := range r.Body {
		if raw, ok := fields[f]; ok {
			body[f] = raw
		}
	}
	b, err := json.Marshal(body)
	return path, b, err
}

// recordSafely writes a record before the upstream call, retrying inside
// the activity while PostgreSQL is briefly away: nothing has been sent yet.
func (a *Activities) recordSafely(ctx context.Context, in RecordInput) error {
	wait := 200 * time.Millisecond
	for {
		err := a.Record(ctx, in)
		var app *temporal.ApplicationError
		if err == nil || errors.As(err, &app) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
			wait = min(2*wait, 2*time.Second)
		}
	}
}

// exchangeSafely retries the credential exchange inside the activity while
// the vault or the token endpoint is briefly unreachable. The exchange has
// no effect upstream, so this holds even for tools that run at most once.
func (a *Activities) exchangeSafely(ctx context.Context, in Acting) (string, error) {
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		token, err := a.exchange(ctx, in)
		var app *temporal.ApplicationError
		if err == nil || attempt == 5 || !errors.As(err, &app) || app.Type() != ErrUnavailable {
			return token, err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(wait):
			wait *= 2
		}
	}
}

// exchange looks the credential up in the vault, holds the session's
// claims and the tool's requester tier against the sign-in that issued it,
// and trades it for a token to the tool's pack's upstream.
func (a *Activities) exchange(ctx context.Context, in Acting) (string, error) {
	var owner string
	var secret, secretPack, grant, issuer, subject *string
	var revoked, demo, seeded bool
	var role, acr *string
	var held policy.Resources
	var authTime *time.Time
	// A credential whose sign-in a revocation has ended since (migration
	// 022) is refused even if its row was not yet marked revoked.
	err := a.Pool.QueryRow(ctx, `SELECT user_id, client_secret, secret_pack, grant_token, issuer, subject,
		revoked OR (issuer IS NOT NULL AND subject IS NOT NULL AND vault.sign_in_revoked(issuer, subject, auth_time)),
		demo, role, resources, acr, auth_time, ref = 'cred-' || user_id AND NOT demo FROM vault.credentials WHERE ref = $1`,
		in.CredentialRef).Scan(&owner, &secret, &secretPack, &grant, &issuer, &subject, &revoked, &demo, &role, &held, &acr, &authTime, &seeded)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (revoked || owner != in.UserID)) {
		return "", temporal.NewNonRetryableApplicationError("the session's credential is unknown, revoked or not the signed-in person's", ErrCredential, nil)
	}
	if err != nil {
		return "", temporal.NewApplicationErrorWithCause("the vault is unreachable", ErrUnavailable, err)
	}
	if issuer == nil || subject == nil || seeded {
		// A seeded row is what sign-ins copy a secret from, never a
		// credential itself, even bound to its person (migration 032): its
		// readable ref names no sign-in.
		return "", temporal.NewNonRetryableApplicationError("the session's credential is bound to no sign-in", ErrCredential, nil)
	}
	if demo && !a.DevMode {
		return "", temporal.NewNonRetryableApplicationError("the session's credential is a demo credential, which works only in dev mode", ErrCredential, nil)
	}
	if why := claimsBeyond(in, role, held); why != "" {
		return "", temporal.NewNonRetryableApplicationError(why, ErrCredential, nil)
	}
	if in.RequiredTier != "" && (acr == nil || !policy.Satisfies(*acr, in.RequiredTier)) {
		held := ""
		if acr != nil {
			held = *acr
		}
		return "", temporal.NewNonRetryableApplicationError("the credential's sign-in is below the tool's requester tier", ErrStepUp, nil,
			StepUp{RequiredTier: in.RequiredTier, HeldTier: held})
	}
	if in.RequiredTier != "" && in.RequiredMaxAgeSeconds > 0 {
		asked, err := time.Parse(time.RFC3339, in.AskedAt)
		if err != nil {
			asked = time.Now()
		}
		if maxAge := time.Duration(in.RequiredMaxAgeSeconds) * time.Second; authTime == nil || authTime.Before(asked.Add(-maxAge)) {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the credential's sign-in is older than the tool's requester tier allows (%s)", maxAge),
				ErrStepUp, nil, StepUp{RequiredTier: in.RequiredTier, HeldTier: *acr, MaxAgeSeconds: in.RequiredMaxAgeSeconds})
		}
	}
	pack := ""
	if d, ok := a.Policy.PackOf(in.Tool); ok {
		pack = d.Name
	}
	if spec, _ := a.Policy.Spec(in.Tool); spec.MCP != nil {
		// An MCP server that takes the person's token gets one the
		// provider issues for its audience alone; any other (stdio, a
		// service credential) is sent none of theirs: the sign-in is held
		// to the call above.
		if audience := a.MCP.audience(spec.MCP.Server); audience != "" {
			return a.exchangeGrant(ctx, grant, subject, pack, audience)
		}
		return "", nil
	}
	if audience, ok := a.Audiences[pack]; ok {
		return a.exchangeGrant(ctx, grant, subject, pack, audience)
	}
	if secret == nil || secretPack == nil || !a.sameUpstream(*secretPack, in.Tool) {
		// A secret is sent only to the upstream of the pack it is for.
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the session's credential holds no secret for the %s pack's upstream", pack), ErrCredential, nil)
	}
	req, _ := json.Marshal(map[string]string{"userId": owner, "clientSecret": *secret})
	body, err := a.do(ctx, a.upstream(in.Tool), http.MethodPost, "/oauth/token", "", "", req)
	if err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == ErrUpstream {
			return "", temporal.NewNonRetryableApplicationError("the upstream refused the credential", ErrCredential, nil)
		}
		return "", err
	}
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return "", temporal.NewApplicationError("the token endpoint answered without a token", ErrUnavailable)
	}
	return tok.AccessToken, nil
}

// exchangeGrant trades the sign-in's grant at the identity provider for a
// token whose one audience is the pack's upstream.
func (a *Activities) exchangeGrant(ctx context.Context, grant, subject *string, pack, audience string) (string, error) {
	if grant == nil || *grant == "" || subject == nil || *subject == "" {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the session's credential holds no grant from the identity provider, which the %s pack's upstream takes; sign in again", pack), ErrCredential, nil)
	}
	if a.Exchange == nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the worker has no token exchange configured for the %s pack", pack), ErrCredential, nil)
	}
	token, err := a.Exchange.Token(ctx, *grant, audience, *subject)
	if errors.Is(err, exchange.ErrRefused) {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("the identity provider refused the sign-in's grant for the %s pack's upstream", pack), ErrCredential, nil)
	}
	if err != nil {
		return "", temporal.NewApplicationErrorWithCause("the identity provider is unreachable", ErrUnavailable, err)
	}
	return token, nil
}

// claimsBeyond says how a session claims more than its credential's
// sign-in holds (another role, a resource it does not hold), or "". Inputs
// from before the claims were passed (no role) and credentials issued
// before they were recorded (no role) are not compared.
func claimsBeyond(in Acting, role *string, held policy.Resources) string {
	if in.Role == "" || role == nil {
		return ""
	}
	if string(in.Role) != *role {
		return fmt.Sprintf("the session claims the role %q, but its credential was issued to a %s", sanitize.Text(string(in.Role)), *role)
	}
	claimed := in.EarlierResources.Or(in.Resources)
	for _, kind := range slices.Sorted(maps.Keys(claimed)) {
		for _, id := range claimed[kind] {
			if !held.Holds(kind, id) {
				return fmt.Sprintf("the session claims %s %s, which its credential's sign-in does not hold", kind, sanitize.Text(id))
			}
		}
	}
	return ""
}

// do makes one HTTP call. 5xx, 429 and transport errors are retryable
// upstream_unavailable; other 4xx are non-retryable upstream_error carrying
// the upstream's own message.
func (a *Activities) do(ctx context.Context, base, method, path, token, idemKey string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("bad upstream request: "+err.Error(), ErrUpstream, nil)
	}
	req.Header = requestHeader(token, idemKey, body != nil)
	resp, err := a.HTTP.Do(req)
	for wait := 200 * time.Millisecond; err != nil && neverSent(err) && wait <= 800*time.Millisecond && ctx.Err() == nil; wait *= 2 {
		// Nothing reached the upstream, so trying again cannot act twice.
		time.Sleep(wait)
		if req, err = http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body)); err == nil {
			req.Header = requestHeader(token, idemKey, body != nil)
			resp, err = a.HTTP.Do(req)
		}
	}
	if err != nil {
		// The URL error text holds no header, so no token leaks through it.
		return nil, temporal.NewApplicationError("the upstream did not answer: "+err.Error(), ErrUnavailable)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, temporal.NewApplicationError("the upstream's answer was cut off", ErrUnavailable)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return data, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, temporal.NewApplicationError("the upstream is unavailable (HTTP "+strconv.Itoa(resp.StatusCode)+")", ErrUnavailable)
	}
	var e struct {
		Code       string          `json:"code"`
		Message    string          `json:"message"`
		Candidates json.RawMessage `json:"candidates"`
	}
	_ = json.Unmarshal(data, &e)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	var candidates json.RawMessage
	if trimmed := bytes.TrimSpace(e.Candidates); len(trimmed) > 0 && trimmed[0] == '[' {
		candidates = a.Sanitizer.Result(trimmed) // they reach the model: sanitized as a result is
	}
	return nil, temporal.NewNonRetryableApplicationError(sanitize.Text(e.Message), ErrUpstream, nil,
		UpstreamRefusal{Status: resp.StatusCode, Code: sanitize.Text(e.Code), Candidates: candidates})
}

// UnavailableNote details an upstream_unavailable of a tool whose spec says
// what the model should do instead (policy.ToolSpec.Unavailable), so the
// workflow tells it from its own history.
type UnavailableNote struct {
	Note string `json:"note"`
}

// UpstreamRefusal details an upstream_error: the HTTP status, the
// upstream's code and, for an unknown ID, the candidates the person may
// have meant (the HTTP executor's error body: code, message, candidates).
type UpstreamRefusal struct {
	Status     int             `json:"status"`
	Code       string          `json:"code,omitempty"`
	Candidates json.RawMessage `json:"candidates,omitempty"`
}

// neverSent reports a transport error from before the request left: the
// connection was never made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func requestHeader(token, idemKey string, hasBody bool) http.Header {
	h := http.Header{}
	if hasBody {
		h.Set("Content-Type", "application/json")
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if idemKey != "" {
		h.Set("Idempotency-Key", idemKey)
	}
	return h
}

func badArgs(err error) error {
	return temporal.NewNonRetryableApplicationError("authorized args do not decode: "+err.Error(), ErrBadInput, nil)
}
