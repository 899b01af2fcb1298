package activities_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sanitize"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

var hookSecret = []byte("a-webhook-secret-of-32-characters!!")

// TestWebhookDeliveries: Notify signs each delivery so the receiver's
// check passes, and a receiver's check refuses a changed body, another
// secret and a stale timestamp; a 4xx is final, a 5xx is retried; without
// a webhook nothing is sent.
func TestWebhookDeliveries(t *testing.T) {
	var got []string
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
		if err := activities.VerifyWebhook(hookSecret, id, ts, sig, body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
		}
		for name, err := range map[string]error{
			"changed body":    activities.VerifyWebhook(hookSecret, id, ts, sig, append(body, ' '), time.Now(), 5*time.Minute),
			"other secret":    activities.VerifyWebhook([]byte("another secret of thirty-two chars"), id, ts, sig, body, time.Now(), 5*time.Minute),
			"stale timestamp": activities.VerifyWebhook(hookSecret, id, ts, sig, body, time.Now().Add(10*time.Minute), 5*time.Minute),
			"other id":        activities.VerifyWebhook(hookSecret, id+"x", ts, sig, body, time.Now(), 5*time.Minute),
		} {
			if err == nil {
				t.Errorf("%s verified", name)
			}
		}
		got = append(got, id+" "+string(body))
		w.WriteHeader(status)
	}))
	defer srv.Close()
	a := activities.New(nil, nil, "", sanitize.Sanitizer{}, zap.NewNop(), nil)
	ev := activities.CardEvent{Type: activities.CardEventPending, WorkflowID: "toolcall-c1-call8", RunID: "r", CardVersion: 1, Status: activities.CardPending,
		Tool: "request_stock_transfer", Resource: policy.ResourceRef{Kind: "store", ID: "112"}, ValueCents: 38400, Card: "Move 40 cases", ApproverRole: "store_manager", ApprovalsNeeded: 1}
	if err := a.Notify(context.Background(), ev); err != nil || len(got) != 0 {
		t.Fatalf("without a webhook: %v, %d deliveries", err, len(got))
	}
	a.Webhook = &activities.Webhook{URL: srv.URL, Secret: hookSecret, CardsURL: "https://cards.example.com/"}
	if err := a.Notify(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "toolcall-c1-call8/v1/card.pending {") || !strings.Contains(got[0], `"url":"https://cards.example.com/cards/toolcall-c1-call8"`) ||
		!strings.Contains(got[0], `"valueCents":38400`) {
		t.Fatalf("deliveries: %v", got)
	}
	var app *temporal.ApplicationError
	status = http.StatusUnauthorized
	if err := a.Notify(context.Background(), ev); !errors.As(err, &app) || !app.NonRetryable() || app.Type() != activities.ErrWebhookRefused {
		t.Fatalf("a 401: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := a.Notify(context.Background(), ev); err == nil || (errors.As(err, &app) && app.NonRetryable()) {
		t.Fatalf("a 503 must be retried: %v", err)
	}
}

// TestWebhookFollowsNoRedirect: a webhook URL that answers with a redirect
// (to a host the configuration never named) is not followed: nothing
// reaches the other host, and the delivery is refused, not retried, with
// the status in its error.
func TestWebhookFollowsNoRedirect(t *testing.T) {
	var elsewhere int
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere++; w.WriteHeader(http.StatusNoContent) }))
	defer other.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL+"/steal", code) }))
		a := activities.New(nil, nil, "", sanitize.Sanitizer{}, zap.NewNop(), nil)
		a.Webhook = &activities.Webhook{URL: hook.URL, Secret: hookSecret, CardsURL: "https://cards.example.com/"}
		err := a.Notify(context.Background(), activities.CardEvent{Type: activities.CardEventPending, WorkflowID: "toolcall-c1-call9", RunID: "r", CardVersion: 1,
			Status: activities.CardPending, Tool: "request_stock_transfer", Resource: policy.ResourceRef{Kind: "store", ID: "112"}, ValueCents: 38400, Card: "Move 40 cases", ApproverRole: "store_manager", ApprovalsNeeded: 1})
		hook.Close()
		var app *temporal.ApplicationError
		if elsewhere != 0 || !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), strconv.Itoa(code)) {
			t.Fatalf("a %d redirect: %d deliveries elsewhere, error %v", code, elsewhere, err)
		}
	}
}
