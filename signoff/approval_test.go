package signoff_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/packs/mangrove"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signoff"
)

func TestCheckApproval(t *testing.T) {
	good := signoff.Approval{Decision: signoff.Approve, ArgsHash: "h", Approver: policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}}
	cases := []struct {
		name   string
		change func(*signoff.Approval)
		want   policy.Code
	}{
		{"valid", func(*signoff.Approval) {}, policy.CodeOK},
		{"reject is a decision", func(a *signoff.Approval) { a.Decision = signoff.Reject }, policy.CodeOK},
		{"unknown decision", func(a *signoff.Approval) { a.Decision = "maybe" }, policy.CodeInvalidArguments},
		{"anonymous", func(a *signoff.Approval) { a.Approver.UserID = "" }, policy.CodeInvalidArguments},
		{"wrong role", func(a *signoff.Approval) { a.Approver.Role = mangrove.RoleAreaManager }, policy.CodeRole},
		{"other store", func(a *signoff.Approval) { a.Approver.Resources = mangrove.Stores(118) }, policy.CodeResourceScope},
		{"wrong hash", func(a *signoff.Approval) { a.ArgsHash = "other" }, policy.CodeInvalidArguments},
	}
	for _, c := range cases {
		a := good
		a.Approver.Resources = good.Approver.Resources.Clone()
		c.change(&a)
		if got, msg := signoff.CheckApproval(a, mangrove.RoleStoreManager, policy.ResourceRef{Kind: mangrove.KindStore, ID: "112"}, "h"); got != c.want || (got != policy.CodeOK && msg == "") {
			t.Errorf("%s: got %s %q, want %s", c.name, got, msg, c.want)
		}
	}
}

func TestArgsHashIsCanonical(t *testing.T) {
	a, _ := signoff.ArgsHash("request_stock_transfer", json.RawMessage(`{"quantity":40,"articleId":40211}`))
	b, _ := signoff.ArgsHash("request_stock_transfer", json.RawMessage(`{ "articleId": 40211, "quantity": 40 }`))
	c, _ := signoff.ArgsHash("request_stock_transfer", json.RawMessage(`{"articleId":40211,"quantity":41}`))
	d, _ := signoff.ArgsHash("create_task", json.RawMessage(`{"articleId":40211,"quantity":40}`))
	if a != b || a == c || a == d || len(a) != 64 {
		t.Fatalf("hashes %s %s %s %s", a, b, c, d)
	}
	if _, err := signoff.ArgsHash("x", json.RawMessage(`{`)); err == nil {
		t.Fatal("bad JSON hashed")
	}
}

func TestApprovalSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := signoff.ApprovalKeys{"k1": pub}
	up := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	expires := up.Add(30 * time.Minute)
	card := signoff.CardRef{WorkflowID: "toolcall-c1-call8", RunID: "run-1", ExpiresAt: expires.Format(time.RFC3339)}
	sign := func(c signoff.CardRef, at time.Time) signoff.Approval {
		return signoff.SignApproval(signoff.Approval{Decision: signoff.Approve, ArgsHash: "h", Approver: policy.Identity{UserID: "ama", Role: mangrove.RoleStoreManager, Resources: mangrove.Stores(112)}},
			c, "k1", priv, at.Format(time.RFC3339))
	}
	a := sign(card, up.Add(time.Minute))
	if ok, why := signoff.VerifyApproval(a, card, up, expires, keys); !ok {
		t.Fatalf("a good signature failed: %s", why)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	forged := func(f func(*signoff.Approval)) signoff.Approval {
		b := a
		b.Approver.Resources = mangrove.Stores(112)
		f(&b)
		return b
	}
	otherCard := func(f func(*signoff.CardRef)) signoff.CardRef { c := card; f(&c); return c }
	for name, bad := range map[string]signoff.Approval{
		"unsigned":                forged(func(b *signoff.Approval) { b.Signature = "" }),
		"unknown key":             forged(func(b *signoff.Approval) { b.KeyID = "k9" }),
		"other workflow":          sign(otherCard(func(c *signoff.CardRef) { c.WorkflowID = "toolcall-c1-call9" }), up.Add(time.Minute)),
		"other run of the ID":     sign(otherCard(func(c *signoff.CardRef) { c.RunID = "run-0" }), up.Add(time.Minute)),
		"other card's expiry":     sign(otherCard(func(c *signoff.CardRef) { c.ExpiresAt = up.Add(-time.Hour).Format(time.RFC3339) }), up.Add(time.Minute)),
		"signed in 2001":          sign(card, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)),
		"signed before the card":  sign(card, up.Add(-signoff.ClockSkew-time.Second)),
		"signed after expiry":     sign(card, expires.Add(signoff.ClockSkew+time.Second)),
		"signing time not a time": signoff.SignApproval(signoff.Approval{Decision: signoff.Approve, ArgsHash: "h", Approver: a.Approver}, card, "k1", priv, "yesterday"),
		"changed decision":        forged(func(b *signoff.Approval) { b.Decision = signoff.Reject }),
		"changed hash":            forged(func(b *signoff.Approval) { b.ArgsHash = "x" }),
		"changed signing time":    forged(func(b *signoff.Approval) { b.SignedAt = up.Add(2 * time.Minute).Format(time.RFC3339) }),
		"widened stores":          forged(func(b *signoff.Approval) { b.Approver.Resources = mangrove.Stores(112, 118) }),
		"changed role":            forged(func(b *signoff.Approval) { b.Approver.Role = mangrove.RoleAreaManager }),
		"signed by a stranger":    signoff.SignApproval(signoff.Approval{Decision: signoff.Approve, ArgsHash: "h", Approver: a.Approver}, card, "k1", other, a.SignedAt),
		"garbage signature":       forged(func(b *signoff.Approval) { b.Signature = "!!" }),
		"evidence added": forged(func(b *signoff.Approval) {
			b.Evidence = &signoff.AuthEvidence{Issuer: "i", Subject: "s", ACR: policy.ACRMFA, AuthTime: b.SignedAt}
		}),
	} {
		if ok, why := signoff.VerifyApproval(bad, card, up, expires, keys); ok || why == "" {
			t.Errorf("%s: verified", name)
		}
	}
	if ok, _ := signoff.VerifyUnboundApproval(a, card.WorkflowID, keys); ok {
		t.Error("a bound signature verified as an unbound one")
	}
	if _, err := signoff.ParseApprovalKeys("k1:" + base64.StdEncoding.EncodeToString(pub) + ", k2:nope"); err == nil {
		t.Fatal("a bad key entry was accepted")
	}
	if k, err := signoff.ParseApprovalKeys("k1:" + base64.StdEncoding.EncodeToString(pub)); err != nil || !k["k1"].Equal(pub) {
		t.Fatalf("parse: %v", err)
	}
}

