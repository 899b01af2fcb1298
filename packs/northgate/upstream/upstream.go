// Package upstream is a stand-in for Northgate Bank's card desk API,
// behind the northgate pack. It verifies each bearer token as an OAuth
// resource server does (signed by the provider, from its issuer, for this
// service's audience alone, unexpired), serves an account only to a token
// whose northgate_accounts claim holds it (any other is not found), checks
// a caller's passphrase and one-time code (a TOTP of the caller's app) and
// says only whether each matched: it keeps no count of attempts, which is
// toolgate's to keep. Reissues and transfers are keyed by Idempotency-Key,
// so a key runs once. It imports nothing of toolgate.
package upstream

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// Customer is one of the bank's callers, with the factors the bank holds.
type Customer struct {
	User       string
	Passphrase string
	// TOTPSecret is the base32 secret of the caller's Northgate app.
	TOTPSecret string
	Accounts   []string
}

// Account is one account and its card.
type Account struct {
	Ref        string
	Holder     string
	Balance    int64
	Bill       Bill
	Last4      string
	CardState  string
	Registered string
}

// Bill is an account's most recent card bill.
type Bill struct {
	AmountPence  int64  `json:"amountPence"`
	MinimumPence int64  `json:"minimumPence"`
	Due          string `json:"due"`
}

// ReissueFeePence is what a replacement card costs.
const ReissueFeePence = 500

// Server is the bank's state and its token check.
type Server struct {
	verify    func(context.Context, string) (*oidc.IDToken, error)
	customers map[string]Customer
	accounts  map[string]*Account

	mu        sync.Mutex
	reissues  map[string]string
	transfers map[string]string
	next      int
	// Factors are the factors the bank was asked to check, as it received
	// them (for tests: what left toolgate), and Asked counts the requests
	// that reached a caller's data.
	factors []string
	Asked   atomic.Int64
	// slow delays every verification's answer (SetVerifyDelay).
	slow atomic.Int64
}

// SetVerifyDelay makes the bank take d to judge each factor, as a slow
// core system does: attempts sent together are then all in flight at once.
func (s *Server) SetVerifyDelay(d time.Duration) { s.slow.Store(int64(d)) }

// New discovers the provider at issuer (retrying for up to wait while it
// starts) and returns a bank whose tokens must be for audience.
func New(ctx context.Context, issuer, audience string, wait time.Duration) (*Server, error) {
	deadline := time.Now().Add(wait)
	for {
		prov, err := oidc.NewProvider(ctx, issuer)
		if err == nil {
			s := seed()
			s.verify = prov.Verifier(&oidc.Config{ClientID: audience}).Verify
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("northgate: discover %s: %w", issuer, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Factors are the factors the bank has been asked to check, in order.
func (s *Server) Factors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.factors)
}

// Reissues are the references of the cards posted, by idempotency key.
func (s *Server) Reissues() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.reissues {
		out[k] = v
	}
	return out
}

// Code is the one-time code a customer's app shows at t.
func (s *Server) Code(user string, t time.Time) (string, error) {
	c, ok := s.customers[user]
	if !ok {
		return "", fmt.Errorf("no customer %q", user)
	}
	return totp.GenerateCodeCustom(c.TOTPSecret, t, codeOpts)
}

var codeOpts = totp.ValidateOpts{Period: 30, Skew: 1, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// Handler serves the bank's API under /v1.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/branches/hours", func(w http.ResponseWriter, r *http.Request) {
		out := []map[string]string{}
		for _, b := range branches {
			if q := r.URL.Query().Get("branch"); q == "" || strings.EqualFold(q, b[0]) {
				out = append(out, map[string]string{"branch": b[0], "hours": b[1]})
			}
		}
		answer(w, http.StatusOK, map[string]any{"branches": out})
	})
	mux.HandleFunc("GET /v1/accounts/{ref}/balance", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		answer(w, http.StatusOK, map[string]any{"account": a.Ref, "balancePence": a.Balance})
	}))
	mux.HandleFunc("GET /v1/accounts/{ref}/bill", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		answer(w, http.StatusOK, map[string]any{"account": a.Ref, "bill": a.Bill})
	}))
	mux.HandleFunc("GET /v1/accounts/{ref}/card", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		answer(w, http.StatusOK, map[string]any{"last4": a.Last4, "state": a.CardState, "registeredAddress": a.Registered, "reissueFeePence": ReissueFeePence})
	}))
	mux.HandleFunc("POST /v1/accounts/{ref}/card/freeze", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		s.mu.Lock()
		a.CardState = "frozen"
		s.mu.Unlock()
		answer(w, http.StatusOK, map[string]any{"last4": a.Last4, "state": "frozen"})
	}))
	mux.HandleFunc("POST /v1/accounts/{ref}/reissues", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		ref, ok := s.once(w, r, s.reissues, "RC")
		if ok {
			s.mu.Lock()
			a.CardState = "reissued"
			s.mu.Unlock()
			answer(w, http.StatusCreated, map[string]any{"reference": ref, "dispatched": true, "postedTo": "the registered address", "deliveryEstimate": "3 to 5 working days"})
		}
	}))
	mux.HandleFunc("POST /v1/accounts/{ref}/transfers", s.account(func(w http.ResponseWriter, r *http.Request, a *Account) {
		var t struct {
			Amount int64 `json:"amount"`
		}
		if json.NewDecoder(r.Body).Decode(&t) != nil || t.Amount <= 0 {
			answer(w, http.StatusBadRequest, problem("bad_request", "a transfer needs an amount"))
			return
		}
		if ref, ok := s.once(w, r, s.transfers, "TR"); ok {
			s.mu.Lock()
			a.Balance -= t.Amount
			s.mu.Unlock()
			answer(w, http.StatusCreated, map[string]any{"reference": ref, "amountPence": t.Amount})
		}
	}))
	mux.HandleFunc("POST /v1/verify/passphrase", s.caller(func(w http.ResponseWriter, r *http.Request, c Customer) {
		said, ok := s.factor(w, r, "passphrase")
		if ok {
			match := subtle.ConstantTimeCompare([]byte(strings.ToLower(strings.TrimSpace(said))), []byte(c.Passphrase)) == 1
			answer(w, http.StatusOK, map[string]bool{"match": match})
		}
	}))
	mux.HandleFunc("POST /v1/verify/one-time-code", s.caller(func(w http.ResponseWriter, r *http.Request, c Customer) {
		said, ok := s.factor(w, r, "code")
		if ok {
			match, err := totp.ValidateCustom(strings.TrimSpace(said), c.TOTPSecret, time.Now(), codeOpts)
			answer(w, http.StatusOK, map[string]bool{"match": err == nil && match})
		}
	}))
	return mux
}

