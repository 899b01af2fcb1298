#!/usr/bin/env python3
"""Guard evidence: remove each guard in turn, run the tests that should
notice, and require them to fail; then restore the file and verify it is
byte-for-byte what it was. Exits non-zero if any guard goes unnoticed."""
import hashlib, subprocess, sys, os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT = ["go", "test", "-count=1", "./policy"]
LIVE = ["go", "test", "-count=1", "./migrations"]
UI = ["go", "test", "-count=1", "./approvals"]
APPROVAL = ["go", "test", "-count=1", "-run", "CheckApproval|ApprovalSignatures|ApprovalAt|RejectRuns|Refused|Hundred|TransferLimits|Free", "./policy", "./workflows"]


def run(pattern, *pkgs):
    """go test of the named tests only: a guard's proof costs seconds, not the suite."""
    return ["go", "test", "-count=1", "-run", pattern, *pkgs]

# (name, file, guard as written, guard removed, tests that must notice)
GUARDS = [
    ("step 0 unknown_tool", "policy/policy.go", "\t\tif e.spec.Name == tool {\n\t\t\treturn e", "\t\tif true {\n\t\t\treturn e", UNIT),
    ("step 1 tool_denied", "policy/policy.go", "if e.decision == DecisionDeny {", "if false {", UNIT),
    ("risk-tier floor", "policy/policy.go", "decision: Stricter(p.rows[n].Decision, p.specs[n].Tier.Floor())}", "decision: p.rows[n].Decision}", UNIT),
    ("step 2 role", "policy/policy.go", "if !slices.Contains(e.row.Roles, s.Role) {", "if false {", UNIT),
    ("step 3 invalid_arguments", "policy/policy.go", "if err != nil {\n\t\treturn deny(StepArguments, err.Error())", "if false {\n\t\treturn deny(StepArguments, err.Error())", UNIT),
    ("step 3 unknown keys", "policy/decode.go", "if err := checkKeys(trimmed, fields); err != nil {", "if err := checkKeys(trimmed, fields); false && err != nil {", UNIT),
    ("step 4 credential_unavailable", "policy/policy.go", "if spec.RequiresCredential && (s.CredentialRef == \"\" || s.UserID == \"\") {", "if false {", UNIT),
    ("step 5 store_scope", "policy/policy.go", "if !s.owns(store) {", "if false {", UNIT),
    ("step 5 session stores are valid stores", "policy/policy.go", "if id := s.StoreIDs[0]; id < MinStoreID || id > MaxStoreID {", "if id := s.StoreIDs[0]; false && (id < MinStoreID || id > MaxStoreID) {", UNIT),
    ("step 6 over_limit", "policy/policy.go", "if *valueCents > row.HardLimitCents {", "if false {", UNIT),
    ("step 7 rate_limit (calls)", "policy/policy.go", "return l.MaxCalls > 0 && u.Calls+1 > l.MaxCalls || l.MaxCents > 0 && u.Cents+value > l.MaxCents", "return l.MaxCents > 0 && u.Cents+value > l.MaxCents", UNIT),
    ("step 7 spend limit", "policy/policy.go", "return l.MaxCalls > 0 && u.Calls+1 > l.MaxCalls || l.MaxCents > 0 && u.Cents+value > l.MaxCents", "return l.MaxCalls > 0 && u.Calls+1 > l.MaxCalls", UNIT),
    ("step 7 missing usage fails closed", "policy/policy.go", "if len(usage) != len(v.Limits) {", "if false {", UNIT),
    ("admission judges the limits the recorded verdict names", "activities/admission.go", "v := policy.Admit(pre, in.ValueCents, usage)", "v := pre", run("AdmitIsRaceFree|EveryLimitHolds", "./activities")),
    ("admission lock", "activities/admission.go", "SELECT pg_advisory_xact_lock($1)", "SELECT $1::bigint", ["go", "test", "-count=1", "-run", "TestAdmitWaitsForTheBucketLock", "./activities"]),
    ("admission dedup on retry", "activities/admission.go", "\tif err == nil {\n\t\treturn recorded(", "\tif false {\n\t\treturn recorded(", ["go", "test", "-count=1", "./activities"]),
    ("audit_log triggers", "migrations/sql/001_audit_log.sql", "CREATE TRIGGER audit_log_no_update_delete", "CREATE OR REPLACE FUNCTION audit_log_unused() RETURNS void LANGUAGE sql AS 'SELECT 1'; CREATE TRIGGER audit_log_never BEFORE INSERT ON vault.credentials FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse(); --", LIVE),
    ("token stays in the activity", "activities/call.go", "\tpath, body, err := request(spec.Route, in.Args)\n", "\tlog.Debug(\"exchanged\", zap.String(\"auth\", token))\n\tpath, body, err := request(spec.Route, in.Args)\n", run("TokenNeverLeaves", "./workflows")),
    ("token stays out of results and history", "activities/call.go", "\tres := CallResult{Result: a.Sanitizer.Result(answer)}\n", "\t_ = answer\n\tres := CallResult{Result: json.RawMessage(`{\"t\":\"` + token + `\"}`)}\n", ["go", "test", "-count=1", "-run", "TokenNeverLeaves", "./workflows"]),
    ("verdict recorded in history (replay)", "workflows/toolcall.go", "enc := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: summary}, func(workflow.Context) any { return policy.Default().Check(req, value) })\n\tif err := enc.Get(&v); err != nil {", "_ = summary\n\tv = policy.Default().Check(req, value)\n\tif false {", ["go", "test", "-count=1", "-run", "GoldenHistoriesReplay", "./workflows"]),
    ("approval: routed role", "policy/approval.go", "if a.Approver.Role != role {", "if false {", APPROVAL),
    ("approval: approver's stores", "policy/approval.go", "if store != 0 && !slices.Contains(a.Approver.StoreIDs, store) {", "if store != 0 && !slices.Contains(a.Approver.StoreIDs, store) && false {", APPROVAL),
    ("approval: signature verified", "policy/signature.go", "if err != nil || !ed25519.Verify(pub, msg, sig) {", "if err != nil || (!ed25519.Verify(pub, msg, sig) && false) {", APPROVAL),
    ("approval: card's args hash", "policy/approval.go", "if a.ArgsHash != argsHash {", "if false {", APPROVAL),
    ("approval: decision is approve or reject", "policy/approval.go", "if a.Decision != Approve && a.Decision != Reject && a.Decision != Edit {", "if false {", APPROVAL),
    ("approval: unexpired when it counts", "workflows/decisions.go", "\tif !now.Before(g.expires) {", "\tif false {", ["go", "test", "-count=1", "-run", "LandingWithTheExpiry", "./workflows"]),
    ("approval: decisions after the end refused", "workflows/decisions.go", "func (c *call) drain(final CallStatus, code policy.Code) error {\n", "func (c *call) drain(final CallStatus, code policy.Code) error {\n\tif true {\n\t\treturn nil\n\t}\n", APPROVAL),
    ("approval: activity runs only the approved args", "activities/call.go", "err != nil || h != in.ArgsHash {", "false && (err != nil || h != in.ArgsHash) {", ["go", "test", "-count=1", "-run", "CallTool", "./activities"]),
    ("approval: rejected and expired cards free budget only", "activities/admission.go", "AND d.event IN ('rejected', 'expired'))`", "AND d.event IN ('rejected', 'expired', 'approved'))`", APPROVAL),
    ("card UI: CSRF token on decisions", "approvals/server.go", "func (s *Server) decide(w http.ResponseWriter, r *http.Request, sess session) {\n\tif !s.csrfOK(sess, r.PostFormValue(\"csrf\")) {", "func (s *Server) decide(w http.ResponseWriter, r *http.Request, sess session) {\n\tif false {", UI),
    ("card UI: a session is the row its cookie's hash names", "approvals/session.go", "WHERE id_hash = $1 AND expires_at > now()`, sum[:])", "WHERE $1::bytea IS NOT NULL AND expires_at > now() LIMIT 1`, sum[:])", run("UIGuards", "./approvals")),
    ("card UI: card visible only to its role and stores", "approvals/server.go", "if (c.ApproverRole != string(u.Role) && c.EscalatedTo != string(u.Role)) || !slices.Contains(u.StoreIDs, c.StoreID) {", "if false && !slices.Contains(u.StoreIDs, c.StoreID) {", UI),
    ("card UI: inbox filtered by role and stores", "approvals/server.go", "AND (approver_role = $1 OR escalated_role = $1) AND store_id = ANY($2)", "AND $1::text IS NOT NULL AND $2::bigint[] IS NOT NULL", UI),
    ("replay catches a command added without versioning", "workflows/toolcall.go", "func (c *call) run() (ToolCallResult, error) {\n", "func (c *call) run() (ToolCallResult, error) {\n\t_ = workflow.Sleep(c.ctx, time.Millisecond)\n", ["go", "test", "-count=1", "-run", "GoldenHistoriesReplay", "./workflows"]),
    ("upstream: an outage is not a wrong secret", "upstream/server.go", "\tif err != nil && !errors.Is(err, pgx.ErrNoRows) {\n\t\t// An outage", "\tif false && err != nil && !errors.Is(err, pgx.ErrNoRows) {\n\t\t// An outage", ["go", "test", "-count=1", "-run", "Outage", "./upstream"]),
    ("approval recorded even when the call dies first", "workflows/toolcall.go", "\t\tif c.before != nil {\n\t\t\t// The call may have died", "\t\tif false && c.before != nil {\n\t\t\t// The call may have died", ["go", "test", "-count=1", "-run", "CallDiesFirst", "./workflows"]),
    ("one attempt for non-idempotent tools", "workflows/toolcall.go", "RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, Summary", "RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}, Summary", run("RetriesOnlyForIdempotent", "./workflows")),
    # Issue 10: guarantees against hostile input and a careless deployment.
    ("signal: an undecodable payload is refused, not dropped", "workflows/decisions.go", "dropped := before - ch.Len()", "dropped := 0 * (before - ch.Len())", run("UndecodableApprovalSignals", "./workflows")),
    ("signal: decisions are read strictly", "policy/approval.go", "if dup := duplicateKey(raw); dup != \"\" {", "if dup := duplicateKey(raw); false && dup != \"\" {", run("DecodeApproval", "./policy")),
    ("signal: a decision's reason is bounded", "policy/approval.go", "utf8.RuneCountInString(a.Reason) > MaxReasonRunes:", "false && utf8.RuneCountInString(a.Reason) > MaxReasonRunes:", run("DecodeApproval|FloodedCard", "./policy", "./workflows")),
    ("card locks after the refusal cap", "workflows/decisions.go", "\t\tcase c.refused > MaxRefusedDecisions:\n\t\t\treturn policy.Approval{}, codeLocked, nil", "\t\tcase false:\n\t\t\treturn policy.Approval{}, codeLocked, nil", run("TooManyRefused|FloodedCard", "./workflows")),
    ("refusals audited one by one only up to the cap", "workflows/decisions.go", "\t\tif c.refused > MaxRefusedDecisions {\n\t\t\tover++", "\t\tif false {\n\t\t\tover++", run("TooManyRefused", "./workflows")),
    ("signature covers the run", "policy/signature.go", "WorkflowID: card.WorkflowID, RunID: card.RunID, ExpiresAt: card.ExpiresAt,", "WorkflowID: card.WorkflowID, ExpiresAt: card.ExpiresAt,", run("ApprovalSignatures", "./policy")),
    ("signature dated within the card's life", "policy/signature.go", "if at.Before(upAt.Add(-ClockSkew)) {", "if false {", run("ApprovalSignatures", "./policy")),
    ("unverified claims are not approvers", "workflows/decisions.go", "\t\tif f.verified {\n\t\t\twho := f.a.Approver", "\t\tif true {\n\t\t\twho := f.a.Approver", run("TooManyRefused", "./workflows")),
    ("spec facts come from the record, not the live spec", "workflows/toolcall.go", "\tif c.facts != nil {\n\t\treturn *c.facts\n\t}", "\tif spec, ok := policy.Default().Spec(c.in.Tool); ok {\n\t\treturn policy.ToolFacts{Tier: spec.Tier, Idempotent: spec.Idempotent, Timeout: spec.Timeout}\n\t}", run("SpecChanges", "./workflows")),
    ("session fields validated at step 2", "policy/policy.go", "if why := s.problem(); why != \"\" {", "if why := s.problem(); false && why != \"\" {", run("MalformedSessions", "./policy")),
    ("a second run finds the claim", "activities/claim.go", "\tif prior == run {\n\t\treturn nil, nil", "\tif true {\n\t\treturn nil, nil", run("SecondRunOfAClosedID|ReusedCallID", "./workflows")),
    ("a duplicate asking for something else is a conflict", "workflows/rerun.go", "if asked.ToolCallID == c.in.ToolCallID && policy.Fingerprint(theirs) == policy.Fingerprint(c.req) {", "if asked.ToolCallID == c.in.ToolCallID && (true || policy.Fingerprint(theirs) == policy.Fingerprint(c.req)) {", run("ReusedCallID", "./workflows")),
    ("the workflow refuses IDs that name no single call", "workflows/toolcall.go", "if why := c.idProblem(); why != \"\" {", "if why := c.idProblem(); false && why != \"\" {", run("CallIDsMapBack", "./workflows")),
    ("the client refuses bad call IDs before starting", "workflows/client.go", "if why := policy.CallIDProblem(in.Session.ConversationID, in.ToolCallID); why != \"\" {", "if why := policy.CallIDProblem(in.Session.ConversationID, in.ToolCallID); false && why != \"\" {", run("CallIDsMapBack", "./workflows")),
    ("services refuse a superuser or owner role", "internal/pg/pg.go", "if super || owns {", "if false {", run("ServicesRefuseAPowerfulRole", "./migrations")),
    ("the worker's role holds no UPDATE on audit_log", "migrations/sql/007_service_roles.sql", "GRANT SELECT, INSERT ON audit_log TO toolgate_worker;", "GRANT SELECT, INSERT, UPDATE ON audit_log TO toolgate_worker;", run("ServicesRefuseAPowerfulRole", "./migrations")),
    ("a stopping worker lets activities finish", "workflows/worker.go", "return worker.Options{WorkerStopTimeout: StopTimeout()}", "return worker.Options{}", run("StoppingTheWorker", "./workflows")),
    ("listeners default to loopback", "internal/config/config.go", "env(\"APPROVALS_ADDR\", \"127.0.0.1:8080\")", "env(\"APPROVALS_ADDR\", \":8080\")", run("ListenersDefaultToLoopback", "./internal/startup")),
    ("no demo upstream key outside dev mode", "upstream/settings.go", "\tcase s.Key == DemoKey:", "\tcase false && s.Key == DemoKey:", run("RefuseDemoSecrets", "./internal/startup")),
    ("servers time out slow clients", "internal/httpserver/httpserver.go", "ReadTimeout: ReadTimeout,", "", run("SlowClients", "./approvals")),
    ("failed sign-ins are throttled", "idp/login.go", "if p.throttle.blocked(r, user, p.opts.Now()) {", "if false {", run("FailedSignIns", "./idp")),
    # Issue 13: real identity.
    ("an approval's evidence is checked", "workflows/decisions.go", "\tif f.code, f.why = policy.CheckEvidence(r.a, g.evidence, g.issuers, now); f.code != policy.CodeOK {", "\tif _ = now; false {", run("ApprovalsNeedTheirEvidence", "./workflows")),
    ("evidence: the acr level", "policy/evidence.go", "\tif !Satisfies(e.ACR, req.ACR) {", "\tif false {", run("CheckEvidence|ApprovalsNeedTheirEvidence", "./policy", "./workflows")),
    ("evidence: the authentication's age", "policy/evidence.go", "\tif age := now.Sub(at); age > req.MaxAge() {", "\tif age := now.Sub(at); false && age > req.MaxAge() {", run("CheckEvidence|ApprovalsNeedTheirEvidence", "./policy", "./workflows")),
    ("evidence: a trusted issuer", "policy/evidence.go", "\tif !slices.Contains(issuers, e.Issuer) {", "\tif false {", run("CheckEvidence|DecisionsShortOfEvidence", "./policy", "./approvals")),
    ("evidence: signed with the decision", "policy/signature.go", "KeyID: a.KeyID, Evidence: a.Evidence, Edit: a.Edit})", "KeyID: a.KeyID, Edit: a.Edit})", run("EvidenceIsSigned|ApprovalSignatures", "./policy")),
    ("provider: a locked account's code is not checked", "idp/login.go", "\tif acc.locked {\n\t\tp.mu.Unlock()\n\t\tp.refuse(w, r, a, user)\n\t\treturn\n\t}\n", "", run("LockoutEndsAuthority", "./idp")),
    ("provider: five wrong codes lock", "idp/login.go", "acc.locked = acc.failures >= MaxFactorFailures", "acc.locked = false", run("LockoutEndsAuthority", "./idp", "./approvals")),
    ("provider: a code is good once", "idp/users.go", "subtle.ConstantTimeCompare([]byte(code), []byte(want)) == 1 && s > a.lastStep {", "subtle.ConstantTimeCompare([]byte(code), []byte(want)) == 1 {", run("StepUpAsksForTheCode", "./idp")),
    ("credential: a session claims no more than its sign-in", "activities/call.go", "\tif why := claimsBeyond(in, role, stores); why != \"\" {", "\tif why := claimsBeyond(in, role, stores); false && why != \"\" {", run("CredentialsAreBound", "./workflows")),
    ("credential: demo credentials only in dev mode", "activities/call.go", "\tif demo && !a.DevMode {", "\tif false {", run("CredentialsAreBound", "./workflows")),
    ("credential: the tool's requester tier", "activities/call.go", "if in.RequiredTier != \"\" && (acr == nil || !policy.Satisfies(*acr, in.RequiredTier)) {", "if false {", run("CredentialsAreBound", "./workflows")),
    ("one card per intent", "activities/admission.go", "\t\tif held != nil {", "\t\tif false && held != nil {", run("OneCardPerIntent", "./workflows")),
    ("a card's end releases its intent", "activities/card.go", "_, err = db.Exec(ctx, `DELETE FROM pending_intents WHERE workflow_id = $1 AND run_id = $2`, wf, run)", "err = nil", run("OneCardPerIntent", "./workflows")),
    ("a rejection's note reaches the model", "workflows/approval.go", "c.note, _ = json.Marshal(map[string]string{\"note\": note})", "_ = note", run("ReasonsReachBothSides", "./workflows")),
    ("an escalated card takes the next role up", "workflows/decisions.go", "if g.escalated && r.a.Approver.Role == g.escalateTo {", "if false {", run("UnansweredCardsEscalate", "./workflows")),
    ("an unanswered card escalates", "workflows/decisions.go", "\t\tif g.escalation != nil && (g.chained || g.escalateTo != \"\") {", "\t\tif false {", run("UnansweredCardsEscalate", "./workflows")),
    ("two-person: a card above the quorum's value needs several approvals", "policy/policy.go", "\t\t\tv.Approvals = n\n", "\t\t\t_ = n\n", run("Quorums|TwoPersonRule", "./policy", "./workflows")),
    ("two-person: one approval is not enough", "workflows/decisions.go", "if r.a.Decision == policy.Approve && len(g.approvals)+1 < g.need {", "if false {", run("TwoPersonRule", "./workflows")),
    ("two-person: the requester never counts", "workflows/decisions.go", "\t\tif r.a.Approver.UserID == g.requester {", "\t\tif false {", run("TwoPersonRule", "./workflows")),
    ("two-person: one person counts once", "workflows/decisions.go", "\t\t\tif a.Approver.UserID == r.a.Approver.UserID {", "\t\t\tif false && a.Approver.UserID == r.a.Approver.UserID {", run("TwoPersonRule", "./workflows")),
    ("edit: a card takes a bounded number of edits", "workflows/edit.go", "\tif g.version > MaxEdits {", "\tif false {", run("EditsAreBounded", "./workflows")),
    ("edit: the old args hash is refused after an edit", "workflows/edit.go", "g.role, g.hash, g.evidence, g.need, g.approvals, g.action = nv.ApproverRole, hash,", "g.role, g.hash, g.evidence, g.need, g.approvals, g.action = nv.ApproverRole, g.hash,", run("EditThenApprove", "./workflows")),
    ("edit: the edited args run the chain again", "workflows/edit.go", "\tcase !nv.Allowed():\n\t\treturn refuse(nv.Code, nv.Message)", "\tcase false:\n\t\treturn refuse(nv.Code, nv.Message)", run("EditThenApprove", "./workflows")),
    ("edit: only the row's editable fields change", "policy/approval.go", "\t\tif !slices.Contains(editable, k) {", "\t\tif false {", run("ApplyEdit|EditThenApprove", "./policy", "./workflows")),
    ("edit: the signature covers the new values", "policy/signature.go", "Evidence: a.Evidence, Edit: a.Edit})", "Evidence: a.Evidence})", run("EditsAreSignedAndShaped", "./policy")),
    ("edit: limits count an edited card at its new value", "activities/admission.go", "THEN coalesce((SELECT e.value_cents FROM audit_log e", "THEN coalesce((SELECT NULL::bigint FROM audit_log e", run("EditsCountAgainstTheLimits", "./workflows")),
    ("edit: an edit's own limit check counts the card once", "activities/revise.go", "u.Cents = max(0, u.Cents-in.PrevValueCents)", "u.Cents = max(0, u.Cents)", run("EditsCountAgainstTheLimits", "./workflows")),
    ("webhook: the signature covers the body", "activities/webhook.go", "\tm.Write(body)\n", "", run("WebhookDeliveries", "./activities")),
    ("webhook: card events go out when a webhook was in force", "workflows/approval.go", "\t\tc.hooks = held.Trust.Hooks\n", "\t\tc.hooks = false && held.Trust.Hooks\n", run("WebhookTellsApprovers", "./workflows")),
    ("webhook: a failed delivery is retried", "workflows/approval.go", "MaximumInterval: 10 * time.Second,\n\t\t\tNonRetryableErrorTypes: []string{activities.ErrWebhookRefused", "MaximumInterval: 10 * time.Second, MaximumAttempts: 1,\n\t\t\tNonRetryableErrorTypes: []string{activities.ErrWebhookRefused", run("WebhookTellsApprovers", "./workflows")),
    ("mcp: JSON-RPC batches are refused", "mcpgate/server.go", "if b, err := br.Peek(1); err == nil && b[0] == '[' {", "if b, err := br.Peek(1); err == nil && b[0] == '[' && false {", run("MCPHostileInput", "./mcpgate")),
    ("mcp: the session's stores come from the token", "mcpgate/server.go", "StoreIDs: id.StoreIDs, SessionID: conv,", "StoreIDs: append(id.StoreIDs, 118), SessionID: conv,", run("TestMCPServer", "./mcpgate")),
    ("mcp: an MCP session belongs to the person who opened it", "mcpgate/server.go", "UserID: id.Issuer + \"|\" + id.Subject,", "UserID: id.Issuer,", run("MCPHostileInput", "./mcpgate")),
    ("mcp: requests from another site are refused", "mcpgate/server.go", "bearer(http.NewCrossOriginProtection().Handler(noBatches(streamable)))", "bearer(noBatches(streamable))", run("MCPHostileInput", "./mcpgate")),
    ("mcp: the status tool reads only the caller's calls", "mcpgate/server.go", "json.Unmarshal(by.GetData(), &who) != nil || who != id.UserID {", "json.Unmarshal(by.GetData(), &who) != nil || (false && who != id.UserID) {", run("MCPCardsWaitForAPerson", "./mcpgate")),
    ("codec: the endpoint demands its token", "codec/codec.go", "if token != \"\" && subtle.ConstantTimeCompare([]byte(r.Header.Get(\"Authorization\")), want) != 1 {", "if token != \"\" && subtle.ConstantTimeCompare([]byte(r.Header.Get(\"Authorization\")), want) != 1 && false {", run("EndpointAuthorization", "./codec")),
    ("codec: the worker refuses an open endpoint outside dev mode", "internal/config/config.go", "\tcase c.CodecAuthToken == \"\" && !c.DevMode:", "\tcase false:", run("ServicesRefuseDemoSecrets", "./internal/startup")),
    ("sign-in: a refused credential waits for a sign-in instead of ending", "workflows/toolcall.go", "\t\tif c.needSignIn(code, refusalResult(err, nil)) {", "\t\tif false {", run("SignInRoundsAreBounded", "./workflows")),
    ("sign-in: the credential signal is read strictly", "workflows/signin.go", "in, err := policy.DecodeStrict[CredentialInput](raw, 1<<10)", "var in CredentialInput\n\terr := json.Unmarshal(raw, &in)", run("SignInResumesTheCall", "./workflows")),
    ("sign-in: the wait has a deadline", "workflows/signin.go", "\t\tsel.AddFuture(c.signInTimer, func(workflow.Future) { expired = true })\n", "", run("SignInWaitExpires", "./workflows")),
    ("card UI: a lock ends sessions by back-channel logout", "approvals/auth.go", "DELETE FROM approver_sessions WHERE issuer = $1 AND subject = $2 RETURNING user_id", "SELECT user_id FROM approver_sessions WHERE issuer = $1 AND subject = $2", run("LockoutEndsAuthority", "./approvals")),
    ("card UI: sign-out deletes the session", "approvals/auth.go", "`DELETE FROM approver_sessions WHERE id_hash = $1 RETURNING id_token`, sess.idHash", "`SELECT id_token FROM approver_sessions WHERE id_hash = $1`, sess.idHash", run("SignOutRevokes", "./approvals")),
    ("card UI: sign-out ends the provider's session too", "approvals/auth.go", "if end := s.Auth.endSessionURL(deref(idToken)); end != \"\" {", "if end := s.Auth.endSessionURL(deref(idToken)); false && end != \"\" {", run("SignOutRevokes", "./approvals")),
    ("card UI: a card short of evidence sends the approver to step up", "approvals/server.go", "\tif c.Pending && !s.satisfies(sess, c.Evidence) {", "\tif false {", run("StepUpForTheBigCard", "./approvals")),
    ("the sanitizer normalises before matching", "sanitize/sanitize.go", "\tif isPlainASCII(s) {\n\t\treturn s", "\tif true {\n\t\treturn s", run("Bypasses|DisguisedSecrets", "./sanitize", "./workflows")),
    ("a task's note is redacted at decode", "policy/decode.go", "f.SetString(sanitize.Text(f.String()))", "f.SetString(f.String())", run("MangroveToolsAsTheDomain|PlanAgrees", "./workflows", "./policy")),
    # Issue 16: the plan decodes the common call without reflection; it must
    # never accept what the reflective path refuses, nor differ in value.
    ("plan: a task's note is redacted", "policy/plan.go", "v.SetString(sanitize.Text(v.String()))", "v.SetString(sanitize.Text(v.String())[:0] + v.String())", run("MangroveToolsAsTheDomain|Plan", "./workflows", "./policy")),
    ("plan: a key given twice", "policy/plan.go", "if fi < 0 || seen&(1<<fi) != 0 {", "if fi < 0 {", run("Plan|Decode", "./policy")),
    ("plan: the tags' rules", "policy/plan.go", "if !f.rules.pass(f.kind, v) {", "if false {", run("Plan|Decode", "./policy")),
    ("plan: strings count runes, as the validator does", "policy/plan.go", "size = int64(utf8.RuneCountInString(s))", "size = int64(len(s))", run("Plan", "./policy")),
    ("plan: encoding/json's HTML escapes", "policy/plan.go", "case c < 0x20, c == '\"', c == '\\\\', c == '<', c == '>', c == '&':", "case c < 0x20, c == '\"', c == '\\\\':", run("Plan", "./policy")),
    ("plan: a rule it does not know leaves the type to the validator", "policy/plan.go", "\t\tdefault:\n\t\t\treturn r, false\n\t\t}", "\t\tdefault:\n\t\t}", run("Plan", "./policy")),
    ("tools keep the domain's bounds", "policy/tools.go", "validate:\"required,min=1,max=500\"", "validate:\"required,min=1,max=10000\"", run("SchemasAreTheDomains", "./policy")),
    ("the sanitizer redacts keys", "sanitize/sanitize.go", "\t\t\tkey := Text(k)\n", "\t\t\tkey := k\n", run("Bypasses", "./sanitize")),
    ("record: a repeat of a written event writes nothing", "activities/card.go", "\tif !inserted {\n\t\treturn nil\n\t}\n", "\tif false && !inserted {\n\t\treturn nil\n\t}\n", run("CallTool", "./activities")),
    ("the call's activity writes its outcome", "activities/call.go", "\tif in.After != nil {\n", "\tif false && in.After != nil {\n", run("CallTool", "./activities")),
    ("an outcome the call could not write is written by the workflow", "workflows/toolcall.go", "if spec.Tier != policy.TierRead && !res.Recorded {", "if spec.Tier != policy.TierRead && false {", run("CannotRecordIt", "./workflows")),
    ("a chained expiry keeps the card's expiry", "workflows/decisions.go", "left := g.expires.Sub(workflow.Now(g.timerCtx))", "left := g.expires.Sub(g.upAt)", run("UnansweredCardsEscalate", "./workflows")),
    ("an edited card still expires", "workflows/decisions.go", "g.escalation != nil && (g.chained || g.escalateTo != \"\")", "g.escalation != nil && g.escalateTo != \"\"", run("AnEditedCardStillExpires", "./workflows")),
    ("a retried task's pending card takes its expiry", "activities/card.go", "THEN EXCLUDED.expires_at ELSE", "THEN pending_action.expires_at ELSE", run("RetriedExpiry", "./activities")),
]

