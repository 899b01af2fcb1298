package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrUnsealed is Open's error for a sealed value that is not one this
// codec sealed for the purpose: altered, cut, sealed for another purpose
// or with a key it does not hold.
var ErrUnsealed = errors.New("not a value this deployment sealed")

// Seal encrypts a small value that leaves toolgate and must come back
// unaltered (an MCP requestState), with AES-256-GCM under a key derived
// from the active key for purpose alone (HKDF-SHA256), so a value sealed
// for one purpose never opens for another, nor as a payload. The result
// is "<key id>.<base64url of nonce and ciphertext>", safe in JSON and URLs.
func (c *Codec) Seal(purpose string, plaintext []byte) (string, error) {
	aead, err := c.sealer(c.active, purpose)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return c.active + "." + base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plaintext, []byte(purpose))), nil
}

// Open returns the value Seal sealed for purpose, with any key this codec
// holds; anything else is ErrUnsealed.
func (c *Codec) Open(purpose, sealed string) ([]byte, error) {
	// At the last dot: a key ID may hold dots, base64url never does.
	dot := strings.LastIndexByte(sealed, '.')
	if dot < 0 {
		return nil, ErrUnsealed
	}
	id, b64 := sealed[:dot], sealed[dot+1:]
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return nil, ErrUnsealed
	}
	aead, err := c.sealer(id, purpose)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrUnsealed
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(purpose))
	if err != nil {
		return nil, ErrUnsealed
	}
	return plain, nil
}

// sealer is the AEAD of key id for purpose.
func (c *Codec) sealer(id, purpose string) (cipher.AEAD, error) {
	k, ok := c.keys[id]
	if !ok {
		return nil, ErrUnsealed
	}
	derived, err := hkdf.Key(sha256.New, k, nil, "toolgate codec seal: "+purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	block, err := aes.NewCipher(derived)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return cipher.NewGCM(block)
}
