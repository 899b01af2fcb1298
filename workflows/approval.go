package workflows

import (
	"fmt"
	"time"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/workflow"
)

// approval puts a card up for d, waits for a decision that counts (an
// edit puts up a new version), and closes it: an approved card runs its
// stored action once.
func (c *call) approval(d decision) (ToolCallResult, error) {
	k, err := c.cardFor(d)
	if err != nil {
		return ToolCallResult{}, err
	}
	if err := k.putUp(); err != nil {
		return ToolCallResult{}, err
	}
	wctx, cancel := workflow.WithCancel(c.ctx)
	if err := k.startTimers(wctx, c.settings); err != nil {
		cancel()
		return ToolCallResult{}, err
	}
	k, a, ended, err := c.await(k)
	cancel()
	if err != nil {
		return ToolCallResult{}, err
	}
	k.decided(a, ended)
	var res ToolCallResult
	if ended == "" && a.Decision != signoff.Reject && a.Decision != signoff.Withdraw {
		ap, err := k.approve(a)
		if err != nil {
			return ToolCallResult{}, err
		}
		res, err = c.execute(k.d, k.Action, k.ArgsHash, ap)
		if err != nil {
			return res, err
		}
	} else if res, err = k.close(a, ended); err != nil {
		return res, err
	}
	return res, k.drain(res.Status, res.Code)
}

// cardFor is the card to put up for d, held to the settings in force now: it
// shows the dry run's card, or, with none, the exact action.
func (c *call) cardFor(d decision) (*card, error) {
	action, text := d.verdict.Args, ""
	if d.dryRun != nil {
		action, text = d.dryRun.Action, d.dryRun.Card
	} else if c.shape.lean() {
		text = c.settings.Policy.CardText(c.in.Tool, action)
	}
	hash, err := signoff.ArgsHash(c.in.Tool, action)
	if err != nil {
		return nil, fmt.Errorf("hash the action: %w", err)
	}
	held, err := c.shape.held(c.ctx, c.settings, d.verdict.EscalateTo != "")
	if err != nil {
		return nil, err
	}
	c.books.hooks = held.Trust.Hooks
	v, now := d.verdict, workflow.Now(c.ctx)
	expires := now.Add(held.TTL)
	k := &card{d: d, version: firstCardVersion, held: held, ctx: c.ctx, books: c.books, board: c.board,
		clock: &clock{}, tally: newTally(held.Judging)}
	k.Rules = signoff.Rules{Role: v.ApproverRole, EscalateTo: v.EscalateTo, Resource: v.Resource, ArgsHash: hash,
		Card: signoff.CardRef{WorkflowID: c.key, RunID: c.board.status.RunID, ExpiresAt: expires.UTC().Format(time.RFC3339)}, UpAt: now, Expires: expires,
		Keys: held.Trust.Keys, WithdrawKeys: held.Trust.WithdrawKeys, Issuers: held.Trust.Issuers, Evidence: v.Evidence, Need: max(1, v.Approvals), Requester: c.in.Session.UserID,
		RequesterPerson: d.requester, BySignIn: held.Judging >= judgeBySignIn, Action: action, Editable: v.Editable,
		Withdrawable: held.Judging >= judgeWithdrawable, ConfirmInClient: v.ConfirmInClient}
	if held.Judging >= judgeVersioned {
		k.Card.Version = firstCardVersion
	}
	value := int64(0)
	if d.value() != nil {
		value = *d.value()
	}
	k.pending = activities.CardRow{Version: cardPending, Status: activities.CardPending, Tool: c.in.Tool, Session: c.in.Session, Resource: v.Resource,
		Args: action, ArgsHash: hash, Card: text, ValueCents: value, ApproverRole: v.ApproverRole, ExpiresAt: k.Card.ExpiresAt,
		Evidence: v.Evidence, Justification: policy.JustificationOf(v.Args), ApprovalsNeeded: k.Need, CardVersion: firstCardVersion, SignedVersion: k.Card.Version, Editable: v.Editable}
	if d.requester.Known() {
		k.pending.Requester = &d.requester
	}
	return k, nil
}

