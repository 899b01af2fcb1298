package approvals_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/internal/testenv"
)

// helpdeskPack is a newcomer's pack file, written from docs/packs.md: a
// read and an approved write at a small HTTP service of the team's, a
// resource kind of its own, and two approver roles a CEL rule chooses
// between.
const helpdeskPack = `pack: helpdesk
system: the helpdesk
currency: USD
roles:
  - {name: agent, label: Agent}
  - {name: lead, label: Team lead}
resources:
  - {kind: queue, plural: queues, claim: helpdesk_queues, conceal: true, example: Q-1}
tools:
  - name: get_ticket
    description: One ticket in a queue, with what was charged. It changes nothing.
    tier: read
    idempotent: true
    resource: {arg: queue, kind: queue}
    args:
      type: object
      properties:
        queue: {type: string, title: Queue, pattern: "^Q-[0-9]{1,4}$", description: "The queue, e.g. Q-1."}
        ticket: {type: string, title: Ticket, pattern: "^T-[0-9]{1,6}$", description: "The ticket, e.g. T-100."}
      required: [queue, ticket]
    example: {queue: Q-1, ticket: T-100}
    route: {method: GET, path: "/v1/queues/{queue}/tickets/{ticket}"}
    policy:
      roles: [agent, lead]
      decision: allow
  - name: refund_ticket
    description: Refund part of what a ticket's customer was charged. A person approves every refund.
    tier: irreversible
    valueArg: amount
    receipt: {name: refund, field: refundId}
    resource: {arg: queue, kind: queue}
    args:
      type: object
      properties:
        queue: {type: string, title: Queue, pattern: "^Q-[0-9]{1,4}$", description: "The queue, e.g. Q-1."}
        ticket: {type: string, title: Ticket, pattern: "^T-[0-9]{1,6}$", description: "The ticket, e.g. T-100."}
        amount: {type: integer, title: Amount, minimum: 1, maximum: 50000, description: "The refund, in cents."}
      required: [queue, ticket, amount]
    example: {queue: Q-1, ticket: T-100, amount: 500}
    route: {method: POST, path: "/v1/queues/{queue}/tickets/{ticket}/refunds", body: [amount]}
    policy:
      roles: [agent]
      decision: approve
      hardLimit: 50000
      approvers:
        - {role: lead, when: "args.amount > 2000"}
        - {role: agent, upTo: 2000}
`

// helpdeskPeople are its people, as docs/packs.md adds them.
const helpdeskPeople = `[
  {"id": "hana", "name": "Hana Sato", "role": "agent", "claims": {"helpdesk_queues": ["Q-1"]}},
  {"id": "ivo", "name": "Ivo Petrov", "role": "lead", "claims": {"helpdesk_queues": ["Q-1", "Q-2"]}}
]
`

// helpdesk is the team's own service: a ticket to read, and refunds it
// records by their Idempotency-Key.
type helpdesk struct {
	mu      sync.Mutex
	refunds []string // each refund's Idempotency-Key
}

func (h *helpdesk) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/queues/{queue}/tickets/{ticket}", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"ticket": r.PathValue("ticket"), "queue": r.PathValue("queue"), "charged": 4200, "state": "open"})
	})
	mux.HandleFunc("POST /v1/queues/{queue}/tickets/{ticket}/refunds", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.refunds = append(h.refunds, r.Header.Get("Idempotency-Key"))
		_ = json.NewEncoder(w).Encode(map[string]any{"refundId": "RF-1"})
	})
	return mux
}

func (h *helpdesk) keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.refunds...)
}

