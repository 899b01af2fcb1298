package policy

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestEveryApproveRowStatesItsEvidence loops over the table: every row that
// can decide approve has evidence rules of its own, covering every value up
// to its hard limit, each at a known acr and a positive age.
func TestEveryApproveRowStatesItsEvidence(t *testing.T) {
	p := Default()
	for _, row := range Table {
		if p.Effective(row.Tool) != DecisionApprove {
			continue
		}
		var own []EvidenceRule
		for _, r := range Evidence {
			if r.Tool == row.Tool {
				own = append(own, r)
			}
		}
		if len(own) == 0 || own[len(own)-1].UpToCents != 0 {
			t.Errorf("%s decides approve but its evidence rules do not end with one for any value", row.Tool)
		}
		for _, r := range own {
			if acrRank(r.ACR) < 0 || r.MaxAge <= 0 {
				t.Errorf("%s: rule %+v needs a known acr and a positive age", row.Tool, r)
			}
		}
		for _, v := range []int64{0, 1, 50000, 50001, row.HardLimitCents} {
			if req := EvidenceFor(Evidence, row.Tool, v); req.ACR == "" || req.MaxAgeSeconds <= 0 {
				t.Errorf("%s at %s: no evidence requirement", row.Tool, Dollars(v))
			}
		}
	}
	for _, r := range Evidence {
		if _, ok := p.Row(r.Tool); !ok {
			t.Errorf("evidence rule for %q, which has no policy row", r.Tool)
		}
	}
}

func TestTransferEvidenceByValue(t *testing.T) {
	for value, want := range map[int64]Requirement{
		38400: {ACR: ACRPassword, MaxAgeSeconds: 8 * 3600},
		50000: {ACR: ACRPassword, MaxAgeSeconds: 8 * 3600},
		50001: {ACR: ACRMFA, MaxAgeSeconds: 300},
		96000: {ACR: ACRMFA, MaxAgeSeconds: 300},
	} {
		if got := EvidenceFor(Evidence, ToolRequestStockTransfer, value); got != want {
			t.Errorf("%s needs %+v, want %+v", Dollars(value), got, want)
		}
	}
	if got := EvidenceFor(Evidence, "no_such_tool", 1); got != StrictestEvidence {
		t.Errorf("a tool without rules needs %+v, want the strictest", got)
	}
	// The verdict of Check records the requirement with the card.
	value := int64(96000)
	v := Default().Check(baseCall(t, Default(), ToolRequestStockTransfer).req, &value)
	if v.Decision != DecisionApprove || v.Evidence == nil || *v.Evidence != (Requirement{ACR: ACRMFA, MaxAgeSeconds: 300}) {
		t.Fatalf("verdict %+v does not record the mfa requirement", v)
	}
}

func TestCheckEvidence(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	issuers := []string{"https://id.example"}
	mfa5 := &Requirement{ACR: ACRMFA, MaxAgeSeconds: 300}
	pwd8 := &Requirement{ACR: ACRPassword, MaxAgeSeconds: 8 * 3600}
	with := func(acr string, age time.Duration) Approval {
		return Approval{Evidence: &AuthEvidence{Issuer: issuers[0], Subject: "kofi", ACR: acr, AuthTime: now.Add(-age).Format(time.RFC3339)}}
	}
	for _, c := range []struct {
		name string
		a    Approval
		req  *Requirement
		want Code
		why  string
	}{
		{"card from before evidence", Approval{}, nil, CodeOK, ""},
		{"mfa just now", with(ACRMFA, 10*time.Second), mfa5, CodeOK, ""},
		{"mfa at the edge", with(ACRMFA, 5*time.Minute), mfa5, CodeOK, ""},
		{"mfa satisfies pwd", with(ACRMFA, time.Hour), pwd8, CodeOK, ""},
		{"pwd for a pwd card", with(ACRPassword, 7*time.Hour), pwd8, CodeOK, ""},
		{"no evidence", Approval{}, mfa5, CodeStepUpRequired, "no sign-in evidence"},
		{"no subject", Approval{Evidence: &AuthEvidence{Issuer: issuers[0], ACR: ACRMFA, AuthTime: now.Format(time.RFC3339)}}, mfa5, CodeStepUpRequired, "no sign-in evidence"},
		{"pwd for an mfa card", with(ACRPassword, 10*time.Second), mfa5, CodeStepUpRequired, `needs "mfa"`},
		{"unknown acr", with("urn:gold", 10*time.Second), pwd8, CodeStepUpRequired, "level"},
		{"mfa too old", with(ACRMFA, 5*time.Minute+time.Second), mfa5, CodeStepUpRequired, "within 5m0s"},
		{"eight-hour-old password", with(ACRPassword, 8*time.Hour+time.Minute), pwd8, CodeStepUpRequired, "within 8h0m0s"},
		{"from the future", with(ACRMFA, -ClockSkew-time.Second), mfa5, CodeStepUpRequired, "future"},
		{"time not a time", Approval{Evidence: &AuthEvidence{Issuer: issuers[0], Subject: "kofi", ACR: ACRMFA, AuthTime: "yesterday"}}, mfa5, CodeStepUpRequired, "RFC 3339"},
		{"unknown issuer", Approval{Evidence: &AuthEvidence{Issuer: "https://evil.example", Subject: "kofi", ACR: ACRMFA, AuthTime: now.Format(time.RFC3339)}}, mfa5, CodeCredentialUnavailable, "not a trusted"},
	} {
		code, why := CheckEvidence(c.a, c.req, issuers, now)
		if code != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.name, code, why, c.want, c.why)
		}
	}
	if code, _ := CheckEvidence(with(ACRMFA, 0), mfa5, nil, now); code != CodeCredentialUnavailable {
		t.Errorf("with no trusted issuer, evidence passed (%s)", code)
	}
}

