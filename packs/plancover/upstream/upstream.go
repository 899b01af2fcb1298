// Package upstream is a stand-in for PlanCover, the insurer's API behind
// the plancover pack: what the member portal looks like to toolgate. It
// verifies each bearer token as an OAuth resource server does (signed by
// the provider, from its issuer, for this service's audience alone,
// unexpired), serves a portal only to a token whose plancover_portals claim
// holds it (any other is not found), scopes claims to the token's member,
// answers a hospital search with every record of the region whatever it is
// asked (as PlanCover does), and serves the policy wordings to anyone. Its
// knowledge index can be taken down (SetIndexDown) to show what a dead
// index answers. It imports nothing of toolgate.
package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Policy is one portal: a policy of a member.
type Policy struct {
	PortalRef    string   `json:"portal_ref"`
	PolicyNumber string   `json:"policy_number"`
	Plan         string   `json:"plan"`
	Status       string   `json:"status"`
	Insured      []string `json:"insured"`
	SumInsured   int64    `json:"sum_insured_inr"`
	RoomRent     string   `json:"room_rent_limit"`
	CoPay        string   `json:"co_payment"`
	Renews       string   `json:"renews_on"`
	member       string
	benefits     []Benefit
	documents    []Document
}

// Benefit is one covered benefit and its limit.
type Benefit struct {
	Benefit string `json:"benefit"`
	Limit   string `json:"limit"`
}

// Document is one of a policy's documents.
type Document struct {
	Title  string `json:"title"`
	Kind   string `json:"kind"`
	Issued string `json:"issued_on"`
}

// Claim is one claim of a member. PlanCover's status endpoint wants its
// number and its settlement endpoint its id; this stand-in takes either
// at both, as the service in front of them translates.
type Claim struct {
	Number   string `json:"claim_number"`
	ID       int64  `json:"claim_id"`
	Patient  string `json:"patient"`
	Hospital string `json:"hospital"`
	Stage    string `json:"stage"`
	Waiting  string `json:"waiting_for,omitempty"`
	Claimed  int64  `json:"claimed_inr"`
	Approved int64  `json:"approved_inr"`
	member   string
}

// Record is one network hospital as PlanCover returns it, with the
// hospital desk's mobile number the model must never see.
type Record struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	City     string `json:"city"`
	District string `json:"district"`
	PinCode  string `json:"pin_code"`
	Mobile   string `json:"desk_mobile"`
	Cashless bool   `json:"cashless"`
}

// Server is PlanCover's state and its token check.
type Server struct {
	verify    func(context.Context, string) (*oidc.IDToken, error)
	policies  map[string]*Policy
	claims    []Claim
	hospitals []Record
	indexDown atomic.Bool
	// Reads counts the requests that reached a member's data.
	Reads atomic.Int64

	mu      sync.Mutex
	queries []string
	// bearers counts the knowledge searches that came with a token,
	// which a search that runs as no one never sends.
	bearers int
}

// New discovers the provider at issuer (retrying for up to wait while it
// starts) and returns a PlanCover whose tokens must be for audience.
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
			return nil, fmt.Errorf("plancover: discover %s: %w", issuer, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Queries are the knowledge searches PlanCover was sent, in order, and
// how many of them came with a bearer token.
func (s *Server) Queries() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries), s.bearers
}

// SetIndexDown takes the knowledge index down (true) or brings it back.
func (s *Server) SetIndexDown(down bool) { s.indexDown.Store(down) }