def check():
    """Every guard is found exactly once: a renamed guard fails lint in a
    second rather than the proof at the end of CI."""
    stale = [f"{name}: not found exactly once in {path}" for name, path, guard, _, _ in GUARDS
             if open(os.path.join(ROOT, path)).read().count(guard) != 1]
    for s in stale:
        print(f"FAIL  {s}; update scripts/prove.py")
    sys.exit(1 if stale else 0)


def main():
    if sys.argv[1:] == ["--check"]:
        check()
    only = sys.argv[1:]
    env = dict(os.environ, TOOLGATE_REQUIRE_SERVICES="1")
    failures = 0
    for name, path, guard, removed, cmd in GUARDS:
        if only and not any(o in name for o in only):
            continue
        full = os.path.join(ROOT, path)
        original = open(full, "rb").read()
        digest = hashlib.sha256(original).hexdigest()
        text = original.decode()
        if text.count(guard) != 1:
            print(f"FAIL  {name}: the guard is not found exactly once in {path}; update scripts/prove.py")
            failures += 1
            continue
        try:
            open(full, "w").write(text.replace(guard, removed))
            r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        finally:
            open(full, "wb").write(original)
        if hashlib.sha256(open(full, "rb").read()).hexdigest() != digest:
            print(f"FAIL  {name}: {path} was not restored")
            sys.exit(2)
        if "[build failed]" in r.stdout or "[setup failed]" in r.stdout:
            print(f"FAIL  {name}: the mutant does not compile, so it proves nothing; fix scripts/prove.py")
            failures += 1
        elif r.returncode == 0:
            print(f"FAIL  {name}: the suite passed with the guard removed")
            failures += 1
        else:
            print(f"ok    {name}: removed, suite failed, {path} restored")
    tried = [g for g in GUARDS if not only or any(o in g[0] for o in only)]
    print(f"{len(tried) - failures} of {len(tried)} guards proved, {failures} unnoticed")
    sys.exit(1 if failures else 0)

main()
