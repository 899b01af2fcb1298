package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/temporal"
)

// Unverified is a refusal for want of a verified tier, as the model reads
// it: the tier needed and held, the factor to ask for and the tool that
// takes it, and why the row needs the tier. It carries nothing of the
// action: no reference, dispatch, delivery estimate or address.
type Unverified struct {
	RequiredTier string `json:"requiredTier"`
	HeldTier     string `json:"heldTier"`
	Factor       string `json:"factor,omitempty"`
	VerifyWith   string `json:"verifyWith,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// LockedOut says the caller spent a factor's budget: nothing that
	// needs more than the weakest tier runs until a person hands them back.
	LockedOut bool `json:"lockedOut,omitempty"`
	Handoff   bool `json:"handoff,omitempty"`
}

// Message is what the model is told.
func (u Unverified) Message(system string) string {
	if u.LockedOut {
		return sentences.Say(sentences.LockedOutOfVerification, system)
	}
	msg := sentences.Say(sentences.VerifiedAt, u.RequiredTier, u.HeldTier)
	if u.Reason != "" {
		msg += sentences.Say(sentences.VerifiedReason, sentences.Capital(u.Reason))
	}
	if u.VerifyWith != "" {
		msg += sentences.Say(sentences.VerifyWith, u.Factor, u.VerifyWith)
	}
	return msg + sentences.Say(sentences.DoNotDoItAnotherWay)
}

// VerifyOutcome is a verification tool's result: passed, retry or
// locked_out, and what the caller now holds. It never holds the factor.
type VerifyOutcome struct {
	Outcome      string `json:"outcome"`
	Factor       string `json:"factor"`
	HeldTier     string `json:"heldTier"`
	AttemptsLeft *int   `json:"attemptsLeft,omitempty"`
	Handoff      bool   `json:"handoff,omitempty"`
	Next         string `json:"next"`
}

// The outcomes of a verification.
const (
	VerifyPassed    = "passed"
	VerifyRetry     = "retry"
	VerifyLockedOut = "locked_out"
	// VerifyBusy: the budget is held by attempts still being judged; this
	// one was not sent.
	VerifyBusy = "busy"
)

// standing reads what a person holds with a pack in one conversation of
// one sign-in (its credential): the strongest unexpired tier earned there
// (at least the signed-in tier), or the weakest when they are locked out
// or nobody is signed in.
func standing(ctx context.Context, tx pgx.Tx, d policy.Pack, who *signoff.Person, conversation, credentialRef string) (string, bool, error) {
	v := d.Verification
	if who == nil {
		return v.Weakest(), false, nil
	}
	var locked bool
	err := tx.QueryRow(ctx, `SELECT locked_at IS NOT NULL FROM caller_verification WHERE pack = $1 AND issuer = $2 AND subject = $3`,
		d.Name, who.Issuer, who.Subject).Scan(&locked)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", false, fmt.Errorf("read the caller's verification: %w", err)
	}
	if locked {
		return v.Weakest(), true, nil
	}
	held := v.SignedInTier()
	rows, err := tx.Query(ctx, `SELECT tier FROM caller_tiers WHERE pack = $1 AND issuer = $2 AND subject = $3 AND conversation_id = $4 AND expires_at > clock_timestamp() AND credential_ref = $5`,
		d.Name, who.Issuer, who.Subject, conversation, credentialRef)
	if err != nil {
		return "", false, fmt.Errorf("read the caller's tiers: %w", err)
	}
	tiers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", false, fmt.Errorf("read the caller's tiers: %w", err)
	}
	for _, t := range tiers {
		if v.Rank(t) > v.Rank(held) {
			held = t
		}
	}
	return held, false, nil
}

// personOf is the person whose sign-in issued a credential of userID, nil
// when there is none.
func personOf(ctx context.Context, tx pgx.Tx, credentialRef, userID string) (*signoff.Person, error) {
	if credentialRef == "" || userID == "" {
		return nil, nil
	}
	var p signoff.Person
	err := tx.QueryRow(ctx, `SELECT coalesce(issuer, ''), coalesce(subject, '') FROM vault.credentials WHERE ref = $1 AND user_id = $2 AND NOT revoked`,
		credentialRef, userID).Scan(&p.Issuer, &p.Subject)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !p.Known() {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the caller's sign-in: %w", err)
	}
	return &p, nil
}

// shortOf holds what a caller holds against what the row needs: nil when
// it is enough.
func (a *Activities) shortOf(ctx context.Context, tx pgx.Tx, tool string, need *policy.VerifiedNeed, credentialRef, userID, conversation string) (*Unverified, error) {
	d, ok := a.Policy.PackOf(tool)
	if need == nil || !ok || d.Verification == nil {
		return nil, nil
	}
	who, err := personOf(ctx, tx, credentialRef, userID)
	if err != nil {
		return nil, err
	}
	held, locked, err := standing(ctx, tx, d, who, conversation, credentialRef)
	if err != nil {
		return nil, err
	}
	v := d.Verification
	required := need.Tier
	if v.Rank(required) < 0 {
		required = v.Strictest()
	}
	if locked && v.Rank(required) > 0 {
		return &Unverified{RequiredTier: required, HeldTier: held, Reason: need.Why, LockedOut: true, Handoff: true}, nil
	}
	if v.Rank(held) >= v.Rank(required) {
		return nil, nil
	}
	u := &Unverified{RequiredTier: required, HeldTier: held, Reason: need.Why}
	if name, f, ok := d.FactorFor(held, required); ok {
		u.Factor, u.VerifyWith = f.Name, name
	}
	return u, nil
}

// unverifiedError is the activity error of a call refused for its tier.
func unverifiedError(u Unverified) error {
	return temporal.NewNonRetryableApplicationError("the caller is not verified at the row's tier", ErrUnverified, nil, u)
}

// checkVerified refuses, before anything is sent upstream, a call whose
// caller holds less than its row's tier now: a lockout since the card went
// up, or a tier that expired.
func (a *Activities) checkVerified(ctx context.Context, in Acting) error {
	if in.Verified == nil {
		return nil
	}
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return temporal.NewApplicationErrorWithCause("the verification store is unreachable", ErrUnavailable, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	u, err := a.shortOf(ctx, tx, in.Tool, in.Verified, in.CredentialRef, in.UserID, in.ConversationID)
	if err != nil {
		return temporal.NewApplicationErrorWithCause("the verification store is unreachable", ErrUnavailable, err)
	}
	if u != nil {
		return unverifiedError(*u)
	}
	return nil
}

// verify runs a verification tool: it opens the sealed factor, spends one
// attempt of the person's budget before the upstream is asked (so
// concurrent guesses cannot share one), asks the upstream whether it
// matches, and raises the caller's tier in this conversation or counts
// the miss, locking the person out when the budget is spent. A locked-out
// person's factor is not sent upstream at all, and grants nothing.
func (a *Activities) verify(ctx context.Context, in CallInput, spec policy.ToolSpec, token string) (CallResult, error) {
	d, _ := a.Policy.PackOf(in.Tool)
	v, f := d.Verification, *spec.Verifies
	var args map[string]json.RawMessage
	var ref string
	if json.Unmarshal(in.Args, &args) != nil || json.Unmarshal(args[f.Arg], &ref) != nil || !policy.IsSealed(ref) {
		return CallResult{}, badArgs(errors.New("the factor is not sealed"))
	}
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return CallResult{}, temporal.NewApplicationErrorWithCause("the verification store is unreachable", ErrUnavailable, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a committed tx ignores it
	var factor *string
	if err := tx.QueryRow(ctx, `SELECT vault.open_factor($1, $2, $3)`, ref, in.CredentialRef, in.Tool).Scan(&factor); err != nil {
		return CallResult{}, temporal.NewApplicationErrorWithCause("the vault is unreachable", ErrUnavailable, err)
	}
	if factor == nil {
		return CallResult{}, temporal.NewNonRetryableApplicationError("the sealed factor was used already, expired, or sealed for another caller or tool: ask the caller for it again", ErrUpstream, nil)
	}
	who, err := personOf(ctx, tx, in.CredentialRef, in.UserID)
	if err != nil || who == nil {
		return CallResult{}, temporal.NewNonRetryableApplicationError("the caller's sign-in names no person", ErrCredential, nil)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO caller_verification (pack, issuer, subject) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, d.Name, who.Issuer, who.Subject); err != nil {
		return CallResult{}, fmt.Errorf("verify: %w", err)
	}
	var locked bool
	var spent int
	if err := tx.QueryRow(ctx, `SELECT locked_at IS NOT NULL, coalesce((failures->>$4)::int, 0) FROM caller_verification
		WHERE pack = $1 AND issuer = $2 AND subject = $3 FOR UPDATE`, d.Name, who.Issuer, who.Subject, f.Name).Scan(&locked, &spent); err != nil {
		return CallResult{}, fmt.Errorf("verify: %w", err)
	}
	budget := v.BudgetOrDefault()
	if locked {
		return outcome(VerifyOutcome{Outcome: VerifyLockedOut, Factor: f.Name, HeldTier: v.Weakest(), Handoff: true})
	}
	if spent >= budget {
		// The budget is spent by attempts still being judged: this one is
		// not sent, and locks no one out on its own.
		if err := tx.Commit(ctx); err != nil {
			return CallResult{}, fmt.Errorf("verify: commit: %w", err)
		}
		return outcome(VerifyOutcome{Outcome: VerifyBusy, Factor: f.Name, HeldTier: v.Weakest()})
	}
	if _, err := tx.Exec(ctx, `UPDATE caller_verification SET failures = failures || jsonb_build_object($4::text, $5::int)
		WHERE pack = $1 AND issuer = $2 AND subject = $3`, d.Name, who.Issuer, who.Subject, f.Name, spent+1); err != nil {
		return CallResult{}, fmt.Errorf("verify: spend an attempt: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return CallResult{}, fmt.Errorf("verify: commit: %w", err)
	}

	body, _ := json.Marshal(map[string]string{f.Arg: *factor})
	path, _, err := request(spec.Route, in.Args, in.Resources)
	if err != nil {
		return CallResult{}, badArgs(err)
	}
	answer, err := a.do(ctx, a.upstream(in.Tool), http.MethodPost, path, token, "", body)
	var app *temporal.ApplicationError
	if err != nil && errors.As(err, &app) && app.Type() == ErrUnavailable {
		// The upstream is down: it judged nothing, so the attempt is given
		// back. Any other failure (a refusal, a timeout after sending) may
		// have been judged, and keeps it spent.
		if _, rerr := a.Pool.Exec(ctx, `UPDATE caller_verification SET failures = failures || jsonb_build_object($4::text, greatest(coalesce((failures->>$4)::int, 1) - 1, 0))
			WHERE pack = $1 AND issuer = $2 AND subject = $3 AND locked_at IS NULL`, d.Name, who.Issuer, who.Subject, f.Name); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return CallResult{}, err
	}
	if err != nil {
		return CallResult{}, err
	}
	var said struct {
		Match *bool `json:"match"`
	}
	if json.Unmarshal(answer, &said) != nil || said.Match == nil {
		return CallResult{}, temporal.NewNonRetryableApplicationError("the upstream's answer says neither match nor miss", ErrUpstream, nil)
	}
	return a.settle(ctx, d, *who, in, f, *said.Match)
}

// settle records what the upstream said. A match raises the caller's tier
// in this conversation only while the person is not locked out (a lockout
// that landed meanwhile wins); a miss that spends the budget locks them out
// and ends every tier they hold.
func (a *Activities) settle(ctx context.Context, d policy.Pack, who signoff.Person, in CallInput, f policy.Factor, match bool) (CallResult, error) {
	v := d.Verification
	tx, err := a.Pool.Begin(ctx)
	if err != nil {
		return CallResult{}, temporal.NewApplicationErrorWithCause("the verification store is unreachable", ErrUnavailable, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a committed tx ignores it
	var locked bool
	var spent int
	if err := tx.QueryRow(ctx, `SELECT locked_at IS NOT NULL, coalesce((failures->>$4)::int, 0) FROM caller_verification
		WHERE pack = $1 AND issuer = $2 AND subject = $3 FOR UPDATE`, d.Name, who.Issuer, who.Subject, f.Name).Scan(&locked, &spent); err != nil {
		return CallResult{}, fmt.Errorf("verify: %w", err)
	}
	var out VerifyOutcome
	switch {
	case locked:
		out = VerifyOutcome{Outcome: VerifyLockedOut, Factor: f.Name, HeldTier: v.Weakest(), Handoff: true}
	case match:
		wf, _ := workflowIDs(ctx)
		if _, err := tx.Exec(ctx, `UPDATE caller_verification SET failures = failures - $4::text WHERE pack = $1 AND issuer = $2 AND subject = $3`,
			d.Name, who.Issuer, who.Subject, f.Name); err != nil {
			return CallResult{}, fmt.Errorf("verify: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO caller_tiers (pack, issuer, subject, conversation_id, credential_ref, factor, tier, workflow_id, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp() + make_interval(secs => $9))
			ON CONFLICT (pack, issuer, subject, conversation_id, credential_ref, factor) DO UPDATE SET tier = EXCLUDED.tier, workflow_id = EXCLUDED.workflow_id,
			  granted_at = clock_timestamp(), expires_at = EXCLUDED.expires_at`,
			d.Name, who.Issuer, who.Subject, in.ConversationID, in.CredentialRef, f.Name, f.Grants, wf, v.LastsOrDefault().Seconds()); err != nil {
			return CallResult{}, fmt.Errorf("verify: grant: %w", err)
		}
		held, _, err := standing(ctx, tx, d, &who, in.ConversationID, in.CredentialRef)
		if err != nil {
			return CallResult{}, err
		}
		out = VerifyOutcome{Outcome: VerifyPassed, Factor: f.Name, HeldTier: held}
	case spent >= v.BudgetOrDefault():
		if err := lockOut(ctx, tx, d.Name, who, f.Name); err != nil {
			return CallResult{}, err
		}
		out = VerifyOutcome{Outcome: VerifyLockedOut, Factor: f.Name, HeldTier: v.Weakest(), Handoff: true}
	default:
		held, _, err := standing(ctx, tx, d, &who, in.ConversationID, in.CredentialRef)
		if err != nil {
			return CallResult{}, err
		}
		left := v.BudgetOrDefault() - spent
		out = VerifyOutcome{Outcome: VerifyRetry, Factor: f.Name, HeldTier: held, AttemptsLeft: &left}
	}
	if err := tx.Commit(ctx); err != nil {
		return CallResult{}, fmt.Errorf("verify: commit: %w", err)
	}
	return outcome(out)
}

