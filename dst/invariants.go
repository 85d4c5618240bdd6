package dst

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// The invariants every run is checked against, by name.
const (
	// InvAckedLost: every event the durable log acknowledged (an append
	// that returned nil) is in the final log, byte for byte, at its
	// sequence.
	InvAckedLost = "no-acknowledged-event-lost"
	// InvContiguous: every final log has the sequences 0…n-1, in order,
	// under its own execution id.
	InvContiguous = "sequences-contiguous"
	// InvStepRerun: a step whose outcome is in the log never runs again,
	// and a non-idempotent step runs at most once per idempotency key.
	InvStepRerun = "no-recorded-step-rerun"
	// InvStateFold: the runtime's LoadState of every execution encodes
	// (fold.Encode) to the same bytes as fold.Fold of its stored log.
	InvStateFold = "state-equals-refold"
	// InvResumable: every parked execution moves when its park is
	// answered: its gate resumed, its timer fired, its message sent, its
	// in-doubt step resolved; a parent parked on a child is answered once
	// the child ends.
	InvResumable = "parked-is-resumable"
	// InvTimerOnce: a park's timer fires at most once, only while the park
	// is open, and at a wakeAt the park recorded.
	InvTimerOnce = "timer-fires-once"
	// InvNoStuck: after the final Recover, no execution is left running
	// with no live driver.
	InvNoStuck = "no-stuck-running"
	// InvNoDivergence: no replay parks on __loom_diverged__ (the flows do
	// not change during a run, so a divergence is a replay that is not
	// deterministic).
	InvNoDivergence = "no-divergence"
	// InvSettles: every drive comes to rest within the wait's bound.
	InvSettles = "settles"
	// InvCallReturns: every call into the runtime returns to its caller:
	// no panic escapes it, and no runtime.Goexit ends the caller's
	// goroutine.
	InvCallReturns = "calls-return"
)

// Invariants lists every invariant name.
var Invariants = []string{InvAckedLost, InvContiguous, InvStepRerun, InvStateFold, InvResumable, InvTimerOnce,
	InvNoStuck, InvNoDivergence, InvSettles, InvCallReturns}

// checkStuck is InvNoStuck, after the final recovery has settled.
func (r *run) checkStuck() {
	w, err := r.look()
	if err != nil {
		r.violate(InvSettles, "", "reading the durable log: "+err.Error())
		return
	}
	for _, x := range w.execs {
		if x.running() && !r.proc.track.isLive(x.ID) {
			r.violate(InvNoStuck, x.ID, fmt.Sprintf("left %s at #%d with no live driver after the final Recover",
				x.State.Status, x.State.Sequence))
		}
	}
}

// checkLogs runs the invariants over the final logs.
func (r *run) checkLogs() {
	ids, logs, err := r.logs()
	if err != nil {
		r.violate(InvSettles, "", "reading the final logs: "+err.Error())
		return
	}
	r.checkAcked(logs)
	for _, id := range ids {
		evs := logs[id]
		r.checkContiguous(id, evs)
		if store.IsInboxStream(id) {
			continue
		}
		r.checkTimers(id, evs)
		r.checkFold(id, evs)
	}
}

