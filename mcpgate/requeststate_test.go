package mcpgate

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/codec"
)

// TestARequestStateIsHeldToItsPersonRequestAndTime loops over what an
// echoed requestState is held to: one row per refusal, each by its name,
// and the state as issued, which opens.
func TestARequestStateIsHeldToItsPersonRequestAndTime(t *testing.T) {
	c, err := codec.Parse(codec.NewKey("k1"), "")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := codec.Parse(codec.NewKey("k1"), "")
	issued := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	ama := Identity{Issuer: "https://id.example", Subject: "ama"}
	digest, _ := requestDigest("request_stock_transfer", json.RawMessage(`{"quantity":40,"articleId":40211}`))
	sealed, err := sealState(c, requestState{Issuer: ama.Issuer, Subject: ama.Subject, WorkflowID: "toolcall-c-1", RunID: "r1", ArgsHash: "h", Digest: digest}, issued)
	if err != nil {
		t.Fatal(err)
	}
	reordered, _ := requestDigest("request_stock_transfer", json.RawMessage(`{"articleId":40211, "quantity":40}`))
	more, _ := requestDigest("request_stock_transfer", json.RawMessage(`{"articleId":40211,"quantity":41}`))
	otherTool, _ := requestDigest("get_stock", json.RawMessage(`{"articleId":40211,"quantity":40}`))
	rows := []struct {
		name   string
		codec  *codec.Codec
		sealed string
		who    Identity
		digest string
		at     time.Time
		want   error
	}{
		{"as issued, its arguments in another order", c, sealed, ama, reordered, issued.Add(time.Minute), nil},
		{"just before it expires", c, sealed, ama, digest, issued.Add(RequestStateTTL - time.Second), nil},
		{"when it expires", c, sealed, ama, digest, issued.Add(RequestStateTTL), ErrStateExpired},
		{"the same subject at another provider", c, sealed, Identity{Issuer: "https://other.example", Subject: "ama"}, digest, issued, ErrStateNotYours},
		{"another subject", c, sealed, Identity{Issuer: ama.Issuer, Subject: "efua"}, digest, issued, ErrStateNotYours},
		{"other arguments", c, sealed, ama, more, issued, ErrStateOtherRequest},
		{"another tool", c, sealed, ama, otherTool, issued, ErrStateOtherRequest},
		{"sealed by another deployment", other, sealed, ama, digest, issued, ErrStateAltered},
		{"not sealed at all", c, `{"iss":"https://id.example","sub":"ama"}`, ama, digest, issued, ErrStateAltered},
	}
	for _, row := range rows {
		st, err := openState(row.codec, row.sealed, row.who, row.digest, row.at)
		if !errors.Is(err, row.want) || row.want == nil && (st.WorkflowID != "toolcall-c-1" || st.RunID != "r1" || st.ID == "") {
			t.Errorf("%s: %+v %v, want %v", row.name, st, err, row.want)
		}
	}
}
