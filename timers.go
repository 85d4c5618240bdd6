package loom

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/store"
)

// Durable time (T1). Every timed wait records its wakeAt in the log — the
// deadline itself comes from a recorded decision, so a replay that parks
// again parks until the same instant. With Config.Timers wired, a timer is
// stored before the park is committed; the poller fires it through the
// normal resume path (TIMER_FIRED), where the ingress gate checks it
// against the recorded wakeAt. A stale or duplicate timer is therefore
// refused and dropped, never answered twice.

// gateSleep is the reserved gate a Sleep parks on: only a timer answers it.
const gateSleep = admission.GateSleep

// parkTimerKey is the TimerStore key of an execution's park timer.
func parkTimerKey(id string) string { return "park:" + id }

// Sleep parks the execution for d, durably: a restart does not shorten or
// lengthen it, and it ends exactly once, by the timer.
func (c *Context) Sleep(d time.Duration) error {
	c.checkpoint()
	if err := c.needTimers("a timed wait (Sleep)"); err != nil {
		return err
	}
	return c.sleepUntil(c.recordedNow() + d.Milliseconds())
}

// needTimers refuses a timed wait the runtime could never wake.
func (c *Context) needTimers(need string) error {
	if c.drive.rt.cfg.Timers == nil {
		return &NotConfiguredError{Field: "Timers", Need: need}
	}
	return nil
}

// SleepUntil parks the execution until t (recorded in the log as wakeAt).
func (c *Context) SleepUntil(t time.Time) error {
	c.checkpoint()
	if err := c.needTimers("a timed wait (SleepUntil)"); err != nil {
		return err
	}
	return c.sleepUntil(t.UnixMilli())
}

func (c *Context) sleepUntil(wakeAt int64) error {
	_, err := c.gateWait(suspendPayload{On: gateSleep, WakeAt: &wakeAt})
	return err
}

// recordedNow is the wall clock in epoch ms as a recorded decision.
func (c *Context) recordedNow() int64 {
	return Now(c).UnixMilli()
}

// armTimer stores the park's timer before the park is committed, so no
// durable timed park is ever without its timer.
func (r *drive) armTimer(p suspendPayload) {
	wakeAt := parkWakeAt(p)
	if wakeAt == nil {
		return
	}
	ts := r.rt.cfg.Timers
	if ts == nil {
		r.rt.cfg.Logger.Warn("loom: a timed wait without Config.Timers is never woken", "execution", r.x.id)
		return
	}
	if err := ts.Put(r.ctx, store.Timer{Key: parkTimerKey(r.x.id), ExecutionID: r.x.id, WakeAt: *wakeAt}); err != nil {
		r.abort(err)
	}
}

// parkWakeAt is the earliest instant that wakes the park, if any.
func parkWakeAt(p suspendPayload) *int64 {
	at := p.WakeAt
	for _, w := range p.Waits {
		if w.WakeAt != nil && (at == nil || *w.WakeAt < *at) {
			at = w.WakeAt
		}
	}
	return at
}

// dropParkTimer removes the park timer a non-timer answer made pointless.
func (rt *Runtime) dropParkTimer(ctx context.Context, id string, wakeAt *int64) {
	if rt.cfg.Timers == nil || wakeAt == nil {
		return
	}
	if _, err := rt.cfg.Timers.Delete(ctx, parkTimerKey(id), *wakeAt); err != nil {
		rt.cfg.Logger.Warn("loom: park timer not dropped; it will be refused when it fires", "execution", id, "error", err)
	}
}

// deadlineID is the kernel decision recording an execution's deadline.
const deadlineID = reservedPrefix + "deadline"

// deadlineTimerKey is the TimerStore key of an execution's deadline.
func deadlineTimerKey(id string) string { return "deadline:" + id }

// recordDeadline records the execution's deadline (a kernel decision) and
// stores its timer first, so the deadline is enforced across restarts.
func (rt *Runtime) recordDeadline(ctx context.Context, j *journal.Journal, at int64) error {
	if rt.cfg.Timers != nil {
		if err := rt.cfg.Timers.Put(ctx, store.Timer{Key: deadlineTimerKey(j.ExecutionID()), ExecutionID: j.ExecutionID(), WakeAt: at}); err != nil {
			return err
		}
	}
	_, err := j.Commit(event.DecisionRecorded, map[string]any{"decisionId": deadlineID, "choice": at}, kernelStamp())
	return err
}

// deadlineOf is the recorded deadline of the execution, if any.
func deadlineOf(st fold.State) (int64, bool) {
	d, ok := st.Variables.Decisions[deadlineID]
	var at int64
	if !ok || unmarshalRecorded(d.Choice, &at) != nil {
		return 0, false
	}
	return at, true
}

// TimerHandler fires a timer whose key has the handler's prefix (a
// schedule's tick, say). An error leaves the timer for the next poll.
type TimerHandler func(ctx context.Context, t store.Timer) error

// HandleTimers routes due timers whose key starts with prefix to fn. Park
// timers ("park:") are the runtime's own. A due timer with no handler is
// dropped with a warning, so every runtime polling a shared TimerStore must
// register the same handlers (a schedule.Scheduler's Prefix and Fire, say).
func (rt *Runtime) HandleTimers(prefix string, fn TimerHandler) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.timerHandlers == nil {
		rt.timerHandlers = map[string]TimerHandler{}
	}
	rt.timerHandlers[prefix] = fn
}