// checkAcked is InvAckedLost.
func (r *run) checkAcked(logs map[string][]event.Envelope) {
	r.acked.mu.Lock()
	defer r.acked.mu.Unlock()
	ids := make([]string, 0, len(r.acked.by))
	for id := range r.acked.by { //loom:sorted below
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		seqs := make([]int64, 0, len(r.acked.by[id]))
		for s := range r.acked.by[id] { //loom:sorted below
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		evs := logs[id]
		for _, s := range seqs {
			want := r.acked.by[id][s]
			if s >= int64(len(evs)) {
				r.violate(InvAckedLost, id, fmt.Sprintf("the store acknowledged #%d but the final log ends at #%d", s, len(evs)-1))
				break
			}
			if got := event.EncodeValid(evs[s]); !bytes.Equal(got, want) {
				r.violate(InvAckedLost, id, fmt.Sprintf("#%d differs from what the store acknowledged: acknowledged %s, final %s", s, want, got))
				break
			}
		}
	}
}

// checkContiguous is InvContiguous.
func (r *run) checkContiguous(id string, evs []event.Envelope) {
	for i, e := range evs {
		if e.Sequence != int64(i) || e.ExecutionID != id {
			r.violate(InvContiguous, id, fmt.Sprintf("entry %d of the log has sequence %d of execution %q", i, e.Sequence, e.ExecutionID))
			return
		}
	}
}

// checkTimers is InvTimerOnce: walk the log, opening a park at each
// EXECUTION_SUSPENDED and closing it at the EXECUTION_RESUMED that answers
// it (or the execution's end).
func (r *run) checkTimers(id string, evs []event.Envelope) {
	var (
		open   bool
		fired  bool
		parkAt int64
		wakes  []int64
	)
	for _, e := range evs {
		switch e.Type {
		case event.ExecutionSuspended:
			open, fired, parkAt, wakes = true, false, e.Sequence, wakeAtsOf(e.Payload)
		case event.TimerFired:
			var p struct {
				WakeAt int64 `json:"wakeAt"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			switch {
			case !open:
				r.violate(InvTimerOnce, id, fmt.Sprintf("TIMER_FIRED #%d (wakeAt %d) answers no open park", e.Sequence, p.WakeAt))
			case fired:
				r.violate(InvTimerOnce, id, fmt.Sprintf("TIMER_FIRED #%d is the second timer of the park at #%d", e.Sequence, parkAt))
			case !slices.Contains(wakes, p.WakeAt):
				r.violate(InvTimerOnce, id, fmt.Sprintf("TIMER_FIRED #%d has wakeAt %d; the park at #%d waits for %v", e.Sequence, p.WakeAt, parkAt, wakes))
			}
			fired = true
		case event.ExecutionResumed:
			open = false
		}
	}
}

// wakeAtsOf returns the wakeAts an EXECUTION_SUSPENDED records: its own
// and its waits'.
func wakeAtsOf(payload json.RawMessage) []int64 {
	var p struct {
		WakeAt *int64 `json:"wakeAt"`
		Waits  []wait `json:"waits"`
	}
	_ = json.Unmarshal(payload, &p)
	var out []int64
	if p.WakeAt != nil {
		out = append(out, *p.WakeAt)
	}
	for _, w := range p.Waits {
		if w.WakeAt != nil {
			out = append(out, *w.WakeAt)
		}
	}
	return out
}

// checkFold is InvStateFold: the runtime's state (a snapshot and its tail,
// or the live drive's) against a fold of the whole stored log.
func (r *run) checkFold(id string, evs []event.Envelope) {
	ctx, cancel := r.callCtx()
	defer cancel()
	st, err := r.rt.LoadState(ctx, id)
	if err != nil {
		r.violate(InvStateFold, id, "LoadState: "+err.Error())
		return
	}
	got, err1 := fold.Encode(st)
	want, err2 := fold.Encode(fold.Fold(evs))
	if err1 != nil || err2 != nil {
		r.violate(InvStateFold, id, fmt.Sprintf("encoding the states: %v, %v", err1, err2))
		return
	}
	if !bytes.Equal(got, want) {
		r.violate(InvStateFold, id, fmt.Sprintf("LoadState at #%d differs from a fold of the %d stored events: %s", st.Sequence, len(evs), firstDiff(got, want)))
	}
}

// firstDiff describes where two encodings part.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	clip := func(s []byte) string {
		end := min(len(s), i+60)
		return string(s[max(i-20, 0):end])
	}
	return fmt.Sprintf("at byte %d: runtime …%s…, refold …%s…", i, clip(a), clip(b))
}
