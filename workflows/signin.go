package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/sentences"
	"go.temporal.io/sdk/workflow"
)

// DefaultSignInTTL is how long a call waits for the person to sign in when
// Settings.SignInTTL is zero.
const DefaultSignInTTL = 10 * time.Minute

// MaxSignInRounds bounds how many times one call asks for a sign-in: a
// credential that still falls short after this many ends the call failed.
const MaxSignInRounds = 3

// signInNeed is why a call must wait for a sign-in before it can go on,
// and the requester tier its row names (the verdict's), whatever the code:
// the sign-in a page asks for must reach it.
type signInNeed struct {
	code          policy.Code
	result        json.RawMessage
	tier          string
	maxAgeSeconds int64
}

// asked is the need as the status query shows it: the row's requester
// tier and how recent, else a step-up's from the refusal's details.
func (n signInNeed) asked() *SignInNeed {
	out := &SignInNeed{Code: n.code, Tier: n.tier, MaxAgeSeconds: n.maxAgeSeconds}
	var up activities.StepUp
	if out.Tier == "" && n.code == policy.CodeStepUpRequired && json.Unmarshal(n.result, &up) == nil {
		out.Tier, out.MaxAgeSeconds = up.RequiredTier, up.MaxAgeSeconds
	}
	return out
}

// signInWait is the call's wait for its person to sign in: whether it
// waits at all (its shape has the wait and it has a person to sign in),
// what needs it now, the rounds so far, and the one deadline set at the
// first.
type signInWait struct {
	waits   bool
	need    *signInNeed
	rounds  int
	timer   workflow.Future
	ttl     time.Duration
	expires string
}

// ask asks for a sign-in instead of ending the call, when the call can
// carry on after one: it waits for sign-ins, nothing was approved yet (an
// approved card runs with the credential it was approved with, or not at
// all), the code is one a sign-in answers, and it has rounds left.
func (w *signInWait) ask(code policy.Code, result json.RawMessage, approved bool, v policy.Verdict) bool {
	if !w.waits || approved || w.rounds >= MaxSignInRounds || (code != policy.CodeCredentialUnavailable && code != policy.CodeStepUpRequired) {
		return false
	}
	w.need = &signInNeed{code: code, result: result, tier: v.RequesterTier, maxAgeSeconds: v.RequesterMaxAgeSeconds}
	return true
}

// await records the wait, publishes it as the first outcome (unless a
// card came first) and waits for the credential signal or the sign-in
// deadline, which is set once, at the first wait (set is the deployment's
// wait). It returns the credential the person signed in with; with none,
// the call has ended expired with res.
func (w *signInWait) await(ctx workflow.Context, set time.Duration, b *board, bk *books, claim *activities.Claim) (string, ToolCallResult, error) {
	need := *w.need
	w.need = nil
	w.rounds++
	if err := w.startTimer(ctx, set); err != nil {
		return "", ToolCallResult{}, err
	}
	b.status.ExpiresAt = w.expires
	b.status.SignIn = need.asked()
	b.set(StatusAwaitingSignIn, need.code)
	msg := sentences.Say(sentences.MustSignIn, signInWhy(need.code), w.expires)
	if err := bk.audit(activities.AuditInput{Key: fmt.Sprintf("awaiting-sign-in-%d", w.rounds), Event: activities.EventAwaitingSignIn, Reason: need.code,
		Message: msg, Args: b.in.Args, Resource: b.about(policy.Verdict{}), Claim: claim}); err != nil {
		return "", ToolCallResult{}, err
	}
	b.publish(b.result(StatusAwaitingSignIn, need.code, msg, false, true, need.result))
	workflow.GetLogger(ctx).Info("waiting for sign-in", "tool", b.in.Tool, "code", need.code, "expiresAt", w.expires)

	ch := workflow.GetSignalChannel(ctx, CredentialSignal)
	for {
		var got *CredentialInput
		expired := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(ch workflow.ReceiveChannel, _ bool) { got = takeCredential(ctx, ch) })
		sel.AddFuture(w.timer, func(workflow.Future) { expired = true })
		sel.Select(ctx)
		if expired {
			b.status.SignIn = nil
			b.set(StatusExpired, policy.CodeExpired)
			msg := sentences.Say(sentences.SignInExpired, w.ttl, b.in.Tool)
			if err := bk.audit(activities.AuditInput{Key: "expired", Event: activities.EventExpired, Reason: policy.CodeExpired, Message: msg,
				Args: b.in.Args, Resource: b.about(policy.Verdict{})}); err != nil {
				return "", ToolCallResult{}, err
			}
			return "", b.result(StatusExpired, policy.CodeExpired, msg, false, true, nil), nil
		}
		if got != nil {
			b.status.ExpiresAt, b.status.SignIn = "", nil
			b.set(StatusDeciding, "")
			workflow.GetLogger(ctx).Info("sign-in received; the chain runs again", "tool", b.in.Tool, "round", w.rounds)
			return got.CredentialRef, ToolCallResult{}, nil
		}
	}
}

