package approvals_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolgate/toolgate/internal/packs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// paymentsPack pays invoices; a keeper approves each payment, on a sign-in
// of the last 8 hours up to $500.00 and of the last 2 minutes above.
const paymentsPack = `pack: payments
system: the payments service
currency: USD
roles:
  - {name: writer, label: Writer}
  - {name: keeper, label: Keeper}
tools:
  - name: pay_invoice
    description: Pay one invoice. A keeper approves every payment.
    tier: irreversible
    valueArg: amount
    args:
      type: object
      properties:
        invoice: {type: string, title: Invoice, pattern: "^INV-[0-9]{1,6}$", description: "The invoice, e.g. INV-1."}
        amount: {type: integer, title: Amount, minimum: 1, maximum: 100000, description: "The payment, in cents."}
      required: [invoice, amount]
    example: {invoice: INV-1, amount: 100}
    route: {method: POST, path: "/v1/invoices/{invoice}/payments", body: [amount]}
    policy:
      roles: [writer]
      decision: approve
      hardLimit: 100000
      approvers:
        - {role: keeper}
      evidence:
        - {upTo: 50000, acr: pwd, maxAge: 8h}
        - {acr: pwd, maxAge: 2m}
`

// TestBatchApprovalInABrowser: tomas, a keeper, selects four payment cards
// in his inbox and approves them in one action. The three his sign-in is
// fresh enough for run once each, each with its own key; the fourth, whose
// rule asks for a newer sign-in than his, is refused alone and named, and
// still waits.
func TestBatchApprovalInABrowser(t *testing.T) {
	file := filepath.Join(t.TempDir(), "payments.yaml")
	if err := os.WriteFile(file, []byte(paymentsPack), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := packs.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var paid []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paid = append(paid, r.Header.Get("Idempotency-Key"))
		_, _ = w.Write([]byte(`{"paymentId":"PM-1"}`))
	}))
	t.Cleanup(upstream.Close)
	// The payments service takes the provider's tokens, exchanged for it.
	u := newUIWith(t, testenv.StackOptions{Policy: set.Policy, Upstreams: map[string]string{"payments": upstream.URL},
		Audiences: map[string]string{"payments": testenv.NotesAudience}})
	ctx := context.Background()
	sess, _ := signInThroughMCP(t, u, "noor")
	sess.ConversationID = "pay"
	ids := map[string]string{}
	for _, inv := range []struct {
		n      string
		amount int
	}{{"1", 400}, {"2", 450}, {"3", 500}, {"4", 60000}} {
		first, run, err := workflows.Call(ctx, u.Client, u.Policy, u.TaskQueue, workflows.ToolCallInput{Tool: "pay_invoice", ToolCallID: "inv" + inv.n,
			Args: json.RawMessage(fmt.Sprintf(`{"invoice":"INV-%s","amount":%d}`, inv.n, inv.amount)), Session: sess})
		if err != nil || first.Status != workflows.StatusPendingApproval || first.ApproverRole != "keeper" {
			t.Fatalf("invoice %s: %v %+v", inv.n, err, first)
		}
		ids[inv.n] = run.GetID()
	}

	tomas := browser(t)
	signInAs(t, tomas, u, "tomas")
	// Three minutes later his sign-in is too old for the $600.00 payment alone.
	u.ahead.Store(int64(3 * time.Minute))
	do(t, tomas, chromedp.Navigate(u.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#approve-selected")))
	for _, id := range ids {
		do(t, tomas, chromedp.Click(chromedp.ID("pick-"+id)))
	}
	do(t, tomas, chromedp.Click(chromedp.ID("approve-selected")), chromedp.WaitVisible(chromedp.ID("batch")))
	for n, id := range ids {
		line := get(t, tomas, chromedp.Text(chromedp.ID("batch-"+id)))
		switch {
		case n == "4" && (!strings.HasPrefix(line, "refused") || !strings.Contains(line, "$600.00") || !strings.Contains(line, "fresher or stronger sign-in")):
			t.Errorf("the $600.00 card's outcome: %q", line)
		case n != "4" && !strings.HasPrefix(line, "approved"):
			t.Errorf("invoice %s's outcome: %q", n, line)
		}
	}
	for n, id := range ids {
		if n == "4" {
			continue
		}
		var res workflows.ToolCallResult
		if err := u.Client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil || res.Status != workflows.StatusExecuted {
			t.Fatalf("invoice %s after the batch: %v %+v", n, err, res)
		}
	}
	mu.Lock()
	got := slices.Sorted(slices.Values(paid))
	mu.Unlock()
	if want := slices.Sorted(slices.Values([]string{ids["1"], ids["2"], ids["3"]})); !slices.Equal(got, want) {
		t.Fatalf("payments sent with keys %v, want each approved card's once: %v", got, want)
	}
	v, err := u.Client.QueryWorkflow(ctx, ids["4"], "", workflows.StatusQuery)
	var st workflows.Status
	if err != nil || v.Get(&st) != nil || st.Status != workflows.StatusPendingApproval {
		t.Fatalf("the refused card: %v %+v", err, st)
	}
}