// Handler serves the member reads under /v1 (a bearer token each) and the
// policy wordings at /v1/knowledge (none).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/policies", s.member(func(w http.ResponseWriter, r *http.Request, m member) {
		out := []*Policy{}
		for _, ref := range m.Portals {
			if p := s.policies[ref]; p != nil && p.member == m.User {
				out = append(out, p)
			}
		}
		answer(w, http.StatusOK, map[string]any{"policies": out})
	}))
	mux.HandleFunc("GET /v1/portals/{ref}/plan", s.portal(func(w http.ResponseWriter, p *Policy) { answer(w, http.StatusOK, p) }))
	mux.HandleFunc("GET /v1/portals/{ref}/benefits", s.portal(func(w http.ResponseWriter, p *Policy) {
		answer(w, http.StatusOK, map[string]any{"portal_ref": p.PortalRef, "benefits": p.benefits})
	}))
	mux.HandleFunc("GET /v1/portals/{ref}/documents", s.portal(func(w http.ResponseWriter, p *Policy) {
		answer(w, http.StatusOK, map[string]any{"portal_ref": p.PortalRef, "documents": p.documents})
	}))
	mux.HandleFunc("GET /v1/portals/{ref}/hospitals", s.portal(func(w http.ResponseWriter, p *Policy) {
		// Whatever the pin code or city: the whole region, as PlanCover does.
		answer(w, http.StatusOK, map[string]any{"region": "Karnataka", "hospitals": s.hospitals})
	}))
	mux.HandleFunc("GET /v1/claims", s.member(func(w http.ResponseWriter, r *http.Request, m member) {
		out := []Claim{}
		for _, c := range s.claims {
			if c.member == m.User {
				out = append(out, c)
			}
		}
		answer(w, http.StatusOK, map[string]any{"claims": out})
	}))
	mux.HandleFunc("GET /v1/claims/{ref}/status", s.claim(func(w http.ResponseWriter, c Claim) {
		answer(w, http.StatusOK, map[string]any{"claim_number": c.Number, "stage": c.Stage, "waiting_for": c.Waiting})
	}))
	mux.HandleFunc("GET /v1/claims/{ref}/settlement", s.claim(func(w http.ResponseWriter, c Claim) {
		answer(w, http.StatusOK, map[string]any{"claim_id": c.ID, "claimed_inr": c.Claimed, "approved_inr": c.Approved, "deducted_inr": c.Claimed - c.Approved})
	}))
	mux.HandleFunc("GET /v1/knowledge", func(w http.ResponseWriter, r *http.Request) {
		if s.indexDown.Load() {
			answer(w, http.StatusServiceUnavailable, problem("index_down", "the knowledge index is not answering"))
			return
		}
		q, company := strings.ToLower(r.URL.Query().Get("q")), r.URL.Query().Get("company")
		s.mu.Lock()
		s.queries = append(s.queries, q)
		if r.Header.Get("Authorization") != "" {
			s.bearers++
		}
		s.mu.Unlock()
		out := []map[string]string{}
		for _, p := range passages {
			if strings.Contains(q, p.topic) && (p.company == "" || p.company == company) {
				out = append(out, map[string]string{"source": p.source, "passage": p.text})
			}
		}
		answer(w, http.StatusOK, map[string]any{"passages": out})
	})
	return mux
}

type member struct {
	User    string   `json:"preferred_username"`
	Portals []string `json:"plancover_portals"`
}

// member verifies the bearer token and reads whose it is.
func (s *Server) member(h func(http.ResponseWriter, *http.Request, member)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "a bearer token is required"))
			return
		}
		tok, err := s.verify(r.Context(), raw)
		if err != nil {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "the token is not one PlanCover takes"))
			return
		}
		var m member
		if err := tok.Claims(&m); err != nil || m.User == "" {
			answer(w, http.StatusUnauthorized, problem("unauthorized", "the token's claims do not read"))
			return
		}
		s.Reads.Add(1)
		h(w, r, m)
	}
}

// portal finds the path's portal among those the token holds; any other
// is not found.
func (s *Server) portal(h func(http.ResponseWriter, *Policy)) http.HandlerFunc {
	return s.member(func(w http.ResponseWriter, r *http.Request, m member) {
		ref := r.PathValue("ref")
		p := s.policies[ref]
		if p == nil || p.member != m.User || !slices.Contains(m.Portals, ref) {
			answer(w, http.StatusNotFound, problem("not_found", "no such portal"))
			return
		}
		h(w, p)
	})
}

// claim finds the path's claim, by number or id, among the token's
// member's own; any other is not found.
func (s *Server) claim(h func(http.ResponseWriter, Claim)) http.HandlerFunc {
	return s.member(func(w http.ResponseWriter, r *http.Request, m member) {
		ref := r.PathValue("ref")
		for _, c := range s.claims {
			if c.member == m.User && (c.Number == ref || strconv.FormatInt(c.ID, 10) == ref) {
				h(w, c)
				return
			}
		}
		answer(w, http.StatusNotFound, problem("not_found", "no such claim"))
	})
}

func problem(code, msg string) map[string]string {
	return map[string]string{"code": code, "message": msg}
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
