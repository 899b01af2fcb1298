package workflows

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/activities"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
	"go.temporal.io/sdk/workflow"
)

// MaxRefusedDecisions is how many refused decisions a card takes, each one
// audited. The next refused decision locks the card: it ends rejected with
// code locked, and nothing can approve it afterwards.
const MaxRefusedDecisions = 20

// MaxUnsignedAudited is how many refused payloads whose signature does not
// verify (unsigned, forged, undecodable), or that repeat a signed decision
// the card has judged, a card audits one by one; past it they are dropped,
// and counted in one row when the card ends. They never count towards the
// lock: anyone who may signal the workflow could send them, and only a
// signed decision, once, can end a card.
const MaxUnsignedAudited = 20

// batchSize bounds the decisions read in one wake-up, so a flood never
// holds a workflow task past the SDK's deadlock detector (1 s); the rest
// wait in the channel for the next turn of the loop.
const batchSize = 64

// received is one payload of the approval signal: a decision, or why the
// payload is not one.
type received struct {
	a   signoff.Approval
	bad string
}

// refusal is a received payload that does not count, and why; repeat
// says it is a signed decision the card had already judged.
type refusal struct {
	received
	code     policy.Code
	why      string
	verified bool
	repeat   bool
}

// takeDecisions reads up to max payloads from the signal channel. A payload
// the data converter cannot decode (not JSON, or encrypted with a key this
// worker lacks) is dropped by the SDK while receiving; the channel's length
// before and after counts it, so it is refused like any other bad decision.
func takeDecisions(ch workflow.ReceiveChannel, max int) []received {
	var out []received
	for ch.Len() > 0 && len(out) < max {
		before := ch.Len()
		var raw json.RawMessage
		ok := ch.ReceiveAsync(&raw)
		dropped := before - ch.Len()
		if ok {
			dropped--
		}
		for range dropped {
			out = append(out, received{bad: "the payload could not be decoded: it is not JSON, or it is encrypted with a key this worker does not hold"})
		}
		if !ok {
			break
		}
		a, err := signoff.DecodeApproval(raw)
		if err != nil {
			out = append(out, received{bad: err.Error()})
			continue
		}
		out = append(out, received{a: a})
	}
	return out
}

// tally is what a card's refused decisions have counted: refused ones
// (towards the lock), and on a card that locks on signed refusals alone
// (signedLock) the unverified apart (unsigned), with those dropped past
// their cap unaudited; and, on a card where a signed decision counts once
// (judgeVersioned), the signatures judged so far. judging is the rules
// the card is judged by, as recorded when it went up.
type tally struct {
	judging                    judging
	signedLock                 bool
	seen                       map[string]bool
	refused, unsigned, dropped int
}

func newTally(j judging) *tally {
	t := &tally{judging: j, signedLock: j >= judgeSignedLock}
	if j >= judgeVersioned {
		t.seen = map[string]bool{}
	}
	return t
}

// once lets a signed decision count once on a card that keeps track
// (judgeVersioned): received again, the same signature is refused as a
// repeat, which never counts towards the lock, whether it was counted,
// refused or edited the card the first time.
func (t *tally) once(f refusal) refusal {
	if t.seen == nil || !f.verified || f.code == policy.CodeExpired {
		return f
	}
	// By the signature's bytes: base64 has more than one spelling of them.
	sig, _ := base64.StdEncoding.DecodeString(f.a.Signature)
	if t.seen[string(sig)] {
		return refusal{received: f.received, code: policy.CodeInvalidArguments, verified: true, repeat: true,
			why: "this signed decision was received before, and a decision counts once"}
	}
	t.seen[string(sig)] = true
	return f
}

// key is the audit key of refusal f, or "" past its cap (then counted
// in dropped, or in over for the card's summary row). While the card
// waits (summary is empty) a signedLock card counts and caps the
// unverified apart.
func (t *tally) key(f refusal, summary string, over *int) string {
	if t.signedLock && (!f.verified || f.repeat) && summary == "" {
		if t.unsigned++; t.unsigned > MaxUnsignedAudited {
			t.dropped++
			return ""
		}
		return fmt.Sprintf("refused-unsigned-%d", t.unsigned)
	}
	if t.refused++; t.refused > MaxRefusedDecisions {
		*over++
		return ""
	}
	return fmt.Sprintf("refused-%d", t.refused)
}

// refuse audits refused decisions in one write, up to the cap; past it
// they are counted, not written one by one. Once the card has ended
// (summary says when) one row counts the ones past either cap, and unread
// those left unread.
func (k *card) refuse(refused []refusal, unread int, summary string, summaryCode policy.Code) error {
	var rows []activities.AuditInput
	over := unread
	row := func(key string, code policy.Code, msg string) activities.AuditInput {
		return activities.AuditInput{Key: key, Event: activities.EventApprovalRefused, Reason: code, Message: msg,
			Resource: k.board.status.resource, Value: k.d.value(), Tool: k.books.tool, Session: k.books.session}
	}
	for _, f := range refused {
		countApproval(k.ctx, k.books.metricTool, "refused_"+string(f.code)) // the closed set's code, whatever the row says
		f.code = refusalCode(k.tally.judging, f.code)
		key := k.tally.key(f, summary, &over)
		if key == "" {
			continue
		}
		workflow.GetLogger(k.ctx).Warn("approval refused", "code", f.code, "verified", f.verified)
		r := row(key, f.code, "Refused: "+f.why)
		if f.verified {
			who := f.a.Approver
			r.Approver, r.Evidence = &who, f.a.Evidence
		} else {
			r.ClaimedBy = f.a.Approver.UserID
		}
		rows = append(rows, r)
	}
	if over > 0 && summary != "" {
		rows = append(rows, row("refused-past-cap", summaryCode,
			fmt.Sprintf("%d more decisions arrived %s and are not audited one by one (past the cap of %d, or left unread once the card ended); none counted", over, summary, MaxRefusedDecisions)))
	}
	if k.tally.dropped > 0 && summary != "" {
		rows = append(rows, row("refused-unsigned-past-cap", policy.CodeCredentialUnavailable,
			fmt.Sprintf("%d more payloads whose signature did not verify (unsigned, forged or undecodable), or that repeated a signed decision, arrived and were dropped unaudited, past the cap of %d; none counted, nor towards the lock", k.tally.dropped, MaxUnsignedAudited)))
		k.tally.dropped = 0
	}
	return k.books.auditAll(rows)
}

// drain refuses the decisions that arrived after the card ended.
func (k *card) drain(final CallStatus, code policy.Code) error {
	if code == policy.CodeOK {
		code = policy.CodeInvalidArguments
	}
	ch := workflow.GetSignalChannel(k.ctx, ApprovalSignal)
	pending := append(k.late, takeDecisions(ch, batchSize)...)
	k.late = nil
	// Past one batch nothing more is read: the card has ended, and what is
	// left is counted in the summary row unread.
	unread := ch.Len()
	refused := make([]refusal, 0, len(pending))
	for _, r := range pending {
		f := refusal{received: r, code: code, why: "the card is no longer pending (it is " + string(final) + ")"}
		if r.bad != "" {
			f.code, f.why = policy.CodeInvalidArguments, r.bad
		}
		refused = append(refused, f)
	}
	return k.refuse(refused, unread, "after the card was "+string(final), code)
}
