package insights

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// ErrNoSuchCall is returned for a workflow ID the audit log has no row of.
var ErrNoSuchCall = errors.New("the audit log has no row of this call")

// Event is one audit row of a call.
type Event struct {
	At           time.Time           `json:"at"`
	RunID        string              `json:"runId"`
	Event        string              `json:"event"`
	Reason       string              `json:"reason"`
	Tool         string              `json:"tool"`
	UserID       string              `json:"userId"`
	Role         string              `json:"role"`
	SessionID    string              `json:"sessionId"`
	Conversation string              `json:"conversationId"`
	Resource     *policy.ResourceRef `json:"resource,omitempty"`
	ValueCents   *int64              `json:"valueCents,omitempty"`
	// Value is ValueCents written in the tool's pack's unit.
	Value        string          `json:"value,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Approver     string          `json:"approver,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Issuer       string          `json:"approverIssuer,omitempty"`
	ACR          string          `json:"approverAcr,omitempty"`
	AuthTime     *time.Time      `json:"approverAuthTime,omitempty"`
	// Via is confirmed_in_client for a decision its requester made in
	// their own MCP client.
	Via     string          `json:"approverVia,omitempty"`
	Claimed string          `json:"claimedApprover,omitempty"`
	Message string          `json:"message,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	// Receipt is what the call made, as its tool's result names it
	// ("transfer TR-00012").
	Receipt string `json:"receipt,omitempty"`
}

// Step is one event of the call's Temporal history.
type Step struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// Story is one call's whole story: every audit row and the history.
type Story struct {
	WorkflowID string  `json:"workflowId"`
	Events     []Event `json:"events"`
	History    []Step  `json:"history,omitempty"`
	// HistoryError says why the history could not be read (the story then
	// stands on the audit log alone).
	HistoryError string `json:"historyError,omitempty"`
	// Archived names the archive files the rows were read from, when their
	// month has been dropped from the log.
	Archived string `json:"archived,omitempty"`
	// KeySent is how the call's idempotency key (its workflow ID) goes
	// upstream: "Idempotency-Key" (the HTTP header), "_meta.<field>" (an
	// MCP server's keyMeta), "none", or "unknown" (a tool of no pack
	// loaded here); KeyWhy says why none is sent, or why it is not known.
	KeySent string `json:"keySent"`
	KeyWhy  string `json:"keyWhy,omitempty"`
}

// keySent is how tool's calls carry their idempotency key upstream, and
// why they carry none.
func (r Reader) keySent(tool string) (string, string) {
	if r.Policy == nil {
		return "Idempotency-Key", ""
	}
	spec, ok := r.Policy.Spec(tool)
	switch {
	case !ok:
		return "unknown", "its tool is not among the packs loaded here (TOOLGATE_PACKS), so how its key went upstream is not known"
	case spec.MCP != nil && spec.MCP.KeyMeta == "":
		return "none", "its MCP server takes none (no keyMeta)"
	case spec.MCP != nil:
		return "_meta." + spec.MCP.KeyMeta, ""
	case !spec.Route.Keyed:
		return "none", "its route sends none (a " + spec.Route.Method + ", not keyed)"
	}
	return "Idempotency-Key", ""
}

// withKey says how a call went upstream with its key, for a sentence.
func (s Story) withKey() string {
	switch {
	case s.KeySent == "none":
		return "with no idempotency key: " + s.KeyWhy
	case s.KeySent == "unknown":
		return "under workflow ID " + s.WorkflowID + " (" + s.KeyWhy + ")"
	case strings.HasPrefix(s.KeySent, "_meta."):
		return fmt.Sprintf("with idempotency key %s in the MCP call's %s", s.WorkflowID, s.KeySent)
	}
	return "with Idempotency-Key " + s.WorkflowID
}

// describeValue writes an event's value in its tool's unit and names what
// its result made.
func (r Reader) describeValue(e *Event) {
	if r.Policy == nil {
		return
	}
	if e.ValueCents != nil {
		e.Value = r.Policy.FormatValue(e.Tool, *e.ValueCents)
	}
	if spec, ok := r.Policy.Spec(e.Tool); ok {
		e.Receipt = spec.Receipt.Of(e.Result)
	}
}

// storySQL is the one query behind a call's story.
const storySQL = `SELECT at, run_id, event, reason, tool, user_id, role, session_id, conversation_id, resource_kind, resource_id, value_cents, args, coalesce(approver_id, ''),
	coalesce(approver_role, ''), coalesce(approver_issuer, ''), coalesce(approver_acr, ''), approver_auth_time, coalesce(claimed_approver_id, ''),
	coalesce(message, ''), result, coalesce(approver_via, '')
FROM audit_log WHERE workflow_id = $1 ORDER BY id`

// Explain reads a call's story: its audit rows through the reader, and its
// history from Temporal when c is not nil.
func (r Reader) Explain(ctx context.Context, c client.Client, workflowID string) (Story, error) {
	s := Story{WorkflowID: workflowID, KeySent: "Idempotency-Key"}
	rows, err := r.Pool.Query(ctx, storySQL, workflowID)
	if err != nil {
		return s, fmt.Errorf("explain %s: %w", workflowID, err)
	}
	s.Events, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		var args, result []byte
		var kind, id *string
		err := row.Scan(&e.At, &e.RunID, &e.Event, &e.Reason, &e.Tool, &e.UserID, &e.Role, &e.SessionID, &e.Conversation, &kind, &id, &e.ValueCents, &args,
			&e.Approver, &e.ApproverRole, &e.Issuer, &e.ACR, &e.AuthTime, &e.Claimed, &e.Message, &result, &e.Via)
		e.Args, e.Result = args, result
		if kind != nil && id != nil {
			e.Resource = &policy.ResourceRef{Kind: *kind, ID: *id}
		}
		r.describeValue(&e)
		return e, err
	})
	if err != nil {
		return s, fmt.Errorf("explain %s: %w", workflowID, err)
	}
	if r.Archives != "" {
		// A call that began in a month since dropped has its first rows there.
		archived, from, err := r.fromArchives(ctx, r.Archives, workflowID)
		if err != nil {
			return s, fmt.Errorf("explain %s: %w", workflowID, err)
		}
		if len(archived) > 0 {
			s.Events, s.Archived = append(archived, s.Events...), from
		}
	}
	if len(s.Events) == 0 {
		months, err := r.dropped(ctx)
		if err != nil {
			return s, fmt.Errorf("explain %s: %w", workflowID, err)
		}
		if len(months) > 0 && r.Archives == "" {
			return s, fmt.Errorf("%s: %w; %d month(s) were archived and dropped from it (%s to %s): if the call is from one, read it from the archives with --archive DIR",
				workflowID, ErrNoSuchCall, len(months), months[0].Partition, months[len(months)-1].Partition)
		}
		return s, fmt.Errorf("%s: %w (check the ID: toolcall-<conversationId>-<toolCallId>)", workflowID, ErrNoSuchCall)
	}
	s.KeySent, s.KeyWhy = r.keySent(s.Events[0].Tool)
	if c != nil {
		if s.History, err = historyOf(ctx, c, workflowID); err != nil {
			s.HistoryError = err.Error()
		}
	}
	return s, nil
}

// historyOf lists the latest run's history as steps, without decrypting a
// payload: the audit rows say what the payloads held, sanitized.
func historyOf(ctx context.Context, c client.Client, workflowID string) ([]Step, error) {
	iter := c.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []Step
	activity := map[int64]string{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return out, fmt.Errorf("read the history of %s: %w", workflowID, err)
		}
		if what := describe(ev, activity); what != "" {
			out = append(out, Step{At: ev.GetEventTime().AsTime().UTC(), What: what})
		}
	}
	return out, nil
}

// describe says what one history event means for the story; "" leaves out
// the bookkeeping (workflow tasks).
func describe(ev *history.HistoryEvent, activity map[int64]string) string {
	switch ev.GetEventType() {
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a := ev.GetWorkflowExecutionStartedEventAttributes()
		return fmt.Sprintf("started %s on task queue %s", a.GetWorkflowType().GetName(), a.GetTaskQueue().GetName())
	case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		activity[ev.GetEventId()] = name
		return "activity " + name + " scheduled"
	case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return "activity " + activity[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] + " completed"
	case enums.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		return fmt.Sprintf("activity %s failed: %s", activity[a.GetScheduledEventId()], a.GetFailure().GetMessage())
	case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return "activity " + activity[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] + " timed out"
	case enums.EVENT_TYPE_MARKER_RECORDED:
		// A summary encrypted by the codec stays unread: the name says enough.
		if s := ev.GetUserMetadata().GetSummary(); string(s.GetMetadata()["encoding"]) == "json/plain" {
			return "recorded: " + strings.Trim(string(s.GetData()), `"`)
		}
		return "recorded " + strings.ToLower(ev.GetMarkerRecordedEventAttributes().GetMarkerName())
	case enums.EVENT_TYPE_TIMER_STARTED:
		a := ev.GetTimerStartedEventAttributes()
		return fmt.Sprintf("timer %s started (%s)", a.GetTimerId(), a.GetStartToFireTimeout().AsDuration())
	case enums.EVENT_TYPE_TIMER_FIRED:
		return "timer " + ev.GetTimerFiredEventAttributes().GetTimerId() + " fired"
	case enums.EVENT_TYPE_TIMER_CANCELED:
		return "timer " + ev.GetTimerCanceledEventAttributes().GetTimerId() + " cancelled"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		return "signal " + ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() + " received"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		return "update " + ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() + " accepted"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		return "update answered"
	case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		return "search attributes updated"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return "completed"
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		return "failed: " + ev.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		return "terminated: " + ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
	case enums.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return "timed out"
	}
	return ""
}

