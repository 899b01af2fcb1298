package signoff_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

func TestCheckEvidence(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	issuers := []string{"https://id.example"}
	mfa5 := &policy.Requirement{ACR: policy.ACRMFA, MaxAgeSeconds: 300}
	pwd8 := &policy.Requirement{ACR: policy.ACRPassword, MaxAgeSeconds: 8 * 3600}
	with := func(acr string, age time.Duration) signoff.Approval {
		return signoff.Approval{Evidence: &signoff.AuthEvidence{Issuer: issuers[0], Subject: "kofi", ACR: acr, AuthTime: now.Add(-age).Format(time.RFC3339)}}
	}
	for _, c := range []struct {
		name string
		a    signoff.Approval
		req  *policy.Requirement
		want policy.Code
		why  string
	}{
		{"card from before evidence", signoff.Approval{}, nil, policy.CodeOK, ""},
		{"mfa just now", with(policy.ACRMFA, 10*time.Second), mfa5, policy.CodeOK, ""},
		{"mfa at the edge", with(policy.ACRMFA, 5*time.Minute), mfa5, policy.CodeOK, ""},
		{"mfa satisfies pwd", with(policy.ACRMFA, time.Hour), pwd8, policy.CodeOK, ""},
		{"pwd for a pwd card", with(policy.ACRPassword, 7*time.Hour), pwd8, policy.CodeOK, ""},
		{"no evidence", signoff.Approval{}, mfa5, policy.CodeStepUpRequired, "no sign-in evidence"},
		{"no subject", signoff.Approval{Evidence: &signoff.AuthEvidence{Issuer: issuers[0], ACR: policy.ACRMFA, AuthTime: now.Format(time.RFC3339)}}, mfa5, policy.CodeStepUpRequired, "no sign-in evidence"},
		{"pwd for an mfa card", with(policy.ACRPassword, 10*time.Second), mfa5, policy.CodeStepUpRequired, `needs "mfa"`},
		{"unknown acr", with("urn:gold", 10*time.Second), pwd8, policy.CodeStepUpRequired, "level"},
		{"mfa too old", with(policy.ACRMFA, 5*time.Minute+time.Second), mfa5, policy.CodeStepUpRequired, "within 5m0s"},
		{"eight-hour-old password", with(policy.ACRPassword, 8*time.Hour+time.Minute), pwd8, policy.CodeStepUpRequired, "within 8h0m0s"},
		{"from the future", with(policy.ACRMFA, -signoff.ClockSkew-time.Second), mfa5, policy.CodeStepUpRequired, "future"},
		{"time not a time", signoff.Approval{Evidence: &signoff.AuthEvidence{Issuer: issuers[0], Subject: "kofi", ACR: policy.ACRMFA, AuthTime: "yesterday"}}, mfa5, policy.CodeStepUpRequired, "RFC 3339"},
		{"unknown issuer", signoff.Approval{Evidence: &signoff.AuthEvidence{Issuer: "https://evil.example", Subject: "kofi", ACR: policy.ACRMFA, AuthTime: now.Format(time.RFC3339)}}, mfa5, policy.CodeCredentialUnavailable, "not a trusted"},
	} {
		code, why := signoff.CheckEvidence(c.a, c.req, issuers, now)
		if code != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.name, code, why, c.want, c.why)
		}
	}
	if code, _ := signoff.CheckEvidence(with(policy.ACRMFA, 0), mfa5, nil, now); code != policy.CodeCredentialUnavailable {
		t.Errorf("with no trusted issuer, evidence passed (%s)", code)
	}
}

