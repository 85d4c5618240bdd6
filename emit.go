package loom

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Emit appends an application event from the flow, once per execution
// rather than once per run: a re-run does not append it again unless a
// step or decision before it (since the last gate) ran again. (Precisely,
// ADR 0102: a re-run skips the n-th emit of a content digest when the log
// already holds more than n stamped emits of it and nothing of the current
// gate segment ran live before it. In a Parallel branch "before it" is the
// branch's own code order and what came before the block, never a
// sibling's step: so the decision never depends on how branches
// interleave. After the block, the flow has seen every branch's.) Kernel
// event types are refused except the few
// userspace may emit, which are validated first; a refusal appends nothing
// and is an *EmitRefusedError.
func (c *Context) Emit(eventType string, payload any) error {
	c.checkpoint()
	return c.emit(eventType, payload)
}

// Stream appends one chunk of a streamed output under the same
// once-per-execution rule as Emit.
func (c *Context) Stream(eventType string, chunk any) error {
	c.checkpoint()
	return c.emit(eventType, chunk)
}

func (c *Context) emit(eventType string, payload any) error {
	if err := event.ValidateID("eventType", eventType); err != nil {
		return &EmitRefusedError{EventType: eventType, Reason: err.Error()}
	}
	raw, err := marshalPayload(payload)
	if err != nil {
		return &EmitRefusedError{EventType: eventType, Reason: "payload has no JSON form: " + err.Error()}
	}
	raw = orNull(raw)
	if err := event.ValidateExact("payload", raw); err != nil {
		return &EmitRefusedError{EventType: eventType, Reason: err.Error()}
	}
	r := c.drive
	var verr error
	c.state(func(s *fold.State) { verr = validateUserspaceEmit(eventType, raw, s) })
	if verr != nil {
		return verr
	}
	// Kernel facts are never stamped, so never served (spec §3).
	stampable := eventType != event.DecisionRecorded
	var meta map[string]json.RawMessage
	r.mu.Lock()
	d, derr := event.FlowEmitDigest(r.gates, eventType, raw)
	if stampable && derr == nil {
		if r.emitCount == nil {
			r.emitCount = map[string]int{}
		}
		n := r.emitCount[d]
		r.emitCount[d] = n + 1
		var logged int64
		c.state(func(s *fold.State) { logged = s.Variables.FlowEmits[d] })
		if logged > int64(n) && !c.causal.live {
			r.mu.Unlock()
			return nil // proven by the log: served
		}
		if int64(n) >= logged && r.inFlight == 0 && !c.causal.unserved {
			stamp, _ := json.Marshal(d)
			meta = map[string]json.RawMessage{"flowEmit": stamp}
		}
	}
	r.mu.Unlock()
	r.commit(eventType, raw, meta)
	return nil
}

// validateUserspaceEmit enforces spec §5 on an emit from flow code.
func validateUserspaceEmit(typ string, raw json.RawMessage, s *fold.State) error {
	if !event.IsUserspaceEmittable(typ) || strings.HasPrefix(typ, reservedPrefix) {
		return &EmitRefusedError{EventType: typ, Reason: "kernel event types cannot be emitted by userspace"}
	}
	refuse := func(why string) error { return &EmitRefusedError{EventType: typ, Reason: why} }
	switch typ {
	case event.ResourceMetered:
		var p map[string]json.RawMessage
		if unmarshalRecorded(raw, &p) != nil {
			return refuse("payload must be an object")
		}
		for _, dim := range []string{"tokens", "costUsd", "ms", "memBytes", "wallMs", "netBytes"} {
			if v, ok := p[dim]; ok && !validMeteredJSON(v) {
				return refuse(dim + " must be a finite, non-negative number under the ceiling")
			}
		}
		if custom, ok := p["custom"]; ok {
			var m map[string]float64
			if unmarshalRecorded(custom, &m) != nil {
				return refuse("custom must map names to numbers")
			}
			for k, v := range m { //loom:order-independent validation only
				if k == "" || k == fold.ProtoKey || !validMetered(v) {
					return refuse("custom amounts must be finite, non-negative and under the ceiling")
				}
			}
		}
	case event.QuotaExceeded, event.SafetyBlocked, event.EgressDenied, event.EffectDenied:
		var p struct {
			Reason json.RawMessage `json:"reason"`
		}
		if unmarshalRecorded(raw, &p) != nil {
			return refuse("payload must be an object")
		}
		if p.Reason != nil {
			var reason string
			if unmarshalRecorded(p.Reason, &reason) != nil || len(reason) > fold.MaxReasonBytes {
				return refuse("reason must be a string of at most 512 bytes")
			}
		}
	case event.DecisionRecorded:
		return validateUserspaceDecision(raw, s)
	}
	return nil
}

func validateUserspaceDecision(raw json.RawMessage, s *fold.State) error {
	refuse := func(why string) error { return &EmitRefusedError{EventType: event.DecisionRecorded, Reason: why} }
	var p struct {
		DecisionID string          `json:"decisionId"`
		Choice     json.RawMessage `json:"choice"`
	}
	if unmarshalRecorded(raw, &p) != nil || p.DecisionID == "" {
		return refuse("payload must be an object with a decisionId")
	}
	if strings.HasPrefix(p.DecisionID, reservedPrefix) || p.DecisionID == fold.ProtoKey {
		return refuse("decision ids starting with __loom_ are reserved")
	}
	if prev, ok := s.Variables.Decisions[p.DecisionID]; ok && !sameJSON(prev.Choice, orNull(p.Choice)) {
		return refuse("a recorded choice cannot be changed")
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	ca, errA := event.Canonical(a)
	cb, errB := event.Canonical(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func validMeteredJSON(raw json.RawMessage) bool {
	var v float64
	return unmarshalRecorded(raw, &v) == nil && validMetered(v)
}

func validMetered(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= fold.MaxMeteredValue
}
