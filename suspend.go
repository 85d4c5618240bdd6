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
type SuspendOption func(*suspendOptions)

type suspendOptions struct {
	timeout        *time.Duration
	correlationKey string
}

// Timeout bounds the wait to d: if nobody answers the gate by then, its
// durable timer answers it (across restarts) with {"wakeAt": <epoch ms>} —
// which decodes into a struct answer as its zero value, and fails to decode
// into a bool or string one, so give a timed gate a struct type or read the
// raw answer. It needs Config.Timers; without it Suspend fails at once with
// *NotConfiguredError.
func Timeout(d time.Duration) SuspendOption {
	return func(o *suspendOptions) { o.timeout = &d }
}

// CorrelationKey attaches a business key for an external dispatcher;
// nothing in the runtime routes by it.
func CorrelationKey(k string) SuspendOption {
	return func(o *suspendOptions) { o.correlationKey = k }
}

// suspendPayload is EXECUTION_SUSPENDED's payload (docs/events.md).
type suspendPayload struct {
	On             string     `json:"on"`
	WakeAt         *int64     `json:"wakeAt,omitempty"`
	TimeoutMs      *int64     `json:"timeoutMs,omitempty"`
	CorrelationKey string     `json:"correlationKey,omitempty"`
	StepID         string     `json:"stepId,omitempty"`
	Attempt        *int64     `json:"attempt,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	Waits          []waitSpec `json:"waits,omitempty"`
}

// Suspend parks the execution on gate until Resume answers it. When the
// flow re-runs, each gate it already passed gets its recorded answer, in
// order (a gate answered under another name is a divergence); the first
// unanswered gate parks: EXECUTION_SUSPENDED is made durable and a snapshot
// taken. A park from the
// flow's root goroutine then waits in memory (a sticky park) for a Resume in
// this process; any other park unwinds the calling goroutine with
// runtime.Goexit, which deferred calls see but recover cannot stop, and the
// next Resume re-runs the flow. Either way Suspend returns the answer.
func (c *Context) Suspend(gate string, opts ...SuspendOption) (json.RawMessage, error) {
	c.checkpoint()
	if err := validateGate(gate); err != nil {
		return nil, err
	}
	var o suspendOptions
	for _, opt := range opts {
		opt(&o)
	}
	p := suspendPayload{On: gate, CorrelationKey: o.correlationKey}
	if o.timeout != nil {
		if err := c.needTimers("a gate with a Timeout"); err != nil {
			return nil, err
		}
		// The deadline is read (a recorded decision) whether or not the gate
		// is already answered, so every run mints the same decision ids.
		ms := o.timeout.Milliseconds()
		wake := c.recordedNow() + ms
		p.TimeoutMs, p.WakeAt = &ms, &wake
	}
	return c.gateWait(p)
}

// gateWait parks until the next positional answer exists and returns it.
func (c *Context) gateWait(p suspendPayload) (json.RawMessage, error) {
	for {
		if answer, ok := c.servePositional(p.On); ok {
			return answer, nil
		}
		c.wait(p)
	}
}

// servePositional returns the next recorded gate answer of this run, if
// the log holds one, and consumes it. An answer recorded for another gate
// (the gate was renamed or reordered since) is a replay divergence: in
// fail mode the run parks on the diverged gate instead of taking it.
func (c *Context) servePositional(gate string) (json.RawMessage, bool) {
	r := c.drive
	r.mu.Lock()
	idx := r.gates
	var entry fold.ResumeEntry
	found := false
	c.state(func(s *fold.State) {
		if idx < len(s.Variables.ResumePayloads) {
			entry, found = s.Variables.ResumePayloads[idx], true
		}
	})
	r.mu.Unlock()
	if !found {
		return nil, false
	}
	if entry.EventType != "" && entry.EventType != gate && entry.EventType != event.TimerFired && r.div != nil {
		r.observeGate(gate, entry)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gates++
	c.causal.live = false
	return entry.Payload, true
}

// wait parks on p. From the root goroutine the park is sticky and wait
// returns once it is answered (the answer is then in the folded state);
// otherwise it unwinds.
func (c *Context) wait(p suspendPayload) {
	r := c.drive
	if c.branch == "" && r.rt.stickyCap() > 0 {
		r.parkSticky(p)
		return
	}
	r.park(p)
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
	if strings.HasPrefix(gate, reservedPrefix) {
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
func (r *drive) park(p suspendPayload) {
	if r.verifying() {
		r.reach(frontier{kind: frontierPark, park: p})
	}
	r.mu.Lock()
	first := !r.parked && !r.cancelled && r.abortErr == nil
	r.parked = r.parked || first
	r.mu.Unlock()
	r.root.stop.Store(true)
	if first {
		r.armTimer(p)
		r.commit(event.ExecutionSuspended, p, nil)
		r.barrier()
	}
	runtime.Goexit()
}
