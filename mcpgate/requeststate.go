package mcpgate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/toolgate/toolgate/codec"
	"github.com/toolgate/toolgate/policy"
)

// RequestStateTTL is how long an input-required result's requestState may
// be echoed back: a person confirms a card in minutes, and each retry that
// finds the call still waiting gets a fresh one.
const RequestStateTTL = 15 * time.Minute

// requestStatePurpose is what a requestState is sealed for (codec.Seal):
// it opens as nothing else, and nothing else opens as it.
const requestStatePurpose = "mcp requestState v1"

// The named refusals of an echoed requestState (SEP-2322 asks that it be
// integrity-protected, bound to its principal, short-lived, a digest of
// the request, and single-use). Each is refused before anything is read of
// the call it names.
var (
	ErrStateAltered      = &StateRefusal{"requestState_altered", "it is not a requestState this server sealed, or it was changed"}
	ErrStateExpired      = &StateRefusal{"requestState_expired", "it is older than its 15 minutes; call the tool again without it"}
	ErrStateNotYours     = &StateRefusal{"requestState_not_yours", "it was issued to another signed-in person"}
	ErrStateOtherRequest = &StateRefusal{"requestState_other_request", "it was issued for another tool or other arguments"}
	ErrStateReplayed     = &StateRefusal{"requestState_replayed", "it was used once already; use the one the last answer gave"}
)

// StateRefusal is why an echoed requestState is refused: its name, which
// begins the JSON-RPC error's message, and what to do.
type StateRefusal struct{ Name, Why string }

func (e *StateRefusal) Error() string { return e.Name + ": " + e.Why }

// requestState is what an input-required result hands the client to echo:
// who it was issued to, the call and card it continues, and the request it
// answers, sealed with the codec's keys.
type requestState struct {
	ID string `json:"id"`
	// Ask is the input request it answers: confirmRequest,
	// confirmInClientRequest or signInRequest.
	Ask        string `json:"ask,omitempty"`
	Issuer     string `json:"iss"`
	Subject    string `json:"sub"`
	WorkflowID string `json:"wf"`
	RunID      string `json:"run"`
	ArgsHash   string `json:"argsHash"`
	Expires    int64  `json:"exp"`
	Digest     string `json:"digest"`
}

// requestDigest is the digest of a tools/call a requestState answers: the
// tool and its canonical arguments.
func requestDigest(tool string, args json.RawMessage) (string, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	canonical, err := policy.Canonical(args)
	if err != nil {
		return "", fmt.Errorf("the arguments: %w", err)
	}
	sum := sha256.Sum256(append(append([]byte(tool), 0), canonical...))
	return hex.EncodeToString(sum[:]), nil
}

// sealState seals st, with a fresh single-use ID and an expiry from now.
func sealState(c *codec.Codec, st requestState, now time.Time) (string, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("requestState: %w", err)
	}
	st.ID, st.Expires = hex.EncodeToString(id), now.Add(RequestStateTTL).Unix()
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("requestState: %w", err)
	}
	return c.Seal(requestStatePurpose, b)
}

// openState opens an echoed requestState and holds it to the person who
// echoes it, the request it comes with, and the time; spending its single
// use is the caller's (StateSpender).
func openState(c *codec.Codec, sealed string, id Identity, digest string, now time.Time) (requestState, error) {
	var st requestState
	plain, err := c.Open(requestStatePurpose, sealed)
	if err != nil || json.Unmarshal(plain, &st) != nil || st.ID == "" || st.WorkflowID == "" {
		return requestState{}, ErrStateAltered
	}
	switch {
	case st.Issuer != id.Issuer || st.Subject != id.Subject:
		return st, ErrStateNotYours
	case !now.Before(time.Unix(st.Expires, 0)):
		return st, ErrStateExpired
	case st.Digest != digest:
		return st, ErrStateOtherRequest
	}
	return st, nil
}

// StateSpender spends a requestState's single use: true the first time
// its ID is spent, false after; ErrStateExpired when expires has passed
// by the store's clock. Its record is kept until expires.
type StateSpender func(ctx context.Context, id string, expires time.Time) (bool, error)

// VaultStates spends requestStates in PostgreSQL (mcp_request_states,
// migration 035), so one is spent once across every MCP server.
func VaultStates(pool *pgxpool.Pool) StateSpender {
	return func(ctx context.Context, id string, expires time.Time) (bool, error) {
		var spent *bool
		err := pool.QueryRow(ctx, `SELECT spend_mcp_request_state($1, $2)`, id, expires).Scan(&spent)
		if err != nil {
			return false, fmt.Errorf("spend the requestState: %w", err)
		}
		if spent == nil {
			return false, ErrStateExpired
		}
		return *spent, nil
	}
}

// SignInTaker takes, once, the sign-in the card UI recorded for workflow
// wf by the person issuer and subject: its acr and time, ok false when
// there is none (none made, taken already, or older than 15 minutes).
type SignInTaker func(ctx context.Context, wf, issuer, subject string) (acr string, authTime time.Time, ok bool, err error)

// VaultSignIns takes the sign-ins the card UI recorded for waiting calls
// (take_call_sign_in, migration 036).
func VaultSignIns(pool *pgxpool.Pool) SignInTaker {
	return func(ctx context.Context, wf, issuer, subject string) (string, time.Time, bool, error) {
		var acr *string
		var at *time.Time
		if err := pool.QueryRow(ctx, `SELECT acr, auth_time FROM take_call_sign_in($1, $2, $3)`, wf, issuer, subject).Scan(&acr, &at); err != nil {
			return "", time.Time{}, false, fmt.Errorf("take the sign-in for %s: %w", wf, err)
		}
		if acr == nil || at == nil {
			return "", time.Time{}, false, nil
		}
		return *acr, at.UTC(), true, nil
	}
}
