package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/store"
)

// DefaultMaxInlineBytes is ClaimCheckOptions.MaxInlineBytes when unset.
const DefaultMaxInlineBytes = 1024

// MaxDigestBytes bounds the JSON a Digest projection may return: the digest
// is recorded inline, in the log the claim check keeps lean.
const MaxDigestBytes = 1024

// ClaimKey is the key of a claim envelope: {"$claim": Claim}.
const ClaimKey = "$claim"

// Claim is what the log records in place of an output kept in a content
// store (ADR 0054): the blob's ref (store.ContentRef of the output's bytes,
// "sha256:<hex>"), its size in bytes, and, when the tool declares a digest
// projection, that projection of the output — the small value a flow may
// branch on without reading the content.
type Claim struct {
	Ref    string          `json:"ref"`
	Size   int             `json:"size"`
	Digest json.RawMessage `json:"digest,omitempty"`
}

// ClaimEnvelope is the recorded value of a claimed output, byte for byte
// {"$claim":{"ref":"sha256:…","size":N}} or, with a digest,
// {"$claim":{"ref":"sha256:…","size":N,"digest":…}}.
type ClaimEnvelope struct {
	Claim Claim `json:"$claim"`
}

// ClaimCheckOptions configures ClaimCheck. The zero value claims every
// effect's output over DefaultMaxInlineBytes, without a digest.
type ClaimCheckOptions struct {
	// MaxInlineBytes is the largest output recorded inline (default
	// DefaultMaxInlineBytes); a longer one is claimed.
	MaxInlineBytes int
	// ToolIDs limits the ring to these effects, named as the authority ring
	// names them: the tool id, or the step id of a step with no tool id.
	// Empty means every effect: wiring the ring is asking for a lean log,
	// and an explicit list is for exempting nothing by accident.
	ToolIDs []string
	// Digest, when set, is the declared pure projection of a claimed
	// output, per tool: it must depend on its arguments only, and return
	// valid JSON of at most MaxDigestBytes (or nil: no digest).
	Digest func(toolID string, output json.RawMessage) json.RawMessage
}

// ClaimCheck returns the claim-check ring (ADR 0054). An output of a
// selected effect longer than MaxInlineBytes is Put into cs — durable
// before the ring returns — and replaced by its ClaimEnvelope, which is
// what the step returns to the flow and what STEP_COMPLETED records. The
// fold never resolves a claim, so replay serves the envelope from the log
// with no content store read at all; a flow that needs the content calls
// Resolve. Outputs at or under the cap, failures and effects not selected
// pass through untouched.
//
// Durable facts: none of its own; the recorded output is the envelope.
//
// Failure modes: a Put that fails (the store's cap, *event.PayloadTooLargeError,
// included) or a Digest that returns invalid or oversized JSON fails the
// step with *ClaimCheckError; the output is not recorded. A crash after the
// Put and before STEP_COMPLETED leaves an unreferenced blob, which is
// harmless (content-addressed: the re-run Puts the same ref) and left to
// retention. An effect whose real output has the envelope's shape is
// indistinguishable from a claimed one.
func ClaimCheck(cs store.ContentStore, opts ClaimCheckOptions) effect.Middleware {
	limit := opts.MaxInlineBytes
	if limit <= 0 {
		limit = DefaultMaxInlineBytes
	}
	var only map[string]bool
	if len(opts.ToolIDs) > 0 {
		only = make(map[string]bool, len(opts.ToolIDs))
		for _, id := range opts.ToolIDs {
			only[id] = true
		}
	}
	digest := opts.Digest
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		out, err := next(ec, in)
		if err != nil || len(out) <= limit {
			return out, err
		}
		tool := toolIDOf(ec)
		if only != nil && !only[tool] {
			return out, nil
		}
		claim := Claim{Size: len(out)}
		if digest != nil {
			d := digest(tool, out)
			if d != nil && (len(d) > MaxDigestBytes || !json.Valid(d)) {
				return nil, &ClaimCheckError{StepID: ec.StepID,
					Reason: "digest of tool " + strconv.Quote(tool) + " is not JSON of at most " + strconv.Itoa(MaxDigestBytes) + " bytes"}
			}
			claim.Digest = d
		}
		ref, err := cs.Put(ec.Ctx(), out)
		if err != nil {
			return nil, &ClaimCheckError{StepID: ec.StepID, Reason: "storing the output", Err: err}
		}
		claim.Ref = ref
		return json.Marshal(ClaimEnvelope{Claim: claim})
	}
}

// toolIDOf is the id an effect is selected by: its tool id, or its step id.
func toolIDOf(ec *effect.Context) string {
	if ec.ToolID != "" {
		return ec.ToolID
	}
	return ec.StepID
}

// ParseClaim reports whether raw is a claim envelope — an object whose only
// key is "$claim", holding a well-formed ref, a non-negative size and at
// most a digest — and returns its claim.
func ParseClaim(raw json.RawMessage) (Claim, bool) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"`+ClaimKey+`"`)) {
		return Claim{}, false
	}
	var env struct {
		Claim *Claim `json:"$claim"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || dec.More() || env.Claim == nil {
		return Claim{}, false
	}
	c := *env.Claim
	if !store.IsContentRef(c.Ref) || c.Size < 0 {
		return Claim{}, false
	}
	return c, true
}

// Resolve returns the content raw stands for: for a claim envelope, the
// blob it names, read from cs and checked against the claim (its ref must
// hash its bytes and its size match, else *store.ContentCorruptError); for
// any other value (an output recorded inline), raw itself. A blob cs does
// not hold is store.ErrContentNotFound. Resolve is the only read of the
// content store the claim check ever causes, and only when a flow asks.
// Since a blob never changes under its ref, flow code may call it directly:
// the same envelope yields the same bytes on every replay. Do not wrap it
// in a step — that would record the content in the log the claim kept it
// out of.
func Resolve(ctx context.Context, cs store.ContentStore, raw json.RawMessage) ([]byte, error) {
	c, ok := ParseClaim(raw)
	if !ok {
		return raw, nil
	}
	data, err := cs.Get(ctx, c.Ref)
	if err != nil {
		return nil, err
	}
	if actual := store.ContentRef(data); actual != c.Ref || len(data) != c.Size {
		return nil, &store.ContentCorruptError{Ref: c.Ref, Actual: actual}
	}
	return data, nil
}
