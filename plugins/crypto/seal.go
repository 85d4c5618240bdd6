package crypto

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Cipher names the AEAD every seal uses, as metadata.seal records it.
const Cipher = "AES-256-GCM"

// SealVersion is the seal format this package writes (metadata.seal.v).
const SealVersion = 1

// SealMetadataKey is the envelope metadata member a sealed envelope
// carries; the fold carries it and ignores it (docs/events.md).
const SealMetadataKey = "seal"

// sealedPrefix starts the JSON string a sealed value is stored as.
const sealedPrefix = "loom:sealed:v1:"

// nonceBytes is the GCM nonce size; nonces are random, so a key may seal
// up to 2^32 values before the collision bound matters (one subject's
// data, not a whole log's).
const nonceBytes = 12

// Seal is metadata.seal: which subject's key, under which id, sealed which
// payload members of this envelope, in which execution. Sequence 0 of a
// sealed execution always carries one (Covers may be empty), which is how
// later appends, snapshots and ExecutionsOf find the execution's subject
// again.
//
// Exec is the execution the values were sealed in, and is part of their
// additional data. It differs from the envelope's execution id only in a
// copy CopyPrefix made (a fork carries its parent's sealed bytes, as it
// carries its parent's events); a read checks that the seal's subject is
// the subject of the execution it is read from.
type Seal struct {
	V       int      `json:"v"`
	Cipher  string   `json:"cipher"`
	Subject string   `json:"subject"`
	KeyID   string   `json:"keyId"`
	Exec    string   `json:"exec"`
	Covers  []string `json:"covers"`
}

// ShreddedMarker is what a read returns in place of a sealed field whose
// subject was erased: {"$shredded":true,"subject":"…","keyId":"…"}. It is
// valid JSON, so the fold and a replay still run; code that reads a field
// tells it from data with IsShredded.
type ShreddedMarker struct {
	Shredded bool   `json:"$shredded"`
	Subject  string `json:"subject"`
	KeyID    string `json:"keyId"`
}

// IsShredded reports whether raw is a shredded marker, and returns it.
func IsShredded(raw json.RawMessage) (ShreddedMarker, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, []byte(`"$shredded"`)) {
		return ShreddedMarker{}, false
	}
	var m ShreddedMarker
	if json.Unmarshal(raw, &m) != nil || !m.Shredded {
		return ShreddedMarker{}, false
	}
	return m, true
}

func markerJSON(subject, keyID string) []byte {
	b, _ := json.Marshal(ShreddedMarker{Shredded: true, Subject: subject, KeyID: keyID}) // strings only: cannot fail
	return b
}

// ErrSeal matches *SealError.
var ErrSeal = errors.New("crypto: sealed data cannot be opened")

// SealError reports a sealed value that does not open: its bytes were
// altered, it was moved to another execution, sequence, type or field, the
// key store is not the one that sealed it (another master key), or its
// seal metadata is malformed. It is never returned for an erased subject
// (that reads as a ShreddedMarker). It names where, never the bytes.
type SealError struct {
	ExecutionID string
	Sequence    int64
	EventType   string
	Field       string
	Reason      string
	Err         error
}

func (e *SealError) Error() string {
	s := "crypto: cannot open sealed data of execution " + strconv.Quote(e.ExecutionID) +
		" at sequence " + strconv.FormatInt(e.Sequence, 10)
	if e.EventType != "" {
		s += " (" + e.EventType + ")"
	}
	if e.Field != "" {
		s += " field " + strconv.Quote(e.Field)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrSeal) true.
func (e *SealError) Is(target error) bool { return target == ErrSeal }

// Unwrap returns the cause.
func (e *SealError) Unwrap() error { return e.Err }

// newAEAD builds AES-256-GCM over key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != DataKeyBytes {
		return nil, fmt.Errorf("crypto: data key of %d bytes, want %d", len(key), DataKeyBytes)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealBytes returns nonce || ciphertext || tag, the nonce read from rnd.
func sealBytes(aead cipher.AEAD, rnd io.Reader, plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, nonceBytes, nonceBytes+len(plaintext)+aead.Overhead())
	if _, err := io.ReadFull(rnd, out); err != nil {
		return nil, fmt.Errorf("crypto: nonce: %w", err)
	}
	return aead.Seal(out, out[:nonceBytes], plaintext, aad), nil
}

// syntheticNonce is a reader of one nonce: HMAC-SHA256 under the data key
// of the additional data and the plaintext. Sealing with it is
// deterministic — the same value at the same place seals to the same bytes
// — which an idempotent archive needs, and reveals only that a value at one
// place was sealed twice.
func syntheticNonce(key, aad, plaintext []byte) io.Reader {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("loom-crypto/synthetic-nonce/v1\x00"))
	m.Write(binary.AppendUvarint(nil, uint64(len(aad))))
	m.Write(aad)
	m.Write(plaintext)
	return bytes.NewReader(m.Sum(nil)[:nonceBytes])
}

// openBytes reverses sealBytes.
func openBytes(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < nonceBytes+aead.Overhead() {
		return nil, errors.New("sealed value too short")
	}
	return aead.Open(nil, sealed[:nonceBytes], sealed[nonceBytes:], aad)
}

// sealToken seals plaintext as the JSON string "loom:sealed:v1:<base64url>".
func sealToken(aead cipher.AEAD, rnd io.Reader, plaintext, aad []byte) ([]byte, error) {
	sealed, err := sealBytes(aead, rnd, plaintext, aad)
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding
	out := make([]byte, 0, 2+len(sealedPrefix)+enc.EncodedLen(len(sealed)))
	out = append(out, '"')
	out = append(out, sealedPrefix...)
	out = enc.AppendEncode(out, sealed)
	return append(out, '"'), nil
}

// openToken reverses sealToken.
func openToken(aead cipher.AEAD, token, aad []byte) ([]byte, error) {
	if len(token) < 2+len(sealedPrefix) || token[0] != '"' || token[len(token)-1] != '"' ||
		!bytes.HasPrefix(token[1:], []byte(sealedPrefix)) {
		return nil, errors.New("not a sealed value")
	}
	sealed, err := base64.RawURLEncoding.AppendDecode(nil, token[1+len(sealedPrefix):len(token)-1])
	if err != nil {
		return nil, errors.New("sealed value is not base64url")
	}
	return openBytes(aead, sealed, aad)
}

// fieldAAD binds a sealed field to its place: the execution it was sealed
// in, sequence, event type, member name and which occurrence of that name
// (a payload may repeat a key). NUL separates them; none of them may hold
// one.
func fieldAAD(executionID string, seq int64, eventType, field string, occurrence int) []byte {
	b := make([]byte, 0, 64+len(executionID)+len(eventType)+len(field))
	b = append(b, "loom-crypto/field/v1\x00"...)
	b = append(b, executionID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, 0)
	b = append(b, eventType...)
	b = append(b, 0)
	b = append(b, field...)
	b = append(b, 0)
	return strconv.AppendInt(b, int64(occurrence), 10)
}

// parseSeal reads metadata.seal; ok is false when there is none.
func parseSeal(meta map[string]json.RawMessage) (Seal, bool, error) {
	raw, ok := meta[SealMetadataKey]
	if !ok {
		return Seal{}, false, nil
	}
	var s Seal
	if err := json.Unmarshal(raw, &s); err != nil {
		return Seal{}, true, err
	}
	if s.V != SealVersion || s.Cipher != Cipher || s.Subject == "" || s.KeyID == "" || s.Exec == "" {
		return Seal{}, true, errors.New("unsupported or incomplete seal metadata")
	}
	return s, true, nil
}