// timerBatch is how many due timers one store read returns.
const timerBatch = 500

// FireDueTimers fires every timer due at the runtime clock's now, in
// batches, with Config.TimerWorkers concurrent firings, and returns how many
// it fired. A park timer resumes its execution with TIMER_FIRED through the
// ingress gate; a refused one (answered otherwise, stale) is dropped. The
// background poller calls it; tests with a fake clock call it directly.
func (rt *Runtime) FireDueTimers(ctx context.Context) (int, error) {
	ts := rt.cfg.Timers
	if ts == nil {
		return 0, &NotConfiguredError{Field: "Timers", Need: "FireDueTimers"}
	}
	fired := 0
	for {
		now := rt.cfg.Clock.Now().UnixMilli()
		due, err := rt.dueTimers(ctx, now)
		if err != nil || len(due) == 0 {
			return fired, err
		}
		n, err := rt.fireBatch(ctx, due)
		fired += n
		if err != nil {
			return fired, err
		}
		if n == 0 {
			return fired, nil // only timers whose handlers keep failing are due
		}
	}
}

// dueTimers reads the next batch of due timers. A store that claims
// (store.TimerClaimer) hands each to one node for a lease TTL, so nodes
// sharing it fire each timer once; a plain store lists them to every
// poller, and the ingress gate refuses the duplicates.
func (rt *Runtime) dueTimers(ctx context.Context, now int64) ([]store.Timer, error) {
	if c, ok := rt.cfg.Timers.(store.TimerClaimer); ok {
		return c.ClaimDue(ctx, rt.cfg.NodeID, now, rt.leaseTTL(), timerBatch)
	}
	return rt.cfg.Timers.Due(ctx, now, timerBatch)
}

func (rt *Runtime) fireBatch(ctx context.Context, due []store.Timer) (int, error) {
	workers := rt.cfg.TimerWorkers
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fired int
		first error
	)
	next := make(chan store.Timer)
	for range min(workers, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				ok, err := rt.fire(ctx, t)
				mu.Lock()
				if ok {
					fired++
				}
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range due {
		next <- t
	}
	close(next)
	wg.Wait()
	return fired, first
}

// fire handles one due timer and deletes it unless its handler failed.
func (rt *Runtime) fire(ctx context.Context, t store.Timer) (bool, error) {
	if o := rt.cfg.Observer; o != nil {
		o.TimerFired(ctx, t.Key, time.Duration(rt.cfg.Clock.Now().UnixMilli()-t.WakeAt)*time.Millisecond)
	}
	if strings.HasPrefix(t.Key, "park:") {
		ev := ResumeEvent{EventType: event.TimerFired, Payload: marshalJSON(map[string]int64{"wakeAt": t.WakeAt})}
		err := rt.resume(ctx, t.ExecutionID, ev, nil, resumeOptions{})
		if rr := (*ResumeRefusedError)(nil); errors.As(err, &rr) && (rr.Reason == RefusedBusy || rr.Reason == RefusedNotSuspended) {
			// Not answered: the park is still being made (another node holds
			// it, or it is not committed yet). Keep the timer: it is due
			// again at the next poll, or once this node's claim expires.
			return false, nil
		}
		if err != nil && !isRefusal(err) && !errors.Is(err, ErrExecutionNotFound) {
			var ve *ResumePayloadValidationError
			if !errors.As(err, &ve) {
				return false, err
			}
		}
	} else if strings.HasPrefix(t.Key, "deadline:") {
		err := rt.Cancel(ctx, t.ExecutionID, "deadline exceeded")
		var rr *ResumeRefusedError
		if err != nil && !errors.As(err, &rr) && !errors.Is(err, ErrExecutionNotFound) {
			return false, err
		}
	} else if h := rt.timerHandler(t.Key); h != nil {
		if err := h(ctx, t); err != nil {
			rt.cfg.Logger.Warn("loom: timer handler failed; retried at the next poll", "key", t.Key, "error", err)
			return false, nil
		}
	} else {
		// Left in place it would head every poll; every node sharing a
		// TimerStore must register the same handlers (HandleTimers).
		rt.cfg.Logger.Warn("loom: no handler for a due timer; dropped", "key", t.Key)
	}
	// Handled: the delete must follow even when Close cancels ctx right
	// now (a durable answer whose timer stayed would be fired again at the
	// next start, and refused); Close waits for this goroutine.
	_, err := rt.cfg.Timers.Delete(context.WithoutCancel(ctx), t.Key, t.WakeAt)
	return true, err
}

func (rt *Runtime) timerHandler(key string) TimerHandler {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for prefix, h := range rt.timerHandlers { //loom:order-independent prefixes do not overlap by convention
		if strings.HasPrefix(key, prefix) {
			return h
		}
	}
	return nil
}

// pollTimers is the background poller: every TimerPoll it fires what is
// due. It and the lease heartbeat are the only places the runtime paces
// itself on the wall clock; every other wait is on a signal.
func (rt *Runtime) pollTimers() {
	defer rt.wg.Done()
	tick := time.NewTicker(rt.cfg.TimerPoll)
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
			if _, err := rt.FireDueTimers(rt.ctx); err != nil && rt.ctx.Err() == nil {
				rt.cfg.Logger.Warn("loom: timer poll failed", "error", err)
			}
		}
	}
}
