// Package carddesk is a stand-in for the card desk's system, the upstream
// of the file pack examples/packs/carddesk.yaml: what a team's own service
// looks like to toolgate when it takes the identity provider's tokens. It
// verifies each bearer token as an OAuth resource server does (signed by
// the provider, from its issuer, for this service's audience alone,
// unexpired), acts only on the accounts the token's carddesk_accounts
// claim holds (any other is not found), and posts a reissue once per
// Idempotency-Key. It imports nothing of toolgate.
package carddesk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Reasons a card is reissued for, as the pack's enum names them.
var Reasons = []string{"lost", "stolen", "damaged", "captured"}

// Card is one account's card.
type Card struct {
	Account string `json:"account"`
	State   string `json:"state"`
	Last4   string `json:"last4"`
}

// Reissue is a posted replacement card.
type Reissue struct {
	Reissue string `json:"reissue"`
	Account string `json:"account"`
	Reason  string `json:"reason"`
	Fee     int64  `json:"fee"`
	Status  string `json:"status"`
	By      string `json:"by"`
}

// Desk is the card desk's state and its token check.
type Desk struct {
	verify func(context.Context, string) (*oidc.IDToken, error)

	mu       sync.Mutex
	cards    map[string]*Card
	reissues map[string]Reissue // by Idempotency-Key
	posted   []Reissue
}

// New discovers the provider at issuer (retrying for up to wait while it
// starts) and returns a desk whose tokens must be for audience.
func New(ctx context.Context, issuer, audience string, wait time.Duration) (*Desk, error) {
	deadline := time.Now().Add(wait)
	for {
		prov, err := oidc.NewProvider(ctx, issuer)
		if err == nil {
			v := prov.Verifier(&oidc.Config{ClientID: audience})
			return &Desk{verify: v.Verify, cards: map[string]*Card{
				"ACC-4471": {Account: "ACC-4471", State: "active", Last4: "4471"},
				"ACC-5120": {Account: "ACC-5120", State: "blocked", Last4: "0932"},
				"ACC-9999": {Account: "ACC-9999", State: "active", Last4: "1188"},
			}, reissues: map[string]Reissue{}}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("carddesk: discover %s: %w", issuer, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Posted is every reissue posted, in order (one per Idempotency-Key).
func (d *Desk) Posted() []Reissue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.posted)
}

// Handler serves GET /v1/accounts/{ref}/card and POST
// /v1/accounts/{ref}/reissues ({"reason", "fee"}, an Idempotency-Key).
func (d *Desk) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/accounts/{ref}/card", d.authed(func(w http.ResponseWriter, r *http.Request, _ string, card *Card) {
		d.mu.Lock()
		c := *card
		d.mu.Unlock()
		answer(w, http.StatusOK, c)
	}))
	mux.HandleFunc("POST /v1/accounts/{ref}/reissues", d.authed(func(w http.ResponseWriter, r *http.Request, user string, card *Card) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			answer(w, http.StatusBadRequest, problem("an Idempotency-Key is required: a posted card cannot be recalled"))
			return
		}
		var in struct {
			Reason string `json:"reason"`
			Fee    *int64 `json:"fee"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || !slices.Contains(Reasons, in.Reason) || in.Fee == nil || *in.Fee < 0 {
			answer(w, http.StatusBadRequest, problem("the body is {\"reason\": one of "+strings.Join(Reasons, ", ")+", \"fee\": pence, 0 or more}"))
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if done, ok := d.reissues[key]; ok {
			if done.Account != card.Account || done.Reason != in.Reason || done.Fee != *in.Fee {
				answer(w, http.StatusConflict, problem("this Idempotency-Key was used for another reissue"))
				return
			}
			answer(w, http.StatusOK, done)
			return
		}
		re := Reissue{Reissue: fmt.Sprintf("RI-%04d", len(d.posted)+1), Account: card.Account, Reason: in.Reason, Fee: *in.Fee, Status: "posted", By: user}
		d.reissues[key] = re
		d.posted = append(d.posted, re)
		card.State = "reissued"
		answer(w, http.StatusOK, re)
	}))
	return mux
}

// authed verifies the bearer token and finds the path's account among
// those the token holds; an account it does not hold is not found.
func (d *Desk) authed(h func(http.ResponseWriter, *http.Request, string, *Card)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			answer(w, http.StatusUnauthorized, problem("a bearer token is required"))
			return
		}
		tok, err := d.verify(r.Context(), raw)
		if err != nil {
			answer(w, http.StatusUnauthorized, problem("the token is not one this desk takes"))
			return
		}
		var claims struct {
			User     string   `json:"preferred_username"`
			Accounts []string `json:"carddesk_accounts"`
		}
		if err := tok.Claims(&claims); err != nil {
			answer(w, http.StatusUnauthorized, problem("the token's claims do not read"))
			return
		}
		ref := r.PathValue("ref")
		d.mu.Lock()
		card := d.cards[ref]
		d.mu.Unlock()
		if card == nil || !slices.Contains(claims.Accounts, ref) {
			answer(w, http.StatusNotFound, problem("no such account"))
			return
		}
		h(w, r, claims.User, card)
	}
}

func problem(msg string) map[string]string { return map[string]string{"error": msg} }

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