func TestDecodeApprovalEvidence(t *testing.T) {
	base := `{"decision":"approve","argsHash":"` + strings.Repeat("a", 64) + `","approver":{"userId":"kofi","role":"area_manager","storeIds":[112]},`
	if a, err := signoff.DecodeApproval([]byte(base + `"evidence":{"iss":"https://id.example","sub":"kofi","acr":"mfa","amr":["pwd","otp"],"authTime":"2026-12-01T10:00:00Z"}}`)); err != nil || a.Evidence == nil || a.Evidence.ACR != policy.ACRMFA {
		t.Fatalf("good evidence: %v %+v", err, a.Evidence)
	}
	for name, ev := range map[string]string{
		"long issuer":   `{"iss":"` + strings.Repeat("i", 300) + `","sub":"kofi","acr":"mfa","authTime":"x"}`,
		"many methods":  `{"iss":"i","sub":"kofi","acr":"mfa","amr":["a","b","c","d","e","f","g","h","i"],"authTime":"x"}`,
		"odd method":    `{"iss":"i","sub":"kofi","acr":"mfa","amr":["<b>"],"authTime":"x"}`,
		"unknown field": `{"iss":"i","sub":"kofi","acr":"mfa","authTime":"x","level":"gold"}`,
	} {
		if _, err := signoff.DecodeApproval([]byte(base + `"evidence":` + ev + `}`)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestEvidenceIsSigned(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := signoff.ApprovalKeys{"k1": pub}
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	card := signoff.CardRef{WorkflowID: "toolcall-c1-call8", RunID: "r", ExpiresAt: up.Add(30 * time.Minute).Format(time.RFC3339)}
	a := signoff.SignApproval(signoff.Approval{Decision: signoff.Approve, ArgsHash: "h", Approver: policy.Identity{UserID: "kofi", Role: mangrove.RoleAreaManager, Resources: mangrove.Stores(112)},
		Evidence: &signoff.AuthEvidence{Issuer: "https://id.example", Subject: "kofi", ACR: policy.ACRPassword, AuthTime: up.Format(time.RFC3339)}}, card, "k1", priv, up.Format(time.RFC3339))
	if ok, why := signoff.VerifyApproval(a, card, up, up.Add(30*time.Minute), keys); !ok {
		t.Fatal(why)
	}
	for name, change := range map[string]func(*signoff.AuthEvidence){
		"raised acr":     func(e *signoff.AuthEvidence) { e.ACR = policy.ACRMFA },
		"fresher time":   func(e *signoff.AuthEvidence) { e.AuthTime = up.Add(time.Minute).Format(time.RFC3339) },
		"other issuer":   func(e *signoff.AuthEvidence) { e.Issuer = "https://other.example" },
		"other subject":  func(e *signoff.AuthEvidence) { e.Subject = "ama" },
		"added a method": func(e *signoff.AuthEvidence) { e.AMR = []string{"otp"} },
	} {
		b := a
		e := *a.Evidence
		change(&e)
		b.Evidence = &e
		if ok, _ := signoff.VerifyApproval(b, card, up, up.Add(30*time.Minute), keys); ok {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestEditsAreSignedAndShaped: an edit decision carries its new values,
// the signature covers them, and only an edit may carry any.
func TestEditsAreSignedAndShaped(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := signoff.ApprovalKeys{"k1": pub}
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	card := signoff.CardRef{WorkflowID: "toolcall-c1-call8", RunID: "r", ExpiresAt: up.Add(30 * time.Minute).Format(time.RFC3339)}
	a := signoff.SignApproval(signoff.Approval{Decision: signoff.Edit, ArgsHash: strings.Repeat("a", 64), Approver: policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)},
		Edit: json.RawMessage(`{"quantity":60}`)}, card, "k1", priv, up.Format(time.RFC3339))
	if ok, why := signoff.VerifyApproval(a, card, up, up.Add(30*time.Minute), keys); !ok {
		t.Fatal(why)
	}
	b := a
	b.Edit = json.RawMessage(`{"quantity":500}`)
	if ok, _ := signoff.VerifyApproval(b, card, up, up.Add(30*time.Minute), keys); ok {
		t.Fatal("a changed edit verified")
	}
	raw, _ := json.Marshal(a)
	if _, err := signoff.DecodeApproval(raw); err != nil {
		t.Fatalf("a well-formed edit: %v", err)
	}
	for name, mut := range map[string]func(*signoff.Approval){
		"edit without values": func(x *signoff.Approval) { x.Edit = nil },
		"approve with values": func(x *signoff.Approval) { x.Decision = signoff.Approve },
		"oversized edit values": func(x *signoff.Approval) {
			x.Edit = json.RawMessage(`{"quantity":"` + strings.Repeat("9", signoff.MaxEditBytes) + `"}`)
		},
	} {
		x := a
		mut(&x)
		raw, _ := json.Marshal(x)
		if _, err := signoff.DecodeApproval(raw); err == nil || !strings.Contains(err.Error(), "edit") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestOnePersonUnderTwoNames: the same issuer and subject is one person
// whatever user ID each carries, as is the same user ID; another subject,
// or the same subject at another issuer, is someone else; an unknown
// person matches nobody by sign-in.
func TestOnePersonUnderTwoNames(t *testing.T) {
	kofi := signoff.Person{Issuer: "https://id.example", Subject: "k-7"}
	cases := []struct {
		p    signoff.Person
		id   string
		q    signoff.Person
		qid  string
		same bool
	}{
		{kofi, "kofi.boateng", kofi, "kofi@mangrove.example", true},
		{signoff.Person{}, "kofi", kofi, "kofi", true},
		{kofi, "kofi", signoff.Person{Issuer: "https://id.example", Subject: "a-3"}, "adwoa", false},
		{kofi, "kofi", signoff.Person{Issuer: "https://other.example", Subject: "k-7"}, "k", false},
		{signoff.Person{}, "a", signoff.Person{}, "b", false},
		{signoff.Person{Issuer: "https://id.example"}, "a", signoff.Person{Issuer: "https://id.example"}, "b", false},
		{kofi, "", kofi, "", true},
		{signoff.Person{}, "", signoff.Person{}, "", false},
	}
	for _, c := range cases {
		if got := signoff.SamePerson(c.p, c.id, c.q, c.qid); got != c.same {
			t.Errorf("SamePerson(%+v %q, %+v %q) = %v, want %v", c.p, c.id, c.q, c.qid, got, c.same)
		}
	}
}

// TestARejectionNeedsASignInOnly: a sign-in at a trusted issuer at any
// known level and any age counts for a rejection; none, an untrusted
// issuer, an unknown level, or a time in the future does not.
func TestARejectionNeedsASignInOnly(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	issuers := []string{"https://id.example"}
	ev := func(iss, acr string, at time.Time) *signoff.AuthEvidence {
		return &signoff.AuthEvidence{Issuer: iss, Subject: "kofi", ACR: acr, AuthTime: at.Format(time.RFC3339)}
	}
	cases := []struct {
		e    *signoff.AuthEvidence
		want policy.Code
	}{
		{ev("https://id.example", policy.ACRPassword, now.Add(-7*time.Hour)), policy.CodeOK},
		{ev("https://id.example", policy.ACRMFA, now), policy.CodeOK},
		{nil, policy.CodeStepUpRequired},
		{ev("https://evil.example", policy.ACRMFA, now), policy.CodeCredentialUnavailable},
		{ev("https://id.example", "sms", now), policy.CodeStepUpRequired},
		{ev("https://id.example", policy.ACRPassword, now.Add(time.Hour)), policy.CodeStepUpRequired},
		{&signoff.AuthEvidence{Issuer: "https://id.example", ACR: policy.ACRMFA, AuthTime: now.Format(time.RFC3339)}, policy.CodeStepUpRequired},
	}
	for i, c := range cases {
		if got, why := signoff.CheckSignIn(signoff.Approval{Decision: signoff.Reject, Evidence: c.e}, issuers, now); got != c.want {
			t.Errorf("case %d: %s (%s), want %s", i, got, why, c.want)
		}
	}
	strict := &policy.Requirement{ACR: policy.ACRMFA, MaxAgeSeconds: 300}
	if got, _ := signoff.CheckEvidence(signoff.Approval{Decision: signoff.Approve, Evidence: cases[0].e}, strict, issuers, now); got != policy.CodeStepUpRequired {
		t.Errorf("the password sign-in approves a card that needs mfa: %s", got)
	}
}
