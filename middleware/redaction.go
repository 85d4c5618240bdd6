package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/loom-kernel/loom/effect"
)

// SecretKey is the key of a secret reference: the JSON object
// {"$secret": "<name>"}, with no other key, anywhere in a step's input.
const SecretKey = "$secret"

// MaxSecretRefs bounds the secret references one input may hold; an input
// with more fails the step (*SecretError).
const MaxSecretRefs = 64

// MaxSecretNameBytes bounds a secret reference's name.
const MaxSecretNameBytes = 256

// SecretResolver looks secrets up by name at call time. It must be safe for
// concurrent use. A name it does not hold returns an error matching
// ErrUnknownSecret; any other error is a failure to look (retryable).
type SecretResolver interface {
	ResolveSecret(ctx context.Context, name string) (string, error)
}

// SecretResolverFunc adapts a function to a SecretResolver.
type SecretResolverFunc func(ctx context.Context, name string) (string, error)

// ResolveSecret calls f.
func (f SecretResolverFunc) ResolveSecret(ctx context.Context, name string) (string, error) {
	return f(ctx, name)
}

// StaticSecrets is a SecretResolver over a fixed map, for tests and small
// deployments; a name it lacks is ErrUnknownSecret.
type StaticSecrets map[string]string

// ResolveSecret returns s[name], or ErrUnknownSecret.
func (s StaticSecrets) ResolveSecret(_ context.Context, name string) (string, error) {
	if v, ok := s[name]; ok {
		return v, nil
	}
	return "", ErrUnknownSecret
}

// Redaction returns the secret ring (K10 redaction). A step's input may hold
// secret references, {"$secret":"<name>"}, where the effect needs a
// credential. The runtime records STEP_STARTED with the input as the flow
// gave it — before any middleware runs — so the log keeps the reference.
// The ring then resolves every reference with resolver, at call time, and
// hands the effect the input with each reference replaced by the secret's
// value as a JSON string. On the way back it scrubs: every resolved value
// found in the output's strings (keys included) is replaced by its
// reference — a string that is exactly the value by the reference object, a
// longer one by the reference's text — and so is every value in a failure's
// message (the error is wrapped; errors.As still reaches the original).
//
// It records nothing itself and never logs or reports a value. An input
// with no reference passes through unparsed (its bytes are checked for the
// literal "$secret", so write references literally, not with \u escapes),
// and its output and errors pass through untouched.
//
// Failure modes: an unknown or unresolvable name, a reference whose name is
// not a string of at most MaxSecretNameBytes, or more than MaxSecretRefs
// references fail the step with *SecretError without running the effect
// (unknown names and malformed references are not retried). Scrubbing is textual: a secret the
// effect transforms (encodes, splits) before returning is not recognised,
// nor is one inside a typed failure's payload, and a very short value may
// also replace unrelated text. Wire Redaction inside ClaimCheck when large
// outputs may echo a secret: placed outside it, it sees only the claim
// envelope, and the stored content is not scrubbed.
func Redaction(resolver SecretResolver) effect.Middleware {
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		if !bytes.Contains(in, []byte(`"`+SecretKey+`"`)) {
			return next(ec, in)
		}
		resolved, secrets, err := resolveRefs(ec, resolver, in)
		if err != nil {
			return nil, err
		}
		if len(secrets) == 0 {
			return next(ec, in)
		}
		out, err := next(ec, resolved)
		if err != nil {
			return nil, scrubError(err, secrets)
		}
		scrubbed, err := scrubOutput(out, secrets)
		if err != nil {
			return nil, fmt.Errorf("middleware: step %q: output is not JSON: %w", ec.StepID, err)
		}
		return scrubbed, nil
	}
}

// secret is one resolved reference of a call.
type secret struct {
	name, value string
	ref         string // the reference's JSON text
}

