package codec

import (
	"bytes"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
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
