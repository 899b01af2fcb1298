package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
)

// AdmitInput asks for step 7 on the verdict the workflow recorded, and the
// decision's audit row.
type AdmitInput struct {
	// Verdict is the workflow's recorded verdict of steps 0-6: the limits it
	// names are the ones counted.
	Verdict    policy.Verdict `json:"verdict"`
	Tool       string         `json:"tool"`
	Session    policy.Session `json:"session"`
	ValueCents *int64         `json:"valueCents,omitempty"`
	// Action, when set, is what will run (the dry run's choices included);
	// the decision row records it instead of the model's args.
	Action json.RawMessage `json:"action,omitempty"`
	// Claim claims the call for this run before anything is counted.
	Claim *Claim `json:"claim,omitempty"`
	// Intent, on an approve verdict, claims its intent (policy.Intent) for
	// this run's card, for TTLSeconds until the card says its own expiry.
	Intent     string `json:"intent,omitempty"`
	TTLSeconds int64  `json:"ttlSeconds,omitempty"`
	// CredentialRef is the credential the call acts with (the session's,
	// or one a sign-in sent since); on an approve verdict, admission names
	// the person behind it.
	CredentialRef string `json:"credentialRef,omitempty"`
}

// PendingCard is the card already waiting for an equivalent call: when it
// expires, and its workflow ID only for the requester whose card it is
// (another person's call, and so their conversation, is never named).
type PendingCard struct {
	WorkflowID string `json:"pendingWorkflowId,omitempty"`
	ExpiresAt  string `json:"expiresAt"`
	// person is the sign-in behind the credential of who asked for the
	// card (pending_action's requester_issuer and requester_subject), when
	// the card names one.
	person signoff.Person
}

// askedBy reports whether the card was asked for by the person (nil when
// their credential names none) now asking again: one issuer and subject,
// whatever the user IDs; a card or a credential that names no person is
// nobody's to be told of.
func (p PendingCard) askedBy(person *signoff.Person) bool {
	return person != nil && person.Known() && *person == p.person
}

// AdmitResult is step 7's answer: the decision that stands (the recorded
// one, or a rate_limit denial). Its JSON names are the verdict's, so calls
// recorded when admission returned a whole verdict replay.
type AdmitResult struct {
	Decision policy.Decision `json:"decision"`
	Code     policy.Code     `json:"code"`
	Message  string          `json:"message"`
	Step     policy.Step     `json:"step"`
	// Pending names the equivalent card when Code is already_pending.
	Pending *PendingCard `json:"pending,omitempty"`
	// Unverified says what the caller lacks when Code is step_up_required.
	Unverified *Unverified `json:"unverified,omitempty"`
	// Requester, on a card, is the person whose sign-in stands behind the
	// call's credential (its issuer and subject in the vault), so the
	// two-person rule knows them under any user ID; nil when the vault
	// names nobody.
	Requester *signoff.Person `json:"requester,omitempty"`
}

// Allowed reports whether the call was admitted.
func (r AdmitResult) Allowed() bool { return r.Decision != policy.DecisionDeny }

// Admit is step 7: it counts, from audit_log, the usage of each limit the
// workflow's recorded verdict names, judges it with policy.Admit, and writes
// the decision row in the same transaction, holding an advisory lock per
// limit bucket: N concurrent calls can never pass a limit of N-1. It never
// re-runs steps 0-6; the workflow decided those once. A retry returns the
// decision already recorded for this run.
func (a *Activities) Admit(ctx context.Context, in AdmitInput) (AdmitResult, error) {
	wf, run := workflowIDs(ctx)
	return a.AdmitRun(ctx, wf, run, in)
}