// resolveRefs returns in with its references resolved, and the secrets
// resolved, longest value first (so a value containing another is scrubbed
// whole).
func resolveRefs(ec *effect.Context, resolver SecretResolver, in json.RawMessage) (json.RawMessage, []secret, error) {
	doc, err := decodeJSON(in)
	if err != nil {
		return in, nil, nil // not JSON: no reference can be in it; the effect decides
	}
	byName := map[string]string{}
	var refErr error
	doc = walk(doc, func(v any) (any, bool) {
		obj, ok := v.(map[string]any)
		if !ok || len(obj) != 1 || refErr != nil {
			return v, false
		}
		raw, ok := obj[SecretKey]
		if !ok {
			return v, false
		}
		name, ok := raw.(string)
		if !ok || name == "" || len(name) > MaxSecretNameBytes {
			refErr = &SecretError{StepID: ec.StepID, Name: bounded(fmt.Sprint(raw)), Err: fmt.Errorf("%w: a name must be a string of 1 to %d bytes", ErrInvalidSecretRef, MaxSecretNameBytes)}
			return v, true
		}
		value, seen := byName[name]
		if !seen {
			if len(byName) == MaxSecretRefs {
				refErr = &SecretError{StepID: ec.StepID, Name: name, Err: fmt.Errorf("%w: more than %d references", ErrInvalidSecretRef, MaxSecretRefs)}
				return v, true
			}
			got, rerr := resolver.ResolveSecret(ec.Ctx(), name)
			if rerr != nil {
				refErr = &SecretError{StepID: ec.StepID, Name: name, Err: rerr}
				return v, true
			}
			value, byName[name] = got, got
		}
		return value, true
	})
	if refErr != nil {
		return nil, nil, refErr
	}
	if len(byName) == 0 {
		return in, nil, nil
	}
	secrets := make([]secret, 0, len(byName))
	for name, value := range byName { //loom:sorted sorted below
		ref, _ := json.Marshal(map[string]string{SecretKey: name})
		secrets = append(secrets, secret{name: name, value: value, ref: string(ref)})
	}
	sort.Slice(secrets, func(i, j int) bool {
		if len(secrets[i].value) != len(secrets[j].value) {
			return len(secrets[i].value) > len(secrets[j].value)
		}
		return secrets[i].name < secrets[j].name
	})
	resolved, err := encodeJSON(doc)
	return resolved, secrets, err
}

// scrubOutput replaces resolved values in out's strings; out is returned
// as it was, byte for byte, when it holds none.
func scrubOutput(out json.RawMessage, secrets []secret) (json.RawMessage, error) {
	if len(out) == 0 {
		return out, nil
	}
	doc, err := decodeJSON(out)
	if err != nil {
		return nil, err
	}
	changed := false
	doc = walk(doc, func(v any) (any, bool) {
		switch x := v.(type) {
		case string:
			for _, s := range secrets {
				if x == s.value && s.value != "" {
					changed = true
					return map[string]any{SecretKey: s.name}, true
				}
			}
			if y := scrubText(x, secrets); y != x {
				changed = true
				return y, true
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if y := scrubText(k, secrets); y != k {
					changed = true
					x[y] = x[k]
					delete(x, k)
				}
			}
		}
		return v, false
	})
	if !changed {
		return out, nil
	}
	return encodeJSON(doc)
}

// scrubText replaces every non-empty value in s by its reference's text.
func scrubText(s string, secrets []secret) string {
	for _, sec := range secrets {
		if sec.value != "" && strings.Contains(s, sec.value) {
			s = strings.ReplaceAll(s, sec.value, sec.ref)
		}
	}
	return s
}

// redactedError is an effect's failure whose message held a secret value.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func scrubError(err error, secrets []secret) error {
	msg := err.Error()
	if scrubbed := scrubText(msg, secrets); scrubbed != msg {
		return &redactedError{msg: scrubbed, err: err}
	}
	return err
}

// Redaction decodes a payload with UseNumber, so a number is carried as its
// literal and never re-rendered through a float64 (DESIGN "Numbers"), and
// re-encodes it only when it changed something.

// decodeJSON decodes exactly one JSON value, numbers as json.Number.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// encodeJSON renders v without HTML escaping and without the encoder's
// trailing newline. Object keys come out sorted.
func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// walk visits v depth first, a container before what it holds, object
// members in key order (so which reference fails first does not depend on
// map iteration). fn returns the value to keep and whether it replaced v:
// a replacement is not descended into.
func walk(v any, fn func(any) (any, bool)) any {
	r, replaced := fn(v)
	if replaced {
		return r
	}
	switch x := r.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if c, ok := x[k]; ok {
				x[k] = walk(c, fn)
			}
		}
	case []any:
		for i, c := range x {
			x[i] = walk(c, fn)
		}
	}
	return r
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m { //loom:sorted sorted below
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
