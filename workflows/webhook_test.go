package workflows_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"

	"github.com/toolgate/toolgate/activities"
)

// TestWebhookTellsApprovers: with a webhook in force, the receiver hears of
// the card going up, of each new version an edit puts up, of its
// escalation and of its decision, each signed; a delivery the receiver
// fails the first time comes again with the same webhook-id.
func TestWebhookTellsApprovers(t *testing.T) {
	secret := []byte("the receiver's secret, 32 characters or more")
	var mu sync.Mutex
	var ids []string
	var events []activities.CardEvent
	failed := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		if err := activities.VerifyWebhook(secret, id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("%s: %v", id, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, id)
		if !failed[id] && id == "toolcall-hooks-w1/v1/card.pending" {
			failed[id] = true
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt fails: it must come again
			return
		}
		var ev activities.CardEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Error(err)
		}
		events = append(events, ev)
	}))
	defer srv.Close()
	f := newFixture(t)
	f.webhooks = true
	f.acts.Webhook = &activities.Webhook{URL: srv.URL, Secret: secret, CardsURL: "http://127.0.0.1:8080"}
	res := f.run(t, "hooks", "w1", "request_stock_transfer", fortyCases, ama(""), func(env tenv) {
		decide(t, env, time.Minute, nil, edit(amaID, `{"quantity":45}`))
		decide(t, env, 16*time.Minute, nil, approve(kofiID))
	})
	if res.Status != "executed" {
		t.Fatalf("%s/%s %s", res.Status, res.Code, res.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"toolcall-hooks-w1/v1/card.pending", "toolcall-hooks-w1/v1/card.pending", "toolcall-hooks-w1/v2/card.pending",
		"toolcall-hooks-w1/v2/card.escalated", "toolcall-hooks-w1/v2/card.decided"}
	if len(ids) != len(want) {
		t.Fatalf("deliveries %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("deliveries %v, want %v", ids, want)
		}
	}
	last := events[len(events)-1]
	if events[0].ValueCents != 38400 || events[1].ValueCents != 43200 || events[2].EscalatedTo != mangrove.RoleAreaManager ||
		last.Status != activities.CardApproved || last.DecidedBy != "kofi" || last.URL != "http://127.0.0.1:8080/cards/toolcall-hooks-w1" {
		t.Fatalf("events: %+v", events)
	}
}