// AdmitRun is Admit for a named workflow run (tests and tools that admit
// outside an activity).
func (a *Activities) AdmitRun(ctx context.Context, wf, run string, in AdmitInput) (AdmitResult, error) {
	pre := in.Verdict
	tx, err := a.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return AdmitResult{}, fmt.Errorf("admit: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a committed tx ignores it
	sr, err := claim(ctx, tx, wf, run, in.Claim, in.Tool, in.Session.UserID)
	if err != nil {
		return AdmitResult{}, fmt.Errorf("admit: %w", err)
	}
	if sr != nil {
		_ = tx.Rollback(ctx)
		return AdmitResult{}, a.secondRun(ctx, wf, sr)
	}

	locking := time.Now()
	if err := lockKeys(ctx, tx, limitKeys(pre.Limits)); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: %w", err)
	}
	waited := time.Since(locking)
	// Who asks (the person a per-user limit counts, a per-requester intent
	// is keyed by and the card names), and the decision a previous attempt
	// committed, in one read.
	who, prior, err := requesterAndDecision(ctx, tx, wf, run, in)
	if err != nil {
		return AdmitResult{}, err
	}
	if prior != nil {
		if prior.Decision == policy.DecisionApprove {
			prior.Requester = who
		}
		return *prior, nil
	}
	locking = time.Now()
	if err := lockKeys(ctx, tx, personKeys(pre.Limits, who)); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: %w", err)
	}
	if len(pre.Limits) > 0 {
		a.timing(ctx, MetricAdmissionLockWait, in.Tool, waited+time.Since(locking))
	}

	// The caller's verified tier, read in the transaction that writes the
	// decision: a call refused for it takes no card, intent or limit.
	if short, err := a.shortOf(ctx, tx, in.Tool, pre.Verified, in.CredentialRef, in.Session.UserID, in.Session.ConversationID); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: %w", err)
	} else if short != nil {
		return a.unverified(ctx, tx, wf, run, in, who, *short)
	}

	if in.Intent != "" && pre.Decision == policy.DecisionApprove {
		in.Intent = personalIntent(in, who)
		held, err := claimIntent(ctx, tx, wf, run, in.Intent, in.TTLSeconds, a.running)
		if err != nil {
			return AdmitResult{}, err
		}
		if held != nil {
			return a.alreadyPending(ctx, tx, wf, run, in, who, *held)
		}
	}

	usage := make([]policy.Usage, 0, len(pre.Limits))
	counting := time.Now()
	for _, k := range pre.Limits {
		u, err := countUsage(ctx, tx, k, who)
		if err != nil {
			return AdmitResult{}, err
		}
		usage = append(usage, u)
	}
	if len(pre.Limits) > 0 {
		a.timing(ctx, MetricAdmissionCount, in.Tool, time.Since(counting))
	}
	v := policy.Admit(pre, in.ValueCents, usage)
	decided := EventAllowed
	switch v.Decision {
	case policy.DecisionDeny:
		decided = EventDenied
	case policy.DecisionApprove:
		decided = EventNeedsApproval
	}
	row := AuditInput{Key: "decision", Event: decided, Reason: v.Code, Tool: in.Tool, Session: in.Session,
		Args: pre.Args, Resource: pre.Resource, Value: in.ValueCents, Message: v.Message, Requester: who}
	if len(in.Action) > 0 {
		row.Args = in.Action
	}
	if _, err := a.insertAudit(ctx, tx, wf, run, row); err != nil {
		return AdmitResult{}, err
	}
	if v.Decision == policy.DecisionDeny {
		if err := a.discardFactor(ctx, tx, in); err != nil {
			return AdmitResult{}, err
		}
	}
	if v.Decision != policy.DecisionApprove && in.Intent != "" {
		// A limit refused it: no card goes up, so the intent is not held.
		if _, err := tx.Exec(ctx, `DELETE FROM pending_intents WHERE intent = $1 AND workflow_id = $2 AND run_id = $3`, in.Intent, wf, run); err != nil {
			return AdmitResult{}, fmt.Errorf("admit: release intent: %w", err)
		}
	}
	res := AdmitResult{Decision: v.Decision, Code: v.Code, Message: v.Message, Step: v.Step}
	if v.Decision == policy.DecisionApprove {
		res.Requester = who
	}
	if err := tx.Commit(ctx); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: commit: %w", err)
	}
	return res, nil
}

// timing records one of admission's timings, by tool, to the worker's
// metrics when admission runs as an activity.
func (a *Activities) timing(ctx context.Context, name, tool string, d time.Duration) {
	if activity.IsActivity(ctx) {
		activity.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": clean(tool)}).Timer(name).Record(d)
	}
}

// personalIntent is the intent a call claims. A tool whose intent is each
// requester's own (recorded facts: PerRequester) keys it by the person
// behind the requester's credential (who), the issuer and subject of their
// sign-in, where the vault names one: one person under two user IDs asks
// for one thing, and two people under one user ID for two. Else it is the
// workflow's, keyed by user ID.
func personalIntent(in AdmitInput, who *signoff.Person) string {
	if in.Verdict.Tool == nil || !in.Verdict.Tool.PerRequester || who == nil {
		return in.Intent
	}
	action := in.Verdict.Args
	if len(in.Action) > 0 {
		action = in.Action
	}
	return intentOf(in.Tool, in.Verdict.Resource, action, *who, in.Intent)
}

