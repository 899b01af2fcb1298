package codec

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestEncryptDecryptRotate(t *testing.T) {
	k1 := NewKey("k1")
	old, err := Parse(k1, "")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := converter.GetDefaultDataConverter().ToPayload(map[string]any{"articleId": 40211, "userId": "ama"})
	enc, err := old.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc[0].Data, []byte("ama")) || string(enc[0].Metadata["encoding"]) != EncodingEncrypted || string(enc[0].Metadata[MetadataKeyID]) != "k1" {
		t.Fatalf("not encrypted: %v", enc[0])
	}
	dec, err := old.Decode(enc)
	if err != nil || !bytes.Equal(dec[0].Data, p.Data) || string(dec[0].Metadata["encoding"]) != "json/plain" {
		t.Fatalf("round trip: %v %v", err, dec)
	}
	// Rotation: a codec that writes with k2 still reads k1 payloads.
	rotated, err := Parse(NewKey("k2")+","+k1, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := rotated.Decode(enc); err != nil || !bytes.Equal(dec[0].Data, p.Data) {
		t.Fatalf("rotated codec cannot read k1: %v", err)
	}
	enc2, _ := rotated.Encode([]*commonpb.Payload{p})
	if string(enc2[0].Metadata[MetadataKeyID]) != "k2" {
		t.Fatal("the rotated codec must write with k2")
	}
	if _, err := old.Decode(enc2); err == nil {
		t.Fatal("a codec without k2 decoded a k2 payload")
	}
	plain, _ := old.Decode([]*commonpb.Payload{p})
	if !bytes.Equal(plain[0].Data, p.Data) {
		t.Fatal("plaintext payloads must pass through")
	}
	tampered := &commonpb.Payload{Metadata: enc[0].Metadata, Data: append([]byte{}, enc[0].Data...)}
	tampered.Data[len(tampered.Data)-1] ^= 1
	if _, err := old.Decode([]*commonpb.Payload{tampered}); err == nil {
		t.Fatal("a tampered payload decrypted")
	}
	stranger, _ := Parse(NewKey("k9"), "")
	if _, err := stranger.Decode(enc); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestEndpointAuthorization: with a token, encode and decode need it as a
// bearer token (a missing or wrong one is 401 and decrypts nothing); the
// browser's preflight needs none; without a token the endpoint is open.
func TestEndpointAuthorization(t *testing.T) {
	c, err := Parse(NewKey("k1"), "")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := converter.GetDefaultDataConverter().ToPayload(map[string]any{"userId": "ama"})
	enc, _ := c.Encode([]*commonpb.Payload{p})
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, enc[0]))}})
	token := strings.Repeat("t", 40)
	do := func(h http.Handler, method, auth string) (int, string) {
		req := httptest.NewRequest(method, "/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	locked := c.Handler(nil, token)
	for name, auth := range map[string]string{"no token": "", "a wrong token": "Bearer " + strings.Repeat("x", 40), "the token without Bearer": token} {
		if code, out := do(locked, http.MethodPost, auth); code != http.StatusUnauthorized || strings.Contains(out, "ama") {
			t.Errorf("%s: %d %s", name, code, out)
		}
	}
	if code, out := do(locked, http.MethodPost, "Bearer "+token); code != http.StatusOK || !strings.Contains(out, "payloads") {
		t.Fatalf("the right token: %d %s", code, out)
	}
	if code, _ := do(locked, http.MethodOptions, ""); code != http.StatusOK {
		t.Errorf("preflight: %d", code)
	}
	if code, _ := do(c.Handler(nil, ""), http.MethodPost, ""); code != http.StatusOK {
		t.Errorf("an open endpoint: %d", code)
	}
}

func mustProtoJSON(t *testing.T, p *commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
