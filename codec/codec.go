// Package codec encrypts every Temporal payload toolgate writes (args,
// results, signals, queries) with AES-256-GCM, so the history holds
// ciphertext; search attributes stay readable. Keys have IDs: new payloads
// use the active key, and any listed key still decodes, so keys rotate.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	EncodingEncrypted = "binary/encrypted"
	MetadataKeyID     = "encryption-key-id"
)

// Codec is a converter.PayloadCodec with a set of keys by ID.
type Codec struct {
	active string
	aeads  map[string]cipher.AEAD
	keys   map[string][]byte
}

// New returns a codec that encrypts with the key active and decrypts with
// any key in keys (ID to 32-byte AES-256 key).
func New(keys map[string][]byte, active string) (*Codec, error) {
	c := &Codec{active: active, aeads: map[string]cipher.AEAD{}, keys: map[string][]byte{}}
	for id, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("codec key %q is %d bytes, want 32 (AES-256)", id, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		if c.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		c.keys[id] = slices.Clone(k)
	}
	if _, ok := c.aeads[active]; !ok {
		return nil, fmt.Errorf("the active codec key %q is not among the keys", active)
	}
	return c, nil
}

// Parse reads keys as "id:base64,id:base64"; active "" means the first.
func Parse(spec, active string) (*Codec, error) {
	keys := map[string][]byte{}
	first := ""
	for _, entry := range strings.Split(spec, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		id, b64, ok := strings.Cut(entry, ":")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || id == "" || err != nil {
			return nil, fmt.Errorf("codec key entry %q: want id:base64 of 32 bytes", id)
		}
		if first == "" {
			first = id
		}
		keys[id] = raw
	}
	if active == "" {
		active = first
	}
	return New(keys, active)
}

// NewKey returns a fresh "id:base64" key entry.
func NewKey(id string) string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

// Encode encrypts each payload whole (metadata and data) with the active key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.active]
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(c.active)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts encrypted payloads and passes others through, so
// histories written before encryption still read.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("codec: payload encrypted with unknown key %q", id)
		}
		if len(p.Data) < aead.NonceSize() {
			return nil, fmt.Errorf("codec: payload too short")
		}
		plain, err := aead.Open(nil, p.Data[:aead.NonceSize()], p.Data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: payload does not decrypt with key %q", id)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the default converter with this codec on top; give it
// to every client and worker.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Handler serves /encode and /decode for Temporal Web and the CLI's
// --codec-endpoint, with the CORS preflight the Web UI sends from origins.
// With a token, every encode and decode must carry "Authorization: Bearer
// <token>" (the remote codec protocol's authorization; the CLI's
// --codec-auth): the endpoint decrypts every payload, so nobody else may
// use it. An empty token leaves it open (dev mode only; the worker refuses
// that elsewhere).
func (c *Codec) Handler(origins []string, token string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && slices.Contains(origins, o) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusOK)
			return
		}
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate codec"`)
			http.Error(w, "the codec endpoint needs Authorization: Bearer <CODEC_AUTH_TOKEN>", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
}