// TestDecodeApproval: a decision is read strictly and every field bounded;
// each refusal says what to fix.
func TestDecodeApproval(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	good := `{"decision":"approve","argsHash":"` + hash + `","approver":{"userId":"ama","role":"store_manager","storeIds":[112]},"reason":"ok"}`
	if a, err := signoff.DecodeApproval([]byte(good)); err != nil || a.Approver.UserID != "ama" || !a.Approver.Resources.Holds("store", "112") {
		t.Fatalf("good decision: %+v %v", a, err)
	}
	inClient := strings.Replace(good, `"reason":"ok"`, `"reason":"ok","evidence":{"iss":"https://id.test","sub":"ama","acr":"pwd","authTime":"2026-12-07T10:00:00Z","via":"confirmed_in_client"}`, 1)
	if a, err := signoff.DecodeApproval([]byte(inClient)); err != nil || !signoff.InClient(a) {
		t.Fatalf("a decision made in the client: %+v %v", a, err)
	}
	for name, raw := range map[string]string{
		"evidence via anything else": strings.Replace(inClient, `"confirmed_in_client"`, `"the_card_ui"`, 1),
		"a bare string":              `"x"`,
		"null":                       `null`,
		"empty":                      ``,
		"stores as text":             strings.Replace(good, `[112]`, `"112"`, 1),
		"unknown field":              strings.Replace(good, `"reason"`, `"approved":true,"reason"`, 1),
		"duplicate decision":         strings.Replace(good, `"decision":"approve"`, `"decision":"reject","decision":"approve"`, 1),
		"case-variant twin":          strings.Replace(good, `"decision":"approve"`, `"decision":"reject","Decision":"approve"`, 1),
		"nested duplicate":           strings.Replace(good, `"userId":"ama"`, `"userId":"ama","userId":"kofi"`, 1),
		"trailing data":              good + `{}`,
		"decision yes":               strings.Replace(good, `"approve"`, `"yes"`, 1),
		"short hash":                 strings.Replace(good, hash, "abc", 1),
		"no approver":                strings.Replace(good, `"userId":"ama"`, `"userId":""`, 1),
		"approver with a space":      strings.Replace(good, `"userId":"ama"`, `"userId":"ama kofi"`, 1),
		"100 KB reason":              strings.Replace(good, `"reason":"ok"`, `"reason":"`+strings.Repeat("x", 100_000)+`"`, 1),
		"501-char reason":            strings.Replace(good, `"reason":"ok"`, `"reason":"`+strings.Repeat("é", signoff.MaxReasonRunes+1)+`"`, 1),
		"65 stores":                  strings.Replace(good, `[112]`, "["+strings.Repeat("112,", policy.MaxResources)+"112]", 1),
		"store -1":                   strings.Replace(good, `[112]`, `[-1]`, 1),
		"role with capitals":         strings.Replace(good, `"store_manager"`, `"Store_Manager"`, 1),
		"long signature":             strings.Replace(good, `"reason":"ok"`, `"reason":"ok","signature":"`+strings.Repeat("A", 200)+`"`, 1),
	} {
		if _, err := signoff.DecodeApproval([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if len(err.Error()) > 300 {
			t.Errorf("%s: a %d-byte error", name, len(err.Error()))
		}
	}
	if a, err := signoff.DecodeApproval([]byte(strings.Replace(good, `"reason":"ok"`, `"reason":"`+strings.Repeat("é", signoff.MaxReasonRunes)+`"`, 1))); err != nil || len([]rune(a.Reason)) != signoff.MaxReasonRunes {
		t.Fatalf("a reason of exactly %d characters: %v", signoff.MaxReasonRunes, err)
	}
}

// TestApplyEdit: an edit replaces only editable fields and says what to fix otherwise.
func TestApplyEdit(t *testing.T) {
	args := json.RawMessage(`{"articleId":40211,"quantity":40,"reason":"stockout_risk","storeId":112}`)
	got, err := signoff.ApplyEdit(args, json.RawMessage(`{"quantity":60}`), []string{"quantity"})
	if err != nil || string(got) != `{"articleId":40211,"quantity":60,"reason":"stockout_risk","storeId":112}` {
		t.Fatalf("%s %v", got, err)
	}
	for edit, want := range map[string]string{
		`{"storeId":118}`:                   `"storeId" may not be edited; only quantity may`,
		`{}`:                                "edit changes nothing",
		`[60]`:                              "edit must be a JSON object",
		`{"quantity":60,"quantity":61}`:     "appears twice",
		`{"quantity":60,"articleId":40207}`: `"articleId" may not be edited`,
	} {
		if _, err := signoff.ApplyEdit(args, json.RawMessage(edit), []string{"quantity"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("edit %s: %v, want %q", edit, err, want)
		}
	}
	if _, err := signoff.ApplyEdit(args, json.RawMessage(`{"quantity":60}`), nil); err == nil || !strings.Contains(err.Error(), "nothing on this card may be edited") {
		t.Errorf("a row with nothing editable: %v", err)
	}
}
