package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// DefaultSignInTTL is how long a call waits for the person to sign in when
// Settings.SignInTTL is zero.
const DefaultSignInTTL = 10 * time.Minute

// MaxSignInRounds bounds how many times one call asks for a sign-in: a
// credential that still falls short after this many ends the call failed.
const MaxSignInRounds = 3

// signInNeed is why a call must wait for a sign-in before it can go on.
type signInNeed struct {
	code   policy.Code
	result json.RawMessage
}

// needSignIn asks for a sign-in instead of ending the call, when the call
// can carry on after one: its shape has the wait (version 6), it has a
// person to sign in, nothing was approved yet (an approved card runs with
// the credential it was approved with, or not at all), and it has rounds
// left.
func (c *call) needSignIn(code policy.Code, result json.RawMessage) bool {
	if c.version < shapeSignInWait || c.in.Session.UserID == "" || c.card.approved != nil || c.signIn.rounds >= MaxSignInRounds ||
		(code != policy.CodeCredentialUnavailable && code != policy.CodeStepUpRequired) {
		return false
	}
	c.signIn.need = &signInNeed{code: code, result: result}
	return true
}

// awaitSignIn records the wait, publishes it as the first outcome (unless a
// card came first) and waits for the credential signal or the sign-in
// deadline, which is set once, at the first wait. It reports whether the
// call was resumed; if not, the call has ended expired with res.
func (c *call) awaitSignIn() (resumed bool, res ToolCallResult, err error) {
	need := *c.signIn.need
	c.signIn.need = nil
	c.signIn.rounds++
	if c.signIn.timer == nil {
		var ttl time.Duration
		set := c.settings.SignInTTL
		if err := workflow.SideEffectWithOptions(c.ctx, workflow.SideEffectOptions{Summary: "sign-in wait in force"}, func(workflow.Context) any {
			if set <= 0 {
				return DefaultSignInTTL
			}
			return set
		}).Get(&ttl); err != nil {
			return false, res, fmt.Errorf("sign-in TTL: %w", err)
		}
		c.signIn.ttl = ttl
		c.signIn.expires = workflow.Now(c.ctx).Add(ttl).UTC().Format(time.RFC3339)
		c.signIn.timer = workflow.NewTimerWithOptions(c.ctx, ttl, workflow.TimerOptions{Summary: fmt.Sprintf("sign-in wait expires after %s", ttl)})
	}
	c.status.ExpiresAt = c.signIn.expires
	c.setStatus(StatusAwaitingSignIn, need.code)
	msg := fmt.Sprintf("The person must sign in before this can run on their behalf (%s). Ask them to sign in; the call waits until %s and carries on by itself once they have. Do not call again.",
		signInWhy(need.code), c.signIn.expires)
	if err := c.audit(activities.AuditInput{Key: fmt.Sprintf("awaiting-sign-in-%d", c.signIn.rounds), Event: activities.EventAwaitingSignIn, Reason: need.code,
		Message: msg, Args: c.in.Args, Resource: c.resourceForAudit(policy.Verdict{}), Claim: c.claim()}); err != nil {
		return false, res, err
	}
	if c.ledger.first == nil {
		c.ledger.first = c.outcome(c.result(StatusAwaitingSignIn, need.code, msg, false, true, need.result))
	}
	workflow.GetLogger(c.ctx).Info("waiting for sign-in", "tool", c.in.Tool, "code", need.code, "expiresAt", c.signIn.expires)

	ch := workflow.GetSignalChannel(c.ctx, CredentialSignal)
	for {
		var got *CredentialInput
		expired := false
		sel := workflow.NewSelector(c.ctx)
		sel.AddReceive(ch, func(ch workflow.ReceiveChannel, _ bool) { got = takeCredential(c.ctx, ch) })
		sel.AddFuture(c.signIn.timer, func(workflow.Future) { expired = true })
		sel.Select(c.ctx)
		if expired {
			c.setStatus(StatusExpired, policy.CodeExpired)
			msg := fmt.Sprintf("The person did not sign in within %s, so nothing ran. If it is still needed, call %s again once they have signed in.", c.signIn.ttl, c.in.Tool)
			if err := c.audit(activities.AuditInput{Key: "expired", Event: activities.EventExpired, Reason: policy.CodeExpired, Message: msg,
				Args: c.in.Args, Resource: c.resourceForAudit(policy.Verdict{})}); err != nil {
				return false, res, err
			}
			return false, c.result(StatusExpired, policy.CodeExpired, msg, false, true, nil), nil
		}
		if got != nil {
			c.signIn.credentialRef = got.CredentialRef
			c.req.Session.CredentialRef = got.CredentialRef
			c.decision.dryRun, c.decision.facts = nil, nil
			c.status.ExpiresAt = ""
			c.setStatus(StatusDeciding, "")
			workflow.GetLogger(c.ctx).Info("sign-in received; the chain runs again", "tool", c.in.Tool, "round", c.signIn.rounds)
			return true, res, nil
		}
	}
}

// signInWhy says in a few words why a sign-in is needed.
func signInWhy(code policy.Code) string {
	if code == policy.CodeStepUpRequired {
		return "this tool needs a stronger sign-in than theirs"
	}
	return "they are not signed in, or their sign-in can no longer be used"
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
