package loom

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
)

// Wave 2 waits (ADR 0110, behind kernel.features.inbox): Select waits on
// several inbox topics, gates and timers at once and returns the first that
// answers; Receive is a Select on one topic. Each case is a wait with a
// deterministic id; its answer is recorded under _waitAnswers by that id
// (MESSAGE_CONSUMED for a message, a kernel-stamped wait-addressed
// EXECUTION_RESUMED for a gate or a timer), so a replay serves the same case
// with the same payload.

// gateSelect is the reserved gate a Select parks on.
const gateSelect = admission.GateSelect

// Wait kinds.
const (
	waitGate    = admission.WaitGate
	waitMessage = admission.WaitMessage
	waitTimer   = admission.WaitTimer
)

// waitSpec is one entry of EXECUTION_SUSPENDED.waits.
type waitSpec = admission.WaitSpec

// SelectCase is one alternative of Select: OnMessage, OnGate or OnTimer.
type SelectCase struct {
	kind  string
	name  string // topic or gate
	after time.Duration
	at    *time.Time
}

// OnMessage waits for the next message on an inbox topic.
func OnMessage(topic string) SelectCase { return SelectCase{kind: waitMessage, name: topic} }

// OnGate waits for a resume of gate (under the flow's resume schema for it).
func OnGate(gate string) SelectCase { return SelectCase{kind: waitGate, name: gate} }

// OnTimer waits for d to pass (the deadline is recorded).
func OnTimer(d time.Duration) SelectCase { return SelectCase{kind: waitTimer, after: d} }

// OnTimerAt waits until t.
func OnTimerAt(t time.Time) SelectCase { return SelectCase{kind: waitTimer, at: &t} }

// Selected is the case a Select returned: its index among the cases, its
// kind ("message", "gate" or "timer") and its payload (the message, the
// gate's answer, or {"wakeAt": …}).
type Selected struct {
	Index   int
	Kind    string
	Payload json.RawMessage
}

// Select waits until one of cases answers and returns it. A message already
// in the inbox is taken at once (first case first); otherwise the execution
// parks with every case as a wait until the first arrives. Recorded, so a
// replay returns the same case and payload.
func (c *Context) Select(cases ...SelectCase) (Selected, error) {
	c.checkpoint()
	if !c.drive.rt.cfg.Features.Inbox {
		return Selected{}, &NotConfiguredError{Field: "Features.Inbox", Need: "select (and receive)"}
	}
	if len(cases) == 0 {
		return Selected{}, errors.New("loom: select needs at least one case")
	}
	for _, sc := range cases {
		if sc.kind == waitTimer {
			if err := c.needTimers("a Select with a timer case"); err != nil {
				return Selected{}, err
			}
		}
	}
	base := c.implicitID("select")
	waits := make([]waitSpec, len(cases))
	var now int64
	for i, sc := range cases {
		w := waitSpec{WaitID: base + "/" + strconv.Itoa(i), Kind: sc.kind}
		switch sc.kind {
		case waitMessage:
			if err := event.ValidateID("topic", sc.name); err != nil {
				return Selected{}, err
			}
			w.Topic = sc.name
		case waitGate:
			if err := validateGate(sc.name); err != nil {
				return Selected{}, err
			}
			w.On = sc.name
		case waitTimer:
			var at int64
			if sc.at != nil {
				at = sc.at.UnixMilli()
			} else {
				if now == 0 {
					now = c.recordedNow()
				}
				at = now + sc.after.Milliseconds()
			}
			w.WakeAt = &at
		}
		waits[i] = w
	}
	for {
		if sel, ok := c.selected(waits); ok {
			return sel, nil
		}
		if c.consumeAvailable(waits) {
			continue
		}
		c.wait(suspendPayload{On: gateSelect, Waits: waits})
	}
}

// Receive returns the next message on topic, parking until one arrives.
func (c *Context) Receive(topic string) (json.RawMessage, error) {
	sel, err := c.Select(OnMessage(topic))
	return sel.Payload, err
}

// Receive is the typed form of Context.Receive.
func Receive[T any](ctx *Context, topic string) (T, error) {
	var v T
	raw, err := ctx.Receive(topic)
	if err != nil {
		return v, err
	}
	if err := decodeInto(raw, &v); err != nil {
		return v, fmt.Errorf("loom: topic %q: decoding message: %w", topic, err)
	}
	return v, nil
}

// selected returns the recorded answer of one of waits, if any.
func (c *Context) selected(waits []waitSpec) (Selected, bool) {
	var out Selected
	found := false
	c.state(func(s *fold.State) {
		for i, w := range waits {
			if a, ok := s.Variables.WaitAnswers[w.WaitID]; ok {
				out, found = Selected{Index: i, Kind: w.Kind, Payload: orNull(a.Payload)}, true
				return
			}
		}
	})
	return out, found
}

// consumeAvailable takes the first message already waiting on one of the
// message waits, recording MESSAGE_CONSUMED under its wait id.
func (c *Context) consumeAvailable(waits []waitSpec) bool {
	r := c.drive
	st := r.j.State()
	for _, w := range waits {
		if w.Kind != waitMessage {
			continue
		}
		msg, ok, err := r.rt.nextMessage(r.ctx, r.x.id, st, w.Topic)
		if err != nil {
			r.abort(err)
		}
		if ok {
			r.commit(event.MessageConsumed, consumedPayload(w, msg), kernelStamp())
			return true
		}
	}
	return false
}

// parkWaits decodes the waits of the current park.
func parkWaits(st fold.State) []waitSpec { return admission.ParkWaits(st) }

// answered reports whether wait id already has its answer.
func answered(st fold.State, id string) bool { return admission.Answered(st, id) }