// once runs a keyed write once: a repeated key answers the first reference.
func (s *Server) once(w http.ResponseWriter, r *http.Request, done map[string]string, prefix string) (string, bool) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		answer(w, http.StatusBadRequest, problem("bad_request", "an Idempotency-Key is required"))
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref, ok := done[key]; ok {
		return ref, true
	}
	s.next++
	ref := fmt.Sprintf("%s-%05d", prefix, 70412+s.next)
	done[key] = ref
	return ref, true
}

// factor reads the one field of a verification request.
func (s *Server) factor(w http.ResponseWriter, r *http.Request, field string) (string, bool) {
	var body map[string]string
	if json.NewDecoder(r.Body).Decode(&body) != nil || body[field] == "" {
		answer(w, http.StatusBadRequest, problem("bad_request", "the request needs "+field))
		return "", false
	}
	s.mu.Lock()
	s.factors = append(s.factors, body[field])
	s.mu.Unlock()
	time.Sleep(time.Duration(s.slow.Load()))
	return body[field], true
}

type claims struct {
	User     string   `json:"preferred_username"`
	Accounts []string `json:"northgate_accounts"`
}

// caller verifies the bearer token and finds the customer it is for.
func (s *Server) caller(h func(http.ResponseWriter, *http.Request, Customer)) http.HandlerFunc {
	return s.token(func(w http.ResponseWriter, r *http.Request, c claims) {
		cu, ok := s.customers[c.User]
		if !ok {
			answer(w, http.StatusNotFound, problem("not_found", "no such customer"))
			return
		}
		h(w, r, cu)
	})
}

// account finds the path's account among those the token holds; any
// other is not found.
func (s *Server) account(h func(http.ResponseWriter, *http.Request, *Account)) http.HandlerFunc {
	return s.token(func(w http.ResponseWriter, r *http.Request, c claims) {
		ref := r.PathValue("ref")
		a := s.accounts[ref]
		if a == nil || a.Holder != c.User || !slices.Contains(c.Accounts, ref) {
			answer(w, http.StatusNotFound, problem("not_found", "no such account"))
			return
		}
		h(w, r, a)
	})
}

func (s *Server) token(h func(http.ResponseWriter, *http.Request, claims)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "a bearer token is required"))
			return
		}
		tok, err := s.verify(r.Context(), raw)
		if err != nil {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "the token is not one the bank takes"))
			return
		}
		var c claims
		if err := tok.Claims(&c); err != nil || c.User == "" {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "the token's claims do not read"))
			return
		}
		s.Asked.Add(1)
		h(w, r, c)
	}
}

func problem(code, msg string) map[string]string {
	return map[string]string{"code": code, "message": msg}
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