// TestANewcomersFirstHour plays a team's first hour as the docs tell it:
// its own pack file, its people added by a people file, make dev started
// with both; an allowed read, a read of a queue hana does not hold refused
// as not found; a refund routed by its rule to a lead, which starter
// pending lists, a wrong-role approval refuses (exit status 1, naming
// role) and the lead's approval by workflow ID runs once; starter explain
// tells the story and the auditor finds the calls on the insights page.
func TestANewcomersFirstHour(t *testing.T) {
	desk := &helpdesk{}
	upstream := httptest.NewServer(desk.handler())
	t.Cleanup(upstream.Close)
	// make dev PACKS=… UPSTREAMS=… PEOPLE=…, as docs/packs.md says; the MCP
	// server answers a card at once rather than waiting on it.
	d := devStack{testenv.MakeDev(t, testenv.MakeDevOptions{
		Files:     map[string]string{"helpdesk.yaml": helpdeskPack, "my-people.json": helpdeskPeople},
		UnderMake: true,
		Make:      []string{"PACKS=helpdesk.yaml", "UPSTREAMS=helpdesk=" + upstream.URL, "PEOPLE=my-people.json"},
		Env:       []string{"MCP_MAX_WAIT=0"},
	})}
	for _, want := range []string{"your packs     helpdesk.yaml", "hana", "ivo"} {
		if !strings.Contains(d.Printed(), want) {
			t.Fatalf("make dev does not say %q:\n%s", want, d.Printed())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call, _ := d.mcpAs(t, ctx, "hana")
	if res, text := call("get_ticket", map[string]any{"queue": "Q-1", "ticket": "T-100"}); res.IsError || !strings.Contains(text, `"charged":4200`) {
		t.Fatalf("hana's read of her queue: %s", text)
	}
	if res, text := call("get_ticket", map[string]any{"queue": "Q-2", "ticket": "T-200"}); !res.IsError || !strings.Contains(text, `No queue "Q-2" was found`) {
		t.Fatalf("hana's read of a queue she does not hold: %s", text)
	}
	res, text := call("refund_ticket", map[string]any{"queue": "Q-1", "ticket": "T-100", "amount": 2500})
	if res.IsError || !strings.Contains(text, "Waiting for a lead to approve the card") || !strings.Contains(text, "$25.00") {
		t.Fatalf("a $25.00 refund: %s", text)
	}

	shell := func(program string, args ...string) (string, error) {
		out, err := d.secondShell(t, program, args...).CombinedOutput()
		return string(out), err
	}
	listed, err := shell("starter", "pending", "--role", "lead", "--resources", "queue=Q-1", "--format", "json")
	var cards []struct{ WorkflowID, Tool, Value, ApproverRole string }
	if err != nil || json.Unmarshal([]byte(listed), &cards) != nil || len(cards) != 1 || cards[0].Tool != "refund_ticket" || cards[0].Value != "$25.00" || cards[0].ApproverRole != "lead" {
		t.Fatalf("starter pending for a lead: %v\n%s", err, listed)
	}
	id := cards[0].WorkflowID
	if out, _ := shell("starter", "pending", "--role", "agent", "--resources", "queue=Q-1"); !strings.Contains(out, "no card waits for a agent") {
		t.Fatalf("starter pending for an agent lists the lead's card:\n%s", out)
	}
	out, err := shell("starter", "approve", "--workflow-id", id, "--user", "hana", "--role", "agent", "--resources", "queue=Q-1")
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(out, "refused") || !strings.Contains(out, ": role (") {
		t.Fatalf("an agent's approval of a lead's card: %v\n%s", err, out)
	}
	// A card no evidence rule covers needs the strictest sign-in (mfa
	// within 5 minutes, docs/packs.md): a lead's password alone is refused,
	// naming why.
	if out, err := shell("starter", "approve", "--workflow-id", id, "--user", "ivo", "--role", "lead", "--resources", "queue=Q-1"); err == nil || !strings.Contains(out, "step_up_required") {
		t.Fatalf("a lead's approval on a password: %v\n%s", err, out)
	}
	if len(desk.keys()) != 0 {
		t.Fatalf("the refund ran before a lead approved it: %v", desk.keys())
	}
	if out, err := shell("starter", "approve", "--workflow-id", id, "--user", "ivo", "--role", "lead", "--resources", "queue=Q-1", "--acr", "mfa"); err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("the lead's approval: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); len(desk.keys()) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	if keys := desk.keys(); len(keys) != 1 || keys[0] != id {
		t.Fatalf("the refund ran with keys %v, want once with %s", keys, id)
	}
	story, err := shell("starter", "explain", "--workflow-id", id)
	if err != nil || !strings.Contains(story, "Asked by hana (agent)") || !strings.Contains(story, "approved (ok) $25.00 by ivo (lead)") ||
		!strings.Contains(story, "it ran once upstream, with Idempotency-Key "+id+": refund RF-1") {
		t.Fatalf("starter explain: %v\n%s", err, story)
	}

	abena := browser(t)
	signInAt(t, abena, d.Cards, "abena", d.user(t, "abena").Password)
	do(t, abena, chromedp.Navigate(d.Cards+"/insights"), chromedp.WaitVisible(chromedp.CSS("#chart-refusals")))
	if page := get(t, abena, chromedp.Text(chromedp.CSS("#chart-refusals"))); !strings.Contains(page, "resource_scope · get_ticket") {
		t.Fatalf("abena's insights, refusals:\n%s", page)
	}
}