// startTimer sets the wait's deadline at the first wait: the deployment's
// wait set (DefaultSignInTTL when zero), recorded.
func (w *signInWait) startTimer(ctx workflow.Context, set time.Duration) error {
	if w.timer != nil {
		return nil
	}
	var ttl time.Duration
	if err := workflow.SideEffectWithOptions(ctx, workflow.SideEffectOptions{Summary: "sign-in wait in force"}, func(workflow.Context) any {
		if set <= 0 {
			return DefaultSignInTTL
		}
		return set
	}).Get(&ttl); err != nil {
		return fmt.Errorf("sign-in TTL: %w", err)
	}
	w.ttl = ttl
	w.expires = workflow.Now(ctx).Add(ttl).UTC().Format(time.RFC3339)
	w.timer = workflow.NewTimerWithOptions(ctx, ttl, workflow.TimerOptions{Summary: fmt.Sprintf("sign-in wait expires after %s", ttl)})
	return nil
}

// signInWhy says in a few words why a sign-in is needed.
func signInWhy(code policy.Code) string { return SignInWhy(code) }

// SignInWhy says, for a person, why a call waits for them to sign in with
// code: a step-up, or no usable sign-in.
func SignInWhy(code policy.Code) string {
	if code == policy.CodeStepUpRequired {
		return sentences.Say(sentences.SignInStronger)
	}
	return sentences.Say(sentences.SignInNone)
}

// takeCredential reads one credential signal. A payload that is not one
// (undecodable, unknown fields, a malformed ref) is logged and skipped:
// the wait goes on, and nothing of it is kept.
func takeCredential(ctx workflow.Context, ch workflow.ReceiveChannel) *CredentialInput {
	var raw json.RawMessage
	before := ch.Len()
	if !ch.ReceiveAsync(&raw) {
		if before > 0 {
			workflow.GetLogger(ctx).Warn("credential signal refused: the payload could not be decoded")
		}
		return nil
	}
	in, err := DecodeCredential(raw)
	if err != nil {
		workflow.GetLogger(ctx).Warn("credential signal refused", "why", err.Error())
		return nil
	}
	return &in
}

// DecodeCredential reads a credential signal strictly: one object with a
// credentialRef that is a valid ID. The error says what to fix.
func DecodeCredential(raw []byte) (CredentialInput, error) {
	in, err := policy.DecodeStrict[CredentialInput](raw, 1<<10)
	if err != nil {
		return CredentialInput{}, fmt.Errorf("the credential signal could not be read: %w", err)
	}
	if !policy.ValidID(in.CredentialRef) {
		return CredentialInput{}, fmt.Errorf("credentialRef must be 1 to %d letters, digits or . _ @ -", policy.MaxIDLength)
	}
	return in, nil
}