// discardFactor deletes, unread, the sealed factor of a verification call
// admission refuses: it would otherwise wait in the vault for a call that
// will never open it.
func (a *Activities) discardFactor(ctx context.Context, tx pgx.Tx, in AdmitInput) error {
	spec, ok := a.Policy.Spec(in.Tool)
	if !ok || spec.Verifies == nil {
		return nil
	}
	var args map[string]json.RawMessage
	var ref string
	if json.Unmarshal(in.Verdict.Args, &args) != nil || json.Unmarshal(args[spec.Verifies.Arg], &ref) != nil {
		return nil
	}
	cred := in.CredentialRef
	if cred == "" {
		cred = in.Session.CredentialRef
	}
	if _, err := tx.Exec(ctx, `SELECT vault.open_factor($1, $2, $3)`, ref, cred, in.Tool); err != nil {
		return fmt.Errorf("admit: discard the sealed factor: %w", err)
	}
	return nil
}

// lockOut locks a person out of a pack's verification and ends every tier
// they hold, in every conversation.
func lockOut(ctx context.Context, tx pgx.Tx, pack string, who signoff.Person, factor string) error {
	if _, err := tx.Exec(ctx, `UPDATE caller_verification SET locked_at = coalesce(locked_at, clock_timestamp()), locked_factor = coalesce(locked_factor, $4)
		WHERE pack = $1 AND issuer = $2 AND subject = $3`, pack, who.Issuer, who.Subject, factor); err != nil {
		return fmt.Errorf("verify: lock out: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM caller_tiers WHERE pack = $1 AND issuer = $2 AND subject = $3`, pack, who.Issuer, who.Subject); err != nil {
		return fmt.Errorf("verify: end the tiers: %w", err)
	}
	return nil
}

// outcome is a verification's result with what the model does next.
func outcome(o VerifyOutcome) (CallResult, error) {
	switch o.Outcome {
	case VerifyPassed:
		o.Next = sentences.Say(sentences.VerifyPassed, o.HeldTier)
	case VerifyRetry:
		o.Next = sentences.Say(sentences.VerifyRetry, *o.AttemptsLeft)
	case VerifyBusy:
		o.Next = sentences.Say(sentences.VerifyBusy)
	default:
		o.Next = sentences.Say(sentences.VerifyLockedOut)
	}
	b, err := json.Marshal(o)
	return CallResult{Result: b}, err
}
