package activities

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// Webhook is where approvers' systems hear about cards: a signed POST per
// card event. Its headers follow the Standard Webhooks convention
// (webhook-id, webhook-timestamp, webhook-signature "v1,<base64>" over
// "<id>.<timestamp>.<body>" with HMAC-SHA256), so receivers can use any of
// its libraries; the standard library's crypto/hmac is all it takes here.
type Webhook struct {
	URL    string
	Secret []byte
	// CardsURL is the card UI's base URL; when set, events link the card.
	CardsURL string
}

// ID is the event's webhook-id: one per card version and event, so every
// retry of a delivery carries the same one and a receiver keeps the first.
func (e CardEvent) ID() string {
	return fmt.Sprintf("%s/v%d/%s", e.WorkflowID, max(1, e.CardVersion), e.Type)
}

// Notify delivers one card event to the webhook, signed and timestamped at
// each attempt; without a webhook configured it does nothing. A 2xx answer
// is delivered; 408, 429, 5xx and transport errors are retried by the
// activity's policy.
func (a *Activities) Notify(ctx context.Context, ev CardEvent) error {
	h := a.Webhook
	if h == nil || h.URL == "" {
		return nil
	}
	if h.CardsURL != "" {
		ev.URL = strings.TrimRight(h.CardsURL, "/") + "/cards/" + ev.WorkflowID
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("encode the card event: "+err.Error(), ErrBadInput, nil)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("the webhook URL: "+err.Error(), ErrWebhookRefused, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate-webhook/1")
	req.Header.Set("webhook-id", ev.ID())
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+SignWebhook(h.Secret, ev.ID(), ts, body))
	resp, err := noRedirects(a.HTTP).Do(req)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", ev.ID(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.Logger.Info("webhook delivered", zap.String("id", ev.ID()), zap.Int("status", resp.StatusCode))
		return nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the webhook answered %s with %s: redirects are not followed (set the final URL)", ev.ID(), resp.Status), ErrWebhookRefused, nil)
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the webhook refused %s with %s", ev.ID(), resp.Status), ErrWebhookRefused, nil)
	}
	return fmt.Errorf("deliver %s: the webhook answered %s", ev.ID(), resp.Status)
}

// noRedirects is c answering a redirect with the redirect itself: a signed
// card event goes only to the URL the configuration names, never to
// wherever that server points.
func noRedirects(c *http.Client) *http.Client {
	out := *c
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &out
}

// SignWebhook is the base64 HMAC-SHA256, under secret, of
// "<id>.<timestamp>.<body>".
func SignWebhook(secret []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// VerifyWebhook is what a receiver does: the signature header must hold a
// v1 signature of the id, timestamp and body under secret, and the
// timestamp be within tolerance of now (so a captured delivery cannot be
// replayed later).
func VerifyWebhook(secret []byte, id, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not a Unix time")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now, more than %s", d.Round(time.Second), tolerance)
	}
	want := SignWebhook(secret, id, timestamp, body)
	for _, s := range strings.Fields(signature) {
		if v, sig, ok := strings.Cut(s, ","); ok && v == "v1" && subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1 {
			return nil
		}
	}
	return errors.New("webhook-signature does not verify")
}
