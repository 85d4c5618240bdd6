package crypto

import (
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"io"
	"maps"

	"github.com/loom-kernel/loom/event"
)

// fieldSealer seals the data members of envelopes under one data key.
// With rand nil it seals deterministically (syntheticNonce).
type fieldSealer struct {
	key  DataKey
	aead cipher.AEAD
	rand io.Reader
}

func newFieldSealer(k DataKey, rnd io.Reader) (*fieldSealer, error) {
	aead, err := newAEAD(k.Bytes)
	if err != nil {
		return nil, err
	}
	return &fieldSealer{key: k, aead: aead, rand: rnd}, nil
}

func (f *fieldSealer) token(plaintext, aad []byte) ([]byte, error) {
	rnd := f.rand
	if rnd == nil {
		rnd = syntheticNonce(f.key.Bytes, aad, plaintext)
	}
	return sealToken(f.aead, rnd, plaintext, aad)
}

// seal returns e with the members names lists sealed and metadata.seal
// set. An envelope with nothing to seal comes back as it was, except
// sequence 0, which always carries the seal: it anchors the subject.
func (f *fieldSealer) seal(e event.Envelope, names []string) (event.Envelope, error) {
	payload, covers, err := f.sealPayload(e, names)
	if err != nil {
		return event.Envelope{}, err
	}
	if len(covers) == 0 && e.Sequence != 0 {
		return e, nil
	}
	if covers == nil {
		covers = []string{}
	}
	raw, err := json.Marshal(Seal{V: SealVersion, Cipher: Cipher, Subject: f.key.Subject, KeyID: f.key.ID, Exec: e.ExecutionID, Covers: covers})
	if err != nil {
		return event.Envelope{}, err
	}
	meta := make(map[string]json.RawMessage, len(e.Metadata)+1)
	maps.Copy(meta, e.Metadata)
	meta[SealMetadataKey] = raw
	e.Payload, e.Metadata = payload, meta
	return e, nil
}

func (f *fieldSealer) sealPayload(e event.Envelope, names []string) (json.RawMessage, []string, error) {
	if len(names) == 0 || isNull(e.Payload) {
		return e.Payload, nil, nil
	}
	if contains(names, WholePayload) {
		tok, err := f.token(e.Payload, fieldAAD(e.ExecutionID, e.Sequence, e.Type, WholePayload, 0))
		return tok, []string{WholePayload}, err
	}
	ms, isObject, err := objectMembers(e.Payload)
	if err != nil || !isObject {
		return e.Payload, nil, err
	}
	var spans []member
	var repl [][]byte
	var covers []string
	seen := map[string]int{}
	for _, m := range ms {
		n := seen[m.name]
		seen[m.name] = n + 1
		if !contains(names, m.name) || isNull(e.Payload[m.start:m.end]) {
			continue
		}
		tok, err := f.token(e.Payload[m.start:m.end], fieldAAD(e.ExecutionID, e.Sequence, e.Type, m.name, n))
		if err != nil {
			return nil, nil, err
		}
		spans, repl = append(spans, m), append(repl, tok)
		if !contains(covers, m.name) {
			covers = append(covers, m.name)
		}
	}
	if len(spans) == 0 {
		return e.Payload, nil, nil
	}
	return splice(e.Payload, spans, repl), covers, nil
}

// opener opens sealed envelopes, one key lookup per (subject, key id).
// When subject is set, a seal naming another subject is refused: a sealed
// row moved whole into another subject's execution does not open.
type opener struct {
	keys    map[[2]string]openKey
	subject func() (string, error)
}

type openKey struct {
	aead      cipher.AEAD
	destroyed bool
}

// open returns e with its sealed members opened (or replaced by shredded
// markers when the subject was erased) and metadata.seal removed.
func (o *opener) open(ctx context.Context, ks KeyStore, e event.Envelope) (event.Envelope, error) {
	s, ok, err := parseSeal(e.Metadata)
	if !ok {
		return e, nil
	}
	fail := func(field, reason string, err error) (event.Envelope, error) {
		return event.Envelope{}, &SealError{ExecutionID: e.ExecutionID, Sequence: e.Sequence, EventType: e.Type,
			Field: field, Reason: reason, Err: err}
	}
	if err != nil {
		return fail("", "malformed metadata."+SealMetadataKey, err)
	}
	if o.subject != nil {
		want, err := o.subject()
		if err != nil {
			return event.Envelope{}, err
		}
		if want != s.Subject {
			return fail("", "sealed under another subject than its execution's", nil)
		}
	}
	meta := make(map[string]json.RawMessage, len(e.Metadata)-1)
	for k, v := range e.Metadata { //loom:sorted copy, order-free
		if k != SealMetadataKey {
			meta[k] = v
		}
	}
	if len(meta) == 0 {
		meta = nil
	}
	e.Metadata = meta
	if len(s.Covers) == 0 {
		return e, nil
	}
	k, err := o.key(ctx, ks, s)
	if err != nil {
		return fail("", "the key of the seal is not available", err)
	}
	if contains(s.Covers, WholePayload) {
		if k.destroyed {
			e.Payload = markerJSON(s.Subject, s.KeyID)
			return e, nil
		}
		plain, err := openToken(k.aead, e.Payload, fieldAAD(s.Exec, e.Sequence, e.Type, WholePayload, 0))
		if err != nil {
			return fail(WholePayload, "authentication failed", err)
		}
		e.Payload = plain
		return e, nil
	}
	ms, isObject, err := objectMembers(e.Payload)
	if err != nil || !isObject {
		return fail("", "sealed payload is not an object", err)
	}
	var spans []member
	var repl [][]byte
	seen := map[string]int{}
	for _, m := range ms {
		n := seen[m.name]
		seen[m.name] = n + 1
		v := e.Payload[m.start:m.end]
		if !contains(s.Covers, m.name) || isNull(v) {
			continue
		}
		var plain []byte
		if k.destroyed {
			plain = markerJSON(s.Subject, s.KeyID)
		} else if plain, err = openToken(k.aead, v, fieldAAD(s.Exec, e.Sequence, e.Type, m.name, n)); err != nil {
			return fail(m.name, "authentication failed", err)
		}
		spans, repl = append(spans, m), append(repl, plain)
	}
	e.Payload = splice(e.Payload, spans, repl)
	return e, nil
}

func (o *opener) key(ctx context.Context, ks KeyStore, s Seal) (openKey, error) {
	id := [2]string{s.Subject, s.KeyID}
	if k, ok := o.keys[id]; ok {
		return k, nil
	}
	var k openKey
	dk, err := ks.Open(ctx, s.Subject, s.KeyID)
	switch {
	case errors.Is(err, ErrKeyDestroyed):
		k.destroyed = true
	case err != nil:
		return openKey{}, err
	default:
		if k.aead, err = newAEAD(dk.Bytes); err != nil {
			return openKey{}, err
		}
	}
	if o.keys == nil {
		o.keys = map[[2]string]openKey{}
	}
	o.keys[id] = k
	return k, nil
}
