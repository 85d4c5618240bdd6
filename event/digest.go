package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"unicode/utf8"
)

// FNV1a64 returns the 64-bit FNV-1a hash of b as 16 lower-case hex digits.
func FNV1a64(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	var out [8]byte
	return hex.EncodeToString(h.Sum(out[:0]))
}

// SHA256 returns "sha256:" followed by the hex SHA-256 of b.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DigestCanonical returns the SHA256 digest of the canonical form of raw.
func DigestCanonical(raw []byte) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	return SHA256(c), nil
}

// FlowEmitDigest is the ADR 0102 identity of a flow-level emit (spec §3):
// fnv1a64(segment + "|" + canonical JSON of [eventType, payload]), where the
// segment counts the gate passthroughs consumed at the emit. A payload with no
// JSON form (or an event type that is not UTF-8) returns ErrNotCanonicalizable:
// such an emit is appended unstamped.
func FlowEmitDigest(segment int, eventType string, payload json.RawMessage) (string, error) {
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	// Checked apart from the pair below, which a payload such as `1,2` would
	// otherwise complete into valid JSON.
	if !utf8.ValidString(eventType) || !utf8.Valid(payload) || !json.Valid(payload) {
		return "", ErrNotCanonicalizable
	}
	typ, err := json.Marshal(eventType)
	if err != nil {
		return "", err
	}
	pair := make([]byte, 0, len(typ)+len(payload)+3)
	pair = append(pair, '[')
	pair = append(pair, typ...)
	pair = append(pair, ',')
	pair = append(pair, payload...)
	pair = append(pair, ']')
	c, err := Canonical(pair)
	if err != nil {
		return "", err
	}
	return FNV1a64(append([]byte(strconv.Itoa(segment)+"|"), c...)), nil
}