// await waits on card k until a decision that counts, an expiry or a
// lock ends the wait; each edit on the way puts up the card's next
// version, and the card that stands is returned.
func (c *call) await(k *card) (*card, signoff.Approval, CallStatus, error) {
	for {
		a, ended, err := k.wait()
		if err != nil || ended != "" || a.Decision != signoff.Edit {
			return k, a, ended, err
		}
		// An edit puts the card up again as a new version, or is refused,
		// or finds the tool no longer as accepted, which ends the card.
		next, ended, err := c.revise(k, a)
		if err != nil || ended != "" {
			return k, a, ended, err
		}
		if next != nil {
			k = next
		}
	}
}

// heldSettings are the deployment's choices a card is held to, recorded
// when it goes up, so a redeploy never changes a card in flight.
type heldSettings struct {
	TTL   time.Duration `json:"ttl"`
	Trust trust         `json:"trust"`
	// EscalateAfter is when the card is also offered to the next role up;
	// 0 when never.
	EscalateAfter time.Duration `json:"escalateAfter,omitempty"`
	// Judging is the rules its decisions are judged by: 0 (by user ID, a
	// rejection held to the approval's step-up) on cards recorded before
	// the field, then judgeBySignIn, judgeSignedLock, judgeVersioned and
	// judgeResourceScope.
	Judging judging `json:"judging,omitempty"`
}

// judging names the rules a card's decisions are judged by.
type judging int

const (
	// The zero value tells people apart by user ID, and a rejection needs
	// the approval's sign-in level and age (cards recorded before).
	_ judging = iota
	// judgeBySignIn tells people apart by the issuer and subject of their
	// sign-in as well (signoff.SamePerson), and a rejection needs a
	// sign-in, never the approval's step-up (signoff.CheckSignIn).
	judgeBySignIn
	// judgeSignedLock is judgeBySignIn, and only a refused decision whose
	// signature verifies counts towards the card's lock: one that does
	// not (unsigned, forged, undecodable) is audited up to
	// MaxUnsignedAudited and dropped past it, never ending the card.
	judgeSignedLock
	// judgeVersioned is judgeSignedLock, and a decision's signature names
	// the card's version (signoff.CardRef.Version), so one signed for a
	// version an edit has replaced never counts on a later one; and a
	// signed decision counts once: received again, it is refused like an
	// unsigned payload, never towards the lock.
	judgeVersioned
	// judgeResourceScope is judgeVersioned, and a decision refused for a
	// resource its approver does not hold is audited resource_scope: a
	// card put up before says store_scope to its end (refusalCode).
	judgeResourceScope
	// judgeWithdrawable is judgeResourceScope, and the requester may
	// withdraw the card (signoff.Withdraw); a card put up before refuses a
	// withdrawal as a payload that is no decision (notWithdrawable).
	judgeWithdrawable
)

// judgingNow is the rules a card put up by today's code is judged by.
const judgingNow = judgeWithdrawable

// refusalCode is the code a card judged by j audits a refusal with: the
// closed set's, or the one the card's earlier refusals were audited with.
func refusalCode(j judging, code policy.Code) policy.Code {
	if j < judgeResourceScope && code == policy.CodeResourceScope {
		return policy.CodeStoreScope
	}
	return code
}

// trust is what a decision is checked against: the keys that may sign it
// and the identity providers whose sign-ins it may carry.
type trust struct {
	Keys    signoff.ApprovalKeys `json:"keys"`
	Issuers []string             `json:"issuers"`
	// Hooks says card events go to the webhook (absent before webhooks).
	Hooks bool `json:"hooks,omitempty"`
	// WithdrawKeys sign a requester's withdrawal alone (absent before
	// withdrawals, or where no MCP server signs them).
	WithdrawKeys signoff.ApprovalKeys `json:"withdrawKeys,omitempty"`
}

// trust is the deployment's trust, as configured.
func (s Settings) trust() trust {
	return trust{Keys: s.ApprovalKeys, Issuers: s.ApproverIssuers, Hooks: s.Webhooks, WithdrawKeys: s.WithdrawKeys}
}