func TestDecodeApprovalEvidence(t *testing.T) {
	base := `{"decision":"approve","argsHash":"` + strings.Repeat("a", 64) + `","approver":{"userId":"kofi","role":"area_manager","storeIds":[112]},`
	if a, err := DecodeApproval([]byte(base + `"evidence":{"iss":"https://id.example","sub":"kofi","acr":"mfa","amr":["pwd","otp"],"authTime":"2026-12-01T10:00:00Z"}}`)); err != nil || a.Evidence == nil || a.Evidence.ACR != ACRMFA {
		t.Fatalf("good evidence: %v %+v", err, a.Evidence)
	}
	for name, ev := range map[string]string{
		"long issuer":   `{"iss":"` + strings.Repeat("i", 300) + `","sub":"kofi","acr":"mfa","authTime":"x"}`,
		"many methods":  `{"iss":"i","sub":"kofi","acr":"mfa","amr":["a","b","c","d","e","f","g","h","i"],"authTime":"x"}`,
		"odd method":    `{"iss":"i","sub":"kofi","acr":"mfa","amr":["<b>"],"authTime":"x"}`,
		"unknown field": `{"iss":"i","sub":"kofi","acr":"mfa","authTime":"x","level":"gold"}`,
	} {
		if _, err := DecodeApproval([]byte(base + `"evidence":` + ev + `}`)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestEvidenceIsSigned(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := ApprovalKeys{"k1": pub}
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	card := Card{WorkflowID: "toolcall-c1-call8", RunID: "r", ExpiresAt: up.Add(30 * time.Minute).Format(time.RFC3339)}
	a := SignApproval(Approval{Decision: Approve, ArgsHash: "h", Approver: Identity{UserID: "kofi", Role: RoleAreaManager, StoreIDs: []int64{112}},
		Evidence: &AuthEvidence{Issuer: "https://id.example", Subject: "kofi", ACR: ACRPassword, AuthTime: up.Format(time.RFC3339)}}, card, "k1", priv, up.Format(time.RFC3339))
	if ok, why := VerifyApproval(a, card, up, up.Add(30*time.Minute), keys); !ok {
		t.Fatal(why)
	}
	for name, change := range map[string]func(*AuthEvidence){
		"raised acr":     func(e *AuthEvidence) { e.ACR = ACRMFA },
		"fresher time":   func(e *AuthEvidence) { e.AuthTime = up.Add(time.Minute).Format(time.RFC3339) },
		"other issuer":   func(e *AuthEvidence) { e.Issuer = "https://other.example" },
		"other subject":  func(e *AuthEvidence) { e.Subject = "ama" },
		"added a method": func(e *AuthEvidence) { e.AMR = []string{"otp"} },
	} {
		b := a
		e := *a.Evidence
		change(&e)
		b.Evidence = &e
		if ok, _ := VerifyApproval(b, card, up, up.Add(30*time.Minute), keys); ok {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestEscalationGoesOneRoleUp loops over the table: every approve row's
// routing escalates each role but the last to the next role up, and the
// verdict records it.
func TestEscalationGoesOneRoleUp(t *testing.T) {
	for _, row := range Table {
		for i, a := range row.Approvers {
			next, ok := row.EscalationFor(a.Role)
			if last := i == len(row.Approvers)-1; ok == last || (!last && next != row.Approvers[i+1].Role) {
				t.Errorf("%s: %s escalates to %q (%v)", row.Tool, a.Role, next, ok)
			}
		}
	}
	value := int64(38400)
	if v := Default().Check(baseCall(t, Default(), ToolRequestStockTransfer).req, &value); v.EscalateTo != RoleAreaManager {
		t.Fatalf("a $384.00 card escalates to %q", v.EscalateTo)
	}
	value = 96000
	if v := Default().Check(baseCall(t, Default(), ToolRequestStockTransfer).req, &value); v.EscalateTo != "" {
		t.Fatalf("a $960.00 card escalates to %q", v.EscalateTo)
	}
}

// TestEditsAreSignedAndShaped: an edit decision carries its new values,
// the signature covers them, and only an edit may carry any.
func TestEditsAreSignedAndShaped(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := ApprovalKeys{"k1": pub}
	up := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	card := Card{WorkflowID: "toolcall-c1-call8", RunID: "r", ExpiresAt: up.Add(30 * time.Minute).Format(time.RFC3339)}
	a := SignApproval(Approval{Decision: Edit, ArgsHash: strings.Repeat("a", 64), Approver: Identity{UserID: "ama", Role: RoleStoreManager, StoreIDs: []int64{112}},
		Edit: json.RawMessage(`{"quantity":60}`)}, card, "k1", priv, up.Format(time.RFC3339))
	if ok, why := VerifyApproval(a, card, up, up.Add(30*time.Minute), keys); !ok {
		t.Fatal(why)
	}
	b := a
	b.Edit = json.RawMessage(`{"quantity":500}`)
	if ok, _ := VerifyApproval(b, card, up, up.Add(30*time.Minute), keys); ok {
		t.Fatal("a changed edit verified")
	}
	raw, _ := json.Marshal(a)
	if _, err := DecodeApproval(raw); err != nil {
		t.Fatalf("a well-formed edit: %v", err)
	}
	for name, mut := range map[string]func(*Approval){
		"edit without values": func(x *Approval) { x.Edit = nil },
		"approve with values": func(x *Approval) { x.Decision = Approve },
		"oversized edit values": func(x *Approval) {
			x.Edit = json.RawMessage(`{"quantity":"` + strings.Repeat("9", MaxEditBytes) + `"}`)
		},
	} {
		x := a
		mut(&x)
		raw, _ := json.Marshal(x)
		if _, err := DecodeApproval(raw); err == nil || !strings.Contains(err.Error(), "edit") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestOnePersonUnderTwoNames: the same issuer and subject is one person
// whatever user ID each carries, as is the same user ID; another subject,
// or the same subject at another issuer, is someone else; an unknown
// person matches nobody by sign-in.
func TestOnePersonUnderTwoNames(t *testing.T) {
	kofi := Person{Issuer: "https://id.example", Subject: "k-7"}
	cases := []struct {
		p    Person
		id   string
		q    Person
		qid  string
		same bool
	}{
		{kofi, "kofi.boateng", kofi, "kofi@mangrove.example", true},
		{Person{}, "kofi", kofi, "kofi", true},
		{kofi, "kofi", Person{Issuer: "https://id.example", Subject: "a-3"}, "adwoa", false},
		{kofi, "kofi", Person{Issuer: "https://other.example", Subject: "k-7"}, "k", false},
		{Person{}, "a", Person{}, "b", false},
		{Person{Issuer: "https://id.example"}, "a", Person{Issuer: "https://id.example"}, "b", false},
		{kofi, "", kofi, "", true},
		{Person{}, "", Person{}, "", false},
	}
	for _, c := range cases {
		if got := SamePerson(c.p, c.id, c.q, c.qid); got != c.same {
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
	ev := func(iss, acr string, at time.Time) *AuthEvidence {
		return &AuthEvidence{Issuer: iss, Subject: "kofi", ACR: acr, AuthTime: at.Format(time.RFC3339)}
	}
	cases := []struct {
		e    *AuthEvidence
		want Code
	}{
		{ev("https://id.example", ACRPassword, now.Add(-7*time.Hour)), CodeOK},
		{ev("https://id.example", ACRMFA, now), CodeOK},
		{nil, CodeStepUpRequired},
		{ev("https://evil.example", ACRMFA, now), CodeCredentialUnavailable},
		{ev("https://id.example", "sms", now), CodeStepUpRequired},
		{ev("https://id.example", ACRPassword, now.Add(time.Hour)), CodeStepUpRequired},
		{&AuthEvidence{Issuer: "https://id.example", ACR: ACRMFA, AuthTime: now.Format(time.RFC3339)}, CodeStepUpRequired},
	}
	for i, c := range cases {
		if got, why := CheckSignIn(Approval{Decision: Reject, Evidence: c.e}, issuers, now); got != c.want {
			t.Errorf("case %d: %s (%s), want %s", i, got, why, c.want)
		}
	}
	strict := &Requirement{ACR: ACRMFA, MaxAgeSeconds: 300}
	if got, _ := CheckEvidence(Approval{Decision: Approve, Evidence: cases[0].e}, strict, issuers, now); got != CodeStepUpRequired {
		t.Errorf("the password sign-in approves a card that needs mfa: %s", got)
	}
}
