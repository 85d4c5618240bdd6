package auditchain

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// MetadataKey is the metadata member that holds an envelope's chain link.
const MetadataKey = "auditChain"

// The algorithm prefixes of a chain member.
const (
	algSHA256     = "sha256"
	algHMACSHA256 = "hmac-sha256"
)

// keyIDLabel is what a key id is the HMAC of.
const keyIDLabel = "loom/auditchain key id v1"

// linkSize is the size of a link: one SHA-256 sum.
const linkSize = sha256.Size

// link is one chain value.
type link [linkSize]byte

// genesis is the link before sequence 0.
var genesis link

// chainer computes links under one key (or none).
type chainer struct {
	key   []byte
	keyID string // "" when unkeyed
}

func newChainer(key []byte) chainer {
	if len(key) == 0 {
		return chainer{}
	}
	return chainer{key: append([]byte(nil), key...), keyID: keyID(key)}
}

// keyID names key without revealing it: 16 hex digits of an HMAC of a fixed
// label under it.
func keyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyIDLabel))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

func (c chainer) newHash() hash.Hash {
	if c.key == nil {
		return sha256.New()
	}
	return hmac.New(sha256.New, c.key)
}

// describe names the chainer's algorithm for messages.
func (c chainer) describe() string {
	if c.key == nil {
		return "no key (sha256)"
	}
	return "key id " + c.keyID
}

// next returns H(prev || hashedBytes(e)), reusing h. validated says e
// passed event.Validate already (an append checked it), so its JSON values
// need no second check.
func (c chainer) next(h hash.Hash, prev link, e event.Envelope, validated bool) (link, error) {
	body, err := hashedBytes(e, validated)
	if err != nil {
		return link{}, err
	}
	h.Reset()
	h.Write(prev[:])
	h.Write(body)
	var out link
	h.Sum(out[:0])
	return out, nil
}

// hashedBytes is what a link covers: event.Encode of the envelope with
// executionId "" and without the chain member, each metadata value
// compacted (json.Compact). The payload is covered byte for byte, as every
// store returns it (the storetest contract); metadata values are compacted
// because a store may drop insignificant whitespace inside them. Encode
// writes the fields in a fixed order and metadata keys sorted, so the bytes
// depend on nothing but the envelope's content.
func hashedBytes(e event.Envelope, validated bool) ([]byte, error) {
	e.ExecutionID = ""
	if needsCopy(e.Metadata) {
		m := make(map[string]json.RawMessage, len(e.Metadata))
		for k, v := range e.Metadata {
			if k == MetadataKey {
				continue
			}
			if bytes.ContainsAny(v, " \t\r\n") {
				var buf bytes.Buffer
				if err := json.Compact(&buf, v); err != nil {
					return nil, &event.InvalidEnvelopeError{Field: "metadata." + k, Reason: "not valid JSON"}
				}
				v = buf.Bytes()
			}
			m[k] = v
		}
		e.Metadata = m
	}
	if validated {
		return event.EncodeValid(e), nil
	}
	return event.Encode(e)
}

// needsCopy reports whether hashedBytes must rewrite metadata: it holds
// the chain member or a value with whitespace to compact.
func needsCopy(meta map[string]json.RawMessage) bool {
	for k, v := range meta {
		if k == MetadataKey || bytes.ContainsAny(v, " \t\r\n") {
			return true
		}
	}
	return false
}

// format renders l as a chain member value (a JSON string).
func (c chainer) format(l link) json.RawMessage {
	var b strings.Builder
	b.Grow(2*linkSize + 40)
	b.WriteByte('"')
	if c.key == nil {
		b.WriteString(algSHA256)
	} else {
		b.WriteString(algHMACSHA256)
		b.WriteByte(':')
		b.WriteString(c.keyID)
	}
	b.WriteByte(':')
	b.WriteString(hex.EncodeToString(l[:]))
	b.WriteByte('"')
	return json.RawMessage(b.String())
}

// member is a parsed chain member.
type member struct {
	keyID string // "" for sha256
	link  link
	text  string // the member's value, as written
}

// memberState says what parseMember found.
type memberState int

const (
	memberOK memberState = iota
	memberMissing
	memberMalformed
)

// parseMember reads the chain member of e.
func parseMember(e event.Envelope) (member, memberState) {
	raw, ok := e.Metadata[MetadataKey]
	if !ok {
		return member{}, memberMissing
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return member{}, memberMalformed
	}
	parts := strings.Split(s, ":")
	m := member{text: s}
	var digits string
	switch {
	case len(parts) == 2 && parts[0] == algSHA256:
		digits = parts[1]
	case len(parts) == 3 && parts[0] == algHMACSHA256 && len(parts[1]) == 16:
		m.keyID, digits = parts[1], parts[2]
	default:
		return member{}, memberMalformed
	}
	if len(digits) != 2*linkSize {
		return member{}, memberMalformed
	}
	if _, err := hex.Decode(m.link[:], []byte(digits)); err != nil || hex.EncodeToString(m.link[:]) != digits {
		return member{}, memberMalformed // not lower-case hex: not what format writes
	}
	return m, memberOK
}

// sameKey reports whether m was written under c's key (or, both, none).
func (c chainer) sameKey(m member) bool { return m.keyID == c.keyID }