// intentOf is a per-requester intent keyed by the person p (never a user
// ID: "person:" holds a byte no user ID does), or else when the action
// cannot be read.
func intentOf(tool string, resource policy.ResourceRef, action json.RawMessage, p signoff.Person, orElse string) string {
	k, err := policy.Intent(tool, resource, action, "person:"+p.Issuer+"\x00"+p.Subject)
	if err != nil {
		return orElse
	}
	return k
}

// requesterAndDecision reads the person whose sign-in issued the call's
// credential (a revoked one names them still; nil when the vault names
// nobody) and the decision row a previous attempt of this run committed
// (the truth, since counting again would count that row itself; nil when
// there is none), in one round trip.
func requesterAndDecision(ctx context.Context, tx pgx.Tx, wf, run string, in AdmitInput) (*signoff.Person, *AdmitResult, error) {
	ref := in.CredentialRef
	if ref == "" {
		ref = in.Session.CredentialRef
	}
	var p signoff.Person
	var event, reason, message *string
	var result []byte
	if err := tx.QueryRow(ctx, `SELECT coalesce(c.issuer, ''), coalesce(c.subject, ''), d.event, d.reason, coalesce(d.message, ''), d.result
		FROM (VALUES (1)) AS one (x)
		LEFT JOIN vault.credentials c ON c.ref = $3 AND c.user_id = $4
		LEFT JOIN audit_log d ON d.workflow_id = $1 AND d.run_id = $2 AND d.event_key = 'decision'`, wf, run, ref, in.Session.UserID).
		Scan(&p.Issuer, &p.Subject, &event, &reason, &message, &result); err != nil {
		return nil, nil, fmt.Errorf("admit: the requester's sign-in and a recorded decision: %w", err)
	}
	var who *signoff.Person
	if p.Known() {
		who = &p
	}
	if event == nil {
		return who, nil, nil
	}
	r := recorded(*event, *reason, *message, result)
	return who, &r, nil
}

