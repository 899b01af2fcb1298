package signoff_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

// TestJudgeIsDataInDecisionOut loops over a card's refusals, one row per
// rule a decision must meet, on a card of a pack with no stores and no
// money: each row changes one thing of a decision (or the card) that
// counts, and is refused with its own code, or counts.
func TestJudgeIsDataInDecisionOut(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	up := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := up.Add(5 * time.Minute)
	const issuer = "https://id.example"
	rules := signoff.Rules{Role: "card_supervisor", EscalateTo: "desk_head", Resource: policy.ResourceRef{Kind: "account", ID: "ACC-4471"}, ArgsHash: strings.Repeat("a", 64),
		Card: signoff.CardRef{WorkflowID: "toolcall-desk-4", RunID: "r", ExpiresAt: up.Add(30 * time.Minute).Format(time.RFC3339)}, UpAt: up, Expires: up.Add(30 * time.Minute),
		Keys: signoff.ApprovalKeys{"k1": pub}, Issuers: []string{issuer}, Evidence: &policy.Requirement{ACR: policy.ACRPassword, MaxAgeSeconds: 3600},
		Need: 1, Requester: "cara", RequesterPerson: signoff.Person{Issuer: issuer, Subject: "cara"}, BySignIn: true,
		Action: json.RawMessage(`{"accountRef":"ACC-4471","fee":2500,"reason":"stolen"}`), Editable: []string{"fee"}}
	decision := func(user string, role policy.Role, change func(*signoff.Approval)) signoff.Approval {
		a := signoff.Approval{Decision: signoff.Approve, ArgsHash: rules.ArgsHash, Reason: "checked",
			Approver: policy.Identity{UserID: user, Role: role, Resources: policy.Resources{"account": {"ACC-4471"}}},
			Evidence: &signoff.AuthEvidence{Issuer: issuer, Subject: user, ACR: policy.ACRPassword, AuthTime: now.Add(-time.Minute).Format(time.RFC3339)}}
		if change != nil {
			change(&a)
		}
		return signoff.SignApproval(a, rules.Card, "k1", priv, now.Format(time.RFC3339))
	}
	sam := decision("sam", "card_supervisor", nil)
	withdrawal := func(user string, change func(*signoff.Approval)) signoff.Approval {
		return decision(user, "card_agent", func(a *signoff.Approval) {
			a.Decision, a.Approver.Resources = signoff.Withdraw, nil
			if change != nil {
				change(a)
			}
		})
	}
	withdrawable := func(r *signoff.Rules) { r.Withdrawable = true }
	wpub, wpriv, _ := ed25519.GenerateKey(nil)
	withWithdrawKey := func(r *signoff.Rules) { withdrawable(r); r.WithdrawKeys = signoff.ApprovalKeys{"mcp": wpub} }
	byWithdrawKey := func(a signoff.Approval) signoff.Approval {
		return signoff.SignApproval(a, rules.Card, "mcp", wpriv, now.Format(time.RFC3339))
	}
	// cara confirms her own card in her client: she holds the card's role.
	inClient := func(change func(*signoff.Approval)) signoff.Approval {
		return byWithdrawKey(decision("cara", "card_supervisor", func(a *signoff.Approval) {
			a.Evidence.Via = signoff.ConfirmedInClient
			if change != nil {
				change(a)
			}
		}))
	}
	allowsInClient := func(r *signoff.Rules) { withWithdrawKey(r); r.ConfirmInClient = true }
	rows := []struct {
		name     string
		rules    func(*signoff.Rules)
		a        signoff.Approval
		at       time.Time
		want     policy.Code
		verified bool
	}{
		{name: "counts", a: sam, want: policy.CodeOK, verified: true},
		{name: "after the expiry", a: sam, at: up.Add(31 * time.Minute), want: policy.CodeExpired, verified: true},
		{name: "signed by a stranger", a: signoff.SignApproval(signoff.Approval{Decision: sam.Decision, ArgsHash: sam.ArgsHash, Reason: sam.Reason, Approver: sam.Approver,
			Evidence: sam.Evidence}, rules.Card, "k1", stranger, sam.SignedAt), want: policy.CodeCredentialUnavailable},
		{name: "signed for another card", a: sam, rules: func(r *signoff.Rules) { r.Card.WorkflowID = "toolcall-desk-5" }, want: policy.CodeCredentialUnavailable},
		{name: "another role", a: decision("cara2", "card_agent", nil), want: policy.CodeRole, verified: true},
		{name: "one role up before the escalation", a: decision("dee", "desk_head", nil), want: policy.CodeRole, verified: true},
		{name: "one role up after it", a: decision("dee", "desk_head", nil), rules: func(r *signoff.Rules) { r.Escalated = true }, want: policy.CodeOK, verified: true},
		{name: "another account", a: decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Approver.Resources = policy.Resources{"account": {"ACC-5120"}} }),
			want: policy.CodeResourceScope, verified: true},
		{name: "another action", a: decision("sam", "card_supervisor", func(a *signoff.Approval) { a.ArgsHash = strings.Repeat("b", 64) }), want: policy.CodeInvalidArguments, verified: true},
		{name: "a sign-in too old", a: decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Evidence.AuthTime = now.Add(-2 * time.Hour).Format(time.RFC3339) }),
			want: policy.CodeStepUpRequired, verified: true},
		{name: "an untrusted provider", a: decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Evidence.Issuer = "https://other.example" }),
			want: policy.CodeCredentialUnavailable, verified: true},
		{name: "a rejection needs a sign-in alone", a: decision("sam", "card_supervisor", func(a *signoff.Approval) {
			a.Decision, a.Evidence.AuthTime = signoff.Reject, now.Add(-2*time.Hour).Format(time.RFC3339)
		}), want: policy.CodeOK, verified: true},
		{name: "an edit of an editable arg", a: decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Decision, a.Edit = signoff.Edit, json.RawMessage(`{"fee":1500}`) }),
			want: policy.CodeOK, verified: true},
		{name: "an edit of another arg", a: decision("sam", "card_supervisor", func(a *signoff.Approval) {
			a.Decision, a.Edit = signoff.Edit, json.RawMessage(`{"accountRef":"ACC-5120"}`)
		}), want: policy.CodeInvalidArguments, verified: true},
		{name: "the requester, on a card two must approve", a: decision("cara", "card_supervisor", nil), rules: func(r *signoff.Rules) { r.Need = 2 }, want: policy.CodeRole, verified: true},
		{name: "the requester under another name", a: decision("cara.doyle", "card_supervisor", func(a *signoff.Approval) { a.Evidence.Subject = "cara" }),
			rules: func(r *signoff.Rules) { r.Need = 2 }, want: policy.CodeRole, verified: true},
		{name: "an approver twice", a: sam, rules: func(r *signoff.Rules) { r.Need, r.Approvals = 2, []signoff.Approval{sam} }, want: policy.CodeRole, verified: true},
		{name: "a second approver", a: decision("sol", "card_supervisor", nil), rules: func(r *signoff.Rules) { r.Need, r.Approvals = 2, []signoff.Approval{sam} },
			want: policy.CodeOK, verified: true},
		{name: "the requester withdraws", a: withdrawal("cara", nil), rules: withdrawable, want: policy.CodeOK, verified: true},
		{name: "the requester withdraws a card two must approve", a: withdrawal("cara", nil), rules: func(r *signoff.Rules) { withdrawable(r); r.Need = 2 },
			want: policy.CodeOK, verified: true},
		{name: "a withdrawal needs a sign-in alone", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.AuthTime = now.Add(-5 * time.Hour).Format(time.RFC3339) }),
			rules: withdrawable, want: policy.CodeOK, verified: true},
		{name: "a card put up before withdrawals", a: withdrawal("cara", nil), want: policy.CodeInvalidArguments, verified: true},
		{name: "an approver withdraws", a: withdrawal("sam", func(a *signoff.Approval) { a.Approver.Role = "card_supervisor" }), rules: withdrawable,
			want: policy.CodeRole, verified: true},
		{name: "the requester's user ID at another provider", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Issuer = "https://other.example" }),
			rules: func(r *signoff.Rules) { withdrawable(r); r.Issuers = append(r.Issuers, "https://other.example") }, want: policy.CodeRole, verified: true},
		{name: "the requester's user ID with another subject", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Subject = "mallory" }), rules: withdrawable,
			want: policy.CodeRole, verified: true},
		{name: "the requester under another user ID", a: withdrawal("cara.doyle", func(a *signoff.Approval) { a.Evidence.Subject = "cara" }), rules: withdrawable,
			want: policy.CodeOK, verified: true},
		{name: "by user ID where the call named no person", a: withdrawal("cara", nil),
			rules: func(r *signoff.Rules) { withdrawable(r); r.RequesterPerson = signoff.Person{} }, want: policy.CodeRole, verified: true},
		{name: "an operator's word for the requester", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Issuer, a.Evidence.Subject = signoff.OperatorIssuer, "cara" }),
			rules: func(r *signoff.Rules) { withdrawable(r); r.Issuers = append(r.Issuers, signoff.OperatorIssuer) }, want: policy.CodeOK, verified: true},
		{name: "an operator's word for another user ID", a: withdrawal("cara.doyle", func(a *signoff.Approval) { a.Evidence.Issuer, a.Evidence.Subject = signoff.OperatorIssuer, "cara" }),
			rules: func(r *signoff.Rules) { withdrawable(r); r.Issuers = append(r.Issuers, signoff.OperatorIssuer) }, want: policy.CodeRole, verified: true},
		{name: "an operator's word where operators are not trusted", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Issuer, a.Evidence.Subject = signoff.OperatorIssuer, "cara" }),
			rules: withdrawable, want: policy.CodeCredentialUnavailable, verified: true},
		{name: "another user ID where the call named no person", a: withdrawal("cara.doyle", func(a *signoff.Approval) { a.Evidence.Subject = "cara" }),
			rules: func(r *signoff.Rules) { withdrawable(r); r.RequesterPerson = signoff.Person{} }, want: policy.CodeRole, verified: true},
		{name: "a withdrawal with no sign-in", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence = nil }), rules: withdrawable,
			want: policy.CodeStepUpRequired, verified: true},
		{name: "at the requester's own provider, which names no approver", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Issuer = "urn:desk:demo" }),
			rules: func(r *signoff.Rules) { withdrawable(r); r.RequesterPerson.Issuer = "urn:desk:demo" }, want: policy.CodeOK, verified: true},
		{name: "a withdrawal from an untrusted provider", a: withdrawal("cara", func(a *signoff.Approval) { a.Evidence.Issuer = "https://other.example" }), rules: withdrawable,
			want: policy.CodeCredentialUnavailable, verified: true},
		{name: "a withdrawal of another action", a: withdrawal("cara", func(a *signoff.Approval) { a.ArgsHash = strings.Repeat("b", 64) }), rules: withdrawable,
			want: policy.CodeInvalidArguments, verified: true},
		{name: "a withdrawal signed with the withdrawal key", a: byWithdrawKey(withdrawal("cara", nil)), rules: withWithdrawKey, want: policy.CodeOK, verified: true},
		{name: "an approval signed with the withdrawal key", a: byWithdrawKey(decision("sam", "card_supervisor", nil)), rules: withWithdrawKey, want: policy.CodeCredentialUnavailable},
		{name: "a rejection signed with the withdrawal key", a: byWithdrawKey(decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Decision = signoff.Reject })),
			rules: withWithdrawKey, want: policy.CodeCredentialUnavailable},
		{name: "the requester confirms in the client", a: inClient(nil), rules: allowsInClient, want: policy.CodeOK, verified: true},
		{name: "the requester rejects in the client", a: inClient(func(a *signoff.Approval) { a.Decision = signoff.Reject }), rules: allowsInClient,
			want: policy.CodeOK, verified: true},
		{name: "a confirmation in the client the row does not allow", a: inClient(nil), rules: withWithdrawKey, want: policy.CodeStepUpRequired, verified: true},
		{name: "a confirmation in the client signed by the card UI's key", a: signoff.SignApproval(inClient(nil), rules.Card, "k1", priv, now.Format(time.RFC3339)),
			rules: allowsInClient, want: policy.CodeCredentialUnavailable},
		{name: "an edit in the client", a: inClient(func(a *signoff.Approval) { a.Decision, a.Edit = signoff.Edit, json.RawMessage(`{"fee":1500}`) }),
			rules: allowsInClient, want: policy.CodeInvalidArguments, verified: true},
		{name: "a confirmation in the client on a card two must approve", a: inClient(nil), rules: func(r *signoff.Rules) { allowsInClient(r); r.Need = 2 },
			want: policy.CodeRole, verified: true},
		{name: "an approver confirms in the client", a: byWithdrawKey(decision("sam", "card_supervisor", func(a *signoff.Approval) { a.Evidence.Via = signoff.ConfirmedInClient })),
			rules: allowsInClient, want: policy.CodeRole, verified: true},
		{name: "the requester's user ID with another subject confirms in the client", a: inClient(func(a *signoff.Approval) { a.Evidence.Subject = "mallory" }),
			rules: allowsInClient, want: policy.CodeRole, verified: true},
		{name: "an operator's word for the requester in the client", a: inClient(func(a *signoff.Approval) { a.Evidence.Issuer = signoff.OperatorIssuer }),
			rules: func(r *signoff.Rules) { allowsInClient(r); r.Issuers = append(r.Issuers, signoff.OperatorIssuer) }, want: policy.CodeRole, verified: true},
		{name: "a confirmation in the client on a card that names no evidence", a: inClient(nil), rules: func(r *signoff.Rules) { allowsInClient(r); r.Evidence = nil },
			want: policy.CodeStepUpRequired, verified: true},
		{name: "a confirmation in the client at the requester's own provider", a: inClient(func(a *signoff.Approval) { a.Evidence.Issuer = "urn:desk:demo" }),
			rules: func(r *signoff.Rules) { allowsInClient(r); r.RequesterPerson.Issuer = "urn:desk:demo" }, want: policy.CodeOK, verified: true},
		{name: "a confirmation in the client without the role", a: inClient(func(a *signoff.Approval) { a.Approver.Role = "card_agent" }), rules: allowsInClient,
			want: policy.CodeRole, verified: true},
		{name: "a confirmation in the client with a sign-in too old", a: inClient(func(a *signoff.Approval) { a.Evidence.AuthTime = now.Add(-2 * time.Hour).Format(time.RFC3339) }),
			rules: allowsInClient, want: policy.CodeStepUpRequired, verified: true},
		{name: "a confirmation in the client of another action", a: inClient(func(a *signoff.Approval) { a.ArgsHash = strings.Repeat("b", 64) }), rules: allowsInClient,
			want: policy.CodeInvalidArguments, verified: true},
		{name: "a withdrawal after the expiry", a: withdrawal("cara", nil), rules: withdrawable, at: up.Add(31 * time.Minute), want: policy.CodeExpired, verified: true},
	}
	for _, row := range rows {
		r := rules
		if row.rules != nil {
			row.rules(&r)
		}
		at := now
		if !row.at.IsZero() {
			at = row.at
		}
		j := signoff.Judge(r, row.a, at)
		if j.Code != row.want || j.Verified != row.verified || (j.Code != policy.CodeOK && j.Why == "") {
			t.Errorf("%s: %+v, want %s (verified %v)", row.name, j, row.want, row.verified)
		}
	}
}