// Text writes the story for a person: who asked, what the chain decided,
// the card, who decided with what evidence, what ran upstream with which
// key, the result, then the history.
func (s Story) Text(w io.Writer) error {
	var b strings.Builder
	first := s.Events[0]
	about := "no resource"
	if first.Resource != nil {
		about = first.Resource.String()
	}
	fmt.Fprintf(&b, "%s: %s for %s\n", s.WorkflowID, first.Tool, about)
	fmt.Fprintf(&b, "Asked by %s (%s), session %s, conversation %s, at %s\n", first.UserID, first.Role, first.SessionID, first.Conversation, stamp(first.At))
	switch {
	case s.KeySent == "none":
		fmt.Fprintf(&b, "No idempotency key sent upstream: %s\n", s.KeyWhy)
	case s.KeySent == "unknown":
		fmt.Fprintf(&b, "Idempotency key: %s\n", s.KeyWhy)
	case strings.HasPrefix(s.KeySent, "_meta."):
		fmt.Fprintf(&b, "Idempotency key sent upstream in the MCP call's %s: %s\n", s.KeySent, s.WorkflowID)
	default:
		fmt.Fprintf(&b, "Idempotency-Key sent upstream: %s\n", s.WorkflowID)
	}
	if s.Archived != "" {
		fmt.Fprintf(&b, "Read from the archive of a month dropped from the audit log: %s (its SHA-256 and rows checked against audit_archives)\n", s.Archived)
	}
	b.WriteString("\n")
	run := ""
	for _, e := range s.Events {
		if e.RunID != run {
			run = e.RunID
			fmt.Fprintf(&b, "Run %s\n", run)
		}
		fmt.Fprintf(&b, "  %s  %s", e.At.UTC().Format("15:04:05.000"), what(e))
		if c := chain(e); c != "" {
			fmt.Fprintf(&b, "\n      chain: %s", c)
		}
		if e.Message != "" {
			fmt.Fprintf(&b, "\n      %s: %s", label(e.Event), e.Message)
		}
		if len(e.Args) > 0 && (e.Event == "allowed" || e.Event == "needs_approval" || e.Event == "denied" || e.Event == "edited") {
			fmt.Fprintf(&b, "\n      args: %s", compact(e.Args))
		}
		if len(e.Result) > 0 {
			fmt.Fprintf(&b, "\n      result: %s", compact(e.Result))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nAnswer: %s\n", s.Answer())
	if len(s.History) > 0 || s.HistoryError != "" {
		b.WriteString("\nTemporal history (latest run; payloads stay encrypted, the rows above hold them sanitized)\n")
		for _, h := range s.History {
			fmt.Fprintf(&b, "  %s  %s\n", h.At.Format("15:04:05.000"), h.What)
		}
		if s.HistoryError != "" {
			fmt.Fprintf(&b, "  (%s)\n", s.HistoryError)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Answer is the story in one sentence: what ran upstream, under which key.
func (s Story) Answer() string {
	var ran []Event
	last := s.Events[len(s.Events)-1]
	for _, e := range s.Events {
		if e.Event == "executed" {
			ran = append(ran, e)
		}
	}
	switch {
	case len(ran) == 1:
		if ran[0].Receipt != "" {
			return fmt.Sprintf("it ran once upstream, %s: %s.", s.withKey(), ran[0].Receipt)
		}
		return fmt.Sprintf("it ran once upstream, %s.", s.withKey())
	case len(ran) > 1:
		if s.KeySent == "none" {
			return fmt.Sprintf("%d executed rows, %s: it ran upstream more than once.", len(ran), s.withKey())
		}
		return fmt.Sprintf("%d executed rows, %s: the upstream must have answered the retries with its first result; check it respected the key.", len(ran), s.withKey())
	case last.Event == "failed":
		return fmt.Sprintf("it failed (%s); nothing is recorded as run.", last.Reason)
	case last.Event == "released":
		return fmt.Sprintf("it failed (%s) before anything was sent upstream, and gave back what it had reserved against its limits.", last.Reason)
	case last.Event == "allowed":
		done := "its history shows whether it has ended"
		if len(s.History) > 0 && s.History[len(s.History)-1].What == "completed" {
			done = "its history shows it completed"
		}
		return fmt.Sprintf("it was allowed and runs upstream %s; a read that succeeds writes no outcome row, and %s.", s.withKey(), done)
	}
	return fmt.Sprintf("nothing ran upstream: the call ended %s (%s).", last.Event, last.Reason)
}

func what(e Event) string {
	s := e.Event + " (" + e.Reason + ")"
	if e.Value != "" {
		s += " " + e.Value
	}
	if e.Approver != "" {
		s += fmt.Sprintf(" by %s (%s)", e.Approver, e.ApproverRole)
		if e.ACR != "" {
			s += ", signed in with " + e.ACR
			if e.AuthTime != nil {
				s += " at " + stamp(*e.AuthTime)
			}
			if e.Issuer != "" {
				s += " at " + e.Issuer
			}
		}
		if e.Via != "" {
			s += ", " + strings.ReplaceAll(e.Via, "_", " ") + " (weaker than a sign-in at the card UI)"
		}
	}
	if e.Claimed != "" {
		s += fmt.Sprintf(" claiming to be %s (unverified)", e.Claimed)
	}
	return s
}

// chain says what the chain decided at each step, for a decision row.
func chain(e Event) string {
	names := make([]string, len(policy.Steps))
	for i, st := range policy.Steps {
		names[i] = fmt.Sprintf("%d %s", i, st)
	}
	switch e.Event {
	case "allowed", "needs_approval":
		if e.Reason == string(policy.CodeOK) {
			row := map[string]string{"allowed": "allow: it runs now", "needs_approval": "approve: a person decides"}[e.Event]
			return fmt.Sprintf("every step passed (%s); the row says %s", strings.Join(names, ", "), row)
		}
	case "denied", "awaiting_sign_in":
		for i, st := range policy.Steps {
			if st.Code() == policy.Code(e.Reason).Canonical() {
				passed := "no step passed"
				if i > 0 {
					passed = "passed " + strings.Join(names[:i], ", ")
				}
				return fmt.Sprintf("%s; step %s refused it", passed, names[i])
			}
		}
		return "refused with " + e.Reason + " (not a step of the chain: see the code's meaning in docs/contract.md)"
	}
	return ""
}

// label says whose words an event's message is.
func label(event string) string {
	switch event {
	case "approved":
		return "approver's note"
	case "approval_refused", "approval_counted", "escalated", "edited":
		return "noted"
	}
	return "told the model"
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// compact writes args or a result on one line, each character that could
// pose as the story's structure (a line break, a bidi override) escaped.
func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return policy.CardValue(string(raw))
	}
	b, _ := json.Marshal(v)
	return policy.CardJSON(string(b))
}

// incidentSQL finds the calls that ran a tool upstream for a resource on a day.
const incidentSQL = `SELECT DISTINCT ON (workflow_id) workflow_id FROM audit_log
WHERE event = 'executed' AND resource_kind = $1 AND resource_id = $4 AND at >= $2 AND at < $2 + interval '1 day' AND ($3 = '' OR tool = $3)
ORDER BY workflow_id`

// Executed returns the workflow IDs of the calls that ran upstream for a
// resource on a day (UTC), optionally of one tool: "why did this account
// get two card replacements on Friday?" starts here.
func (r Reader) Executed(ctx context.Context, res policy.ResourceRef, day time.Time, tool string) ([]string, error) {
	rows, err := r.Pool.Query(ctx, incidentSQL, res.Kind, day.UTC().Truncate(24*time.Hour), tool, res.ID)
	if err != nil {
		return nil, fmt.Errorf("executed calls: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Verdict says what several executed calls mean: one key is a retry the
// upstream should have collapsed, several keys are separate approved
// actions.
func Verdict(ids []string, tool string, res policy.ResourceRef, day time.Time) string {
	what := "call"
	if tool != "" {
		what = tool
	}
	switch len(ids) {
	case 0:
		return fmt.Sprintf("No %s ran upstream for %s on %s.", what, res, day.Format("Monday 2 January 2006"))
	case 1:
		return fmt.Sprintf("One %s ran upstream for %s on %s, under one Idempotency-Key.", what, res, day.Format("Monday 2 January 2006"))
	}
	return fmt.Sprintf("%d %s calls ran upstream for %s on %s, each under its own Idempotency-Key (%s): separate calls, each decided and approved on its own, not a retry. Read each story for who asked and who approved.",
		len(ids), what, res, day.Format("Monday 2 January 2006"), strings.Join(ids, ", "))
}