// claimIntent claims an intent for this run, or returns the card that
// holds it. The primary key makes it race-free: of two equivalent calls
// admitted together, the second waits for the first's transaction and then
// finds its claim. A claim whose call no longer runs (an operator
// terminated it, so its card never said it ended) is taken over.
func claimIntent(ctx context.Context, tx pgx.Tx, wf, run, intent string, ttl int64, running func(context.Context, string, string) bool) (*PendingCard, error) {
	if ttl <= 0 {
		ttl = 1800
	}
	var got string
	err := tx.QueryRow(ctx, `INSERT INTO pending_intents (intent, workflow_id, run_id, expires_at)
		VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
		ON CONFLICT (intent) DO UPDATE SET workflow_id = EXCLUDED.workflow_id, run_id = EXCLUDED.run_id, expires_at = EXCLUDED.expires_at
		  WHERE pending_intents.expires_at <= clock_timestamp()
		     OR (pending_intents.workflow_id = EXCLUDED.workflow_id AND pending_intents.run_id = EXCLUDED.run_id)
		RETURNING workflow_id`, intent, wf, run, ttl).Scan(&got)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("admit: claim intent: %w", err)
	}
	var p PendingCard
	var holderRun string
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT i.workflow_id, i.run_id, i.expires_at, coalesce(a.requester_issuer, ''), coalesce(a.requester_subject, '')
		FROM pending_intents i LEFT JOIN pending_action a USING (workflow_id)
		WHERE i.intent = $1 FOR UPDATE OF i`, intent).Scan(&p.WorkflowID, &holderRun, &at, &p.person.Issuer, &p.person.Subject); err != nil {
		return nil, fmt.Errorf("admit: read the intent's card: %w", err)
	}
	if running != nil && !running(ctx, p.WorkflowID, holderRun) {
		if _, err := tx.Exec(ctx, `UPDATE pending_intents SET workflow_id = $2, run_id = $3, expires_at = clock_timestamp() + make_interval(secs => $4) WHERE intent = $1`,
			intent, wf, run, ttl); err != nil {
			return nil, fmt.Errorf("admit: take over the intent: %w", err)
		}
		return nil, nil
	}
	p.ExpiresAt = at.UTC().Format(time.RFC3339)
	return &p, nil
}

// running reports whether a workflow run is still running. Without a
// Temporal client, or when Temporal does not answer, it says yes: the card
// stands until its expiry, which is the safe side (one card, not two).
func (a *Activities) running(ctx context.Context, wf, run string) bool {
	if a.Temporal == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := a.Temporal.DescribeWorkflow(ctx, wf, run)
	var missing *serviceerror.NotFound
	if errors.As(err, &missing) {
		return false
	}
	if err != nil {
		return true
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// alreadyPending denies an equivalent call, and nothing is counted against
// the limits. The message says a card is waiting and until when; the
// result names the card's workflow ID only to the person who asked for
// it, by the issuer and subject of the sign-in behind their credential,
// never by user ID (a provider's display name, which two people may
// share), and never to another person.
func (a *Activities) alreadyPending(ctx context.Context, tx pgx.Tx, wf, run string, in AdmitInput, who *signoff.Person, held PendingCard) (AdmitResult, error) {
	asker := who
	if asker != nil {
		asker = &signoff.Person{Issuer: clean(asker.Issuer), Subject: clean(asker.Subject)} // as the card row keeps them
	}
	if !held.askedBy(asker) {
		held.WorkflowID = ""
	}
	msg := sentences.Say(sentences.AlreadyPending, held.ExpiresAt)
	result, _ := json.Marshal(held)
	row := AuditInput{Key: "decision", Event: EventDenied, Reason: policy.CodeAlreadyPending, Tool: in.Tool, Session: in.Session,
		Args: in.Verdict.Args, Resource: in.Verdict.Resource, Value: in.ValueCents, Message: msg, Result: result, Requester: who}
	if len(in.Action) > 0 {
		row.Args = in.Action
	}
	if _, err := a.insertAudit(ctx, tx, wf, run, row); err != nil {
		return AdmitResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: commit: %w", err)
	}
	return AdmitResult{Decision: policy.DecisionDeny, Code: policy.CodeAlreadyPending, Message: msg, Step: policy.StepRateLimit, Pending: &held}, nil
}

// unverified denies a call whose caller holds less than its row's tier,
// with its decision row; nothing is counted against the limits.
func (a *Activities) unverified(ctx context.Context, tx pgx.Tx, wf, run string, in AdmitInput, who *signoff.Person, u Unverified) (AdmitResult, error) {
	msg := u.Message(a.Policy.System(in.Tool))
	result, _ := json.Marshal(u)
	if err := a.discardFactor(ctx, tx, in); err != nil {
		return AdmitResult{}, err
	}
	row := AuditInput{Key: "decision", Event: EventDenied, Reason: policy.CodeStepUpRequired, Tool: in.Tool, Session: in.Session,
		Args: in.Verdict.Args, Resource: in.Verdict.Resource, Value: in.ValueCents, Message: msg, Result: result, Requester: who}
	if _, err := a.insertAudit(ctx, tx, wf, run, row); err != nil {
		return AdmitResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: commit: %w", err)
	}
	return AdmitResult{Decision: policy.DecisionDeny, Code: policy.CodeStepUpRequired, Message: msg, Step: policy.StepRateLimit, Unverified: &u}, nil
}

// recorded rebuilds the decision a previous attempt committed.
func recorded(event, reason, message string, result []byte) AdmitResult {
	r := AdmitResult{Code: policy.Code(reason), Message: message, Decision: policy.DecisionAllow}
	switch Event(event) {
	case EventDenied:
		r.Decision, r.Step = policy.DecisionDeny, policy.StepRateLimit
		var p PendingCard
		if r.Code == policy.CodeAlreadyPending && json.Unmarshal(result, &p) == nil {
			r.Pending = &p
		}
		var u Unverified
		if r.Code == policy.CodeStepUpRequired && json.Unmarshal(result, &u) == nil {
			r.Unverified = &u
		}
	case EventNeedsApproval:
		r.Decision = policy.DecisionApprove
	}
	return r
}

// windowStart is where a limit's rolling window begins: the admitting
// transaction's start, less the window. now() is fixed for the transaction,
// so the index ranges over the window alone, whatever history the bucket
// has kept (clock_timestamp() is volatile, and a scan must then read every
// row of the bucket to filter it). It is never later than the instant the
// count runs (after the bucket's lock), so a window that starts there
// holds every row a later start would: the count errs toward refusing.
const windowStart = `now() - make_interval(secs => $3)`

// countUsage counts what a limit bucket has admitted in its rolling window.
// Calls that were admitted count; so does value waiting for approval.
func countUsage(ctx context.Context, tx pgx.Tx, k policy.LimitKey, who *signoff.Person) (policy.Usage, error) {
	var u policy.Usage
	sql, args, err := UsageQuery(k, who)
	if err != nil {
		return u, err
	}
	if err := tx.QueryRow(ctx, sql, args...).Scan(&u.Calls, &u.Cents); err != nil {
		return u, fmt.Errorf("admit: count %s: %w", k.Key, err)
	}
	return u, nil
}

// countUsageExcept is countUsage leaving out one run's calls (an edited
// card's own).
func countUsageExcept(ctx context.Context, tx pgx.Tx, k policy.LimitKey, who *signoff.Person, wf, run string) (policy.Usage, error) {
	var u policy.Usage
	sql, args, err := usageQuery(k, who)
	if err != nil {
		return u, err
	}
	sql = strings.ReplaceAll(sql, exceptRun, fmt.Sprintf(` AND NOT (a.workflow_id = $%d AND a.run_id = $%d)`, len(args)+1, len(args)+2))
	if err := tx.QueryRow(ctx, sql, append(args, wf, run)...).Scan(&u.Calls, &u.Cents); err != nil {
		return u, fmt.Errorf("revise: count %s: %w", k.Key, err)
	}
	return u, nil
}

// A per-user limit counts a person: the issuer and subject of the sign-in
// behind the call's credential (who), never its user ID alone, which a
// provider lets two people share and one person hold twice (OIDC Core
// 5.7). A row that names no person (its credential named none, or it was
// written before migration 033) counts against every call under its user
// ID, so a call that names a person counts its own rows and those. A call
// that names nobody counts every row under its user ID, named or not: a
// person who signs out never starts their limit afresh.
const (
	personRows  = `a.tool = $1 AND a.requester_issuer = $4 AND a.requester_subject = $5`
	unnamedRows = `a.tool = $1 AND a.user_id = $2 AND a.requester_subject IS NULL`
	userRows    = `a.tool = $1 AND a.user_id = $2`
	// exceptRun is where a count that leaves one run out says so.
	exceptRun = `{except}`
)

// UsageQuery is the query that counts a limit bucket's window, and its
// values, from limit_usage (migration 029): the calls the log admitted that
// still hold what they reserved, each at its current value, kept by a
// trigger on the log's insert. who is the person asking (nil when their
// credential names none), whose rows a per-user limit counts. Admission
// runs it; tests read its plan and its counts.
func UsageQuery(k policy.LimitKey, who *signoff.Person) (string, []any, error) {
	sql, args, err := usageQuery(k, who)
	return strings.ReplaceAll(sql, exceptRun, ""), args, err
}

func usageQuery(k policy.LimitKey, who *signoff.Person) (string, []any, error) {
	const window = ` AND a.at > ` + windowStart + exceptRun
	switch k.Scope {
	case policy.PerResource:
		return `SELECT count(*), coalesce(sum(a.value_cents), 0)::bigint FROM limit_usage a
			WHERE a.tool = $1 AND a.resource_kind = $2 AND a.resource_id = $4` + window,
			[]any{k.Tool, k.Resource.Kind, int64(k.Window), k.Resource.ID}, nil
	case policy.PerUser:
		p, named := person(who)
		if !named {
			return `SELECT count(*), coalesce(sum(a.value_cents), 0)::bigint FROM limit_usage a
			WHERE ` + userRows + window, []any{k.Tool, k.UserID, int64(k.Window)}, nil
		}
		// Two index ranges, summed: the person's rows, and the user ID's
		// rows that name nobody.
		return `SELECT sum(n)::bigint, sum(c)::bigint FROM (
			SELECT count(*) n, coalesce(sum(a.value_cents), 0) c FROM limit_usage a WHERE ` + personRows + window + `
			UNION ALL
			SELECT count(*), coalesce(sum(a.value_cents), 0) FROM limit_usage a WHERE ` + unnamedRows + window + `) u`,
			[]any{k.Tool, k.UserID, int64(k.Window), p.Issuer, p.Subject}, nil
	}
	return "", nil, fmt.Errorf("admit: unknown limit scope %q", k.Scope)
}

// person is who as the log keeps it, and whether it names one: exactly as
// the vault holds it (text the sign-in wrote), never cleaned, since two
// subjects that clean to one text would be one person's limit.
func person(who *signoff.Person) (signoff.Person, bool) {
	if who == nil || !who.Known() {
		return signoff.Person{}, false
	}
	return *who, true
}

// UsageFromLog is what UsageQuery must count, read from the log itself:
// the window's admitted rows of the bucket, less the calls that gave back
// what they reserved (a card rejected or expired, a call released), each
// card at its latest edit's value. Tests compare the two; nothing admits
// by it, since it reads every counted row's run again.
func UsageFromLog(k policy.LimitKey, who *signoff.Person) (string, []any, error) {
	const count = `SELECT count(*), coalesce(sum(CASE WHEN a.event = 'needs_approval' THEN coalesce((SELECT e.value_cents FROM audit_log e
			  WHERE e.workflow_id = a.workflow_id AND e.run_id = a.run_id AND e.event = 'edited' ORDER BY e.id DESC LIMIT 1), a.value_cents)
			  ELSE a.value_cents END), 0)::bigint FROM audit_log a`
	const freed = `
			  AND NOT EXISTS (SELECT 1 FROM audit_log d WHERE d.workflow_id = a.workflow_id AND d.run_id = a.run_id
			                  AND d.event IN ('rejected', 'expired', 'released', 'withdrawn'))`
	// Read from the row's JSON, so a log from before migration 033, whose
	// rows name nobody, is counted too (an upgrade's test counts it).
	const unnamed = `a.user_id = $2 AND (coalesce(to_jsonb(a) ->> 'requester_issuer', '') = '' OR coalesce(to_jsonb(a) ->> 'requester_subject', '') = '')`
	admitted := ` AND a.event IN ('allowed', 'needs_approval') AND a.at > ` + windowStart + freed
	switch k.Scope {
	case policy.PerResource:
		return count + `
			WHERE a.tool = $1 AND a.resource_kind = $2 AND a.resource_id = $4` + admitted, []any{k.Tool, k.Resource.Kind, int64(k.Window), k.Resource.ID}, nil
	case policy.PerUser:
		if p, named := person(who); named {
			return count + `
			WHERE a.tool = $1 AND (a.requester_issuer = $4 AND a.requester_subject = $5 OR ` + unnamed + `)` + admitted,
				[]any{k.Tool, k.UserID, int64(k.Window), p.Issuer, p.Subject}, nil
		}
		return count + `
			WHERE a.tool = $1 AND a.user_id = $2` + admitted, []any{k.Tool, k.UserID, int64(k.Window)}, nil
	}
	return "", nil, fmt.Errorf("admit: unknown limit scope %q", k.Scope)
}

// lockBuckets takes the advisory lock of each bucket the limits count: a
// limit's own (a per-user limit's is its user ID's, whose unnamed rows
// every call under it counts), then its person's, when who names one. N
// concurrent calls can never pass a limit of N-1.
func lockBuckets(ctx context.Context, tx pgx.Tx, limits []policy.LimitKey, who *signoff.Person) error {
	if err := lockKeys(ctx, tx, limitKeys(limits)); err != nil {
		return err
	}
	return lockKeys(ctx, tx, personKeys(limits, who))
}

// limitKeys are the limits' own buckets' keys.
func limitKeys(limits []policy.LimitKey) []string {
	keys := make([]string, 0, len(limits))
	for _, k := range limits {
		keys = append(keys, k.Key)
	}
	return keys
}

// personKeys are the keys of the person's buckets of the per-user limits,
// whichever user ID they call under and whatever the limit's window (a
// count reads the person's rows of the tool); none when who names nobody.
func personKeys(limits []policy.LimitKey, who *signoff.Person) []string {
	p, named := person(who)
	if !named {
		return nil
	}
	var keys []string
	for _, k := range limits {
		if k.Scope == policy.PerUser {
			keys = append(keys, fmt.Sprintf("%s/person/%s\x00%s", k.Tool, p.Issuer, p.Subject))
		}
	}
	return keys
}

// lockKeys locks the keys in sorted order. Every admission and edit locks
// its limits' keys first and its person's second, each set sorted: one
// order for all, so no two ever wait on each other in a cycle.
func lockKeys(ctx context.Context, tx pgx.Tx, keys []string) error {
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, LockID(k)); err != nil {
			return fmt.Errorf("lock %s: %w", k, err)
		}
	}
	return nil
}

// LockID is the advisory lock that serializes admissions to one limit bucket.
func LockID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("toolgate-limit:" + key))
	return int64(h.Sum64())
}
