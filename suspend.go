package loom

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// SuspendOption configures Suspend.
type SuspendOption func(*suspendPayload)

// Timeout bounds the wait: the park records wakeAt = now + d, so a timer
// (TIMER_FIRED) may answer the gate instead of its resume (spec §5).
func Timeout(d time.Duration) SuspendOption {
	return func(p *suspendPayload) { ms := d.Milliseconds(); p.TimeoutMs = &ms }
}

// CorrelationKey attaches a business key for an external dispatcher;
// nothing in the runtime routes by it.
func CorrelationKey(k string) SuspendOption {
	return func(p *suspendPayload) { p.CorrelationKey = k }
}

// suspendPayload is EXECUTION_SUSPENDED's payload (docs/events.md).
type suspendPayload struct {
	On             string `json:"on"`
	WakeAt         *int64 `json:"wakeAt,omitempty"`
	TimeoutMs      *int64 `json:"timeoutMs,omitempty"`
	CorrelationKey string `json:"correlationKey,omitempty"`
	StepID         string `json:"stepId,omitempty"`
	Attempt        *int64 `json:"attempt,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// Suspend parks the execution on gate until a resume addressed to it (spec
// §5). On replay the gates a run passes are answered in order from the
// recorded resumes (_resumePayloads); the first gate without an answer parks:
// EXECUTION_SUSPENDED is made durable, a snapshot taken, and the calling
// goroutine unwound with runtime.Goexit, which deferred calls see but
// recover cannot stop. The caller of Start or Resume observes a suspended
// execution; a later Resume re-runs the flow and Suspend returns the answer.
func (c *Context) Suspend(gate string, opts ...SuspendOption) (json.RawMessage, error) {
	c.checkpoint()
	if err := validateGate(gate); err != nil {
		return nil, err
	}
	r := c.run
	r.mu.Lock()
	idx := r.gates
	var answer *fold.ResumeEntry
	c.state(func(s *fold.State) {
		if idx < len(s.Variables.ResumePayloads) {
			e := s.Variables.ResumePayloads[idx]
			answer = &e
		}
	})
	if answer != nil {
		r.gates++
		r.segmentLive = false
		r.mu.Unlock()
		return answer.Payload, nil
	}
	r.mu.Unlock()
	p := suspendPayload{On: gate}
	for _, o := range opts {
		o(&p)
	}
	if p.TimeoutMs != nil {
		wake := r.rt.cfg.Clock.Now().UnixMilli() + *p.TimeoutMs
		p.WakeAt = &wake
	}
	if c.branch == "" && r.rt.stickyCap() > 0 {
		// No branch is alive at the root: the flow can wait in place.
		return r.parkSticky(c, p), nil
	}
	r.park(p)
	return nil, nil // unreachable: park unwinds
}

// Suspend is the typed form of Context.Suspend: the gate's answer decoded
// into T.
func Suspend[T any](ctx *Context, gate string, opts ...SuspendOption) (T, error) {
	var v T
	raw, err := ctx.Suspend(gate, opts...)
	if err != nil {
		return v, err
	}
	if err := decodeInto(raw, &v); err != nil {
		return v, fmt.Errorf("loom: gate %q: decoding answer: %w", gate, err)
	}
	return v, nil
}

func validateGate(gate string) error {
	if err := event.ValidateID("gate", gate); err != nil {
		return err
	}
	if strings.HasPrefix(gate, "__loom_") {
		return fmt.Errorf("loom: gate %q: names starting with __loom_ are reserved", gate)
	}
	if event.IsKnown(gate) {
		return fmt.Errorf("loom: gate %q: a kernel event type can never answer a gate", gate)
	}
	return nil
}

// park records the suspension durably and unwinds the calling goroutine.
// Only the first park of a run records; a sibling that parks after it just
// stops.
func (r *run) park(p suspendPayload) {
	r.mu.Lock()
	first := !r.parked && !r.cancelled && r.abortErr == nil
	r.parked = r.parked || first
	r.mu.Unlock()
	r.root.stop.Store(true)
	if first {
		r.commit(event.ExecutionSuspended, p, nil)
		r.barrier()
	}
	runtime.Goexit()
}
