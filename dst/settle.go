package dst

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/loom-kernel/loom/fold"
)

// maxSettlePasses bounds the passes of one settle: each waits for the
// drives it found, which may start others (a child, a successor, a
// recovery).
const maxSettlePasses = 200

// owedWakeWait bounds how long a settle waits for the kernel to answer a
// parent whose child has ended (a wall-clock safety net, never pacing: the
// answer usually comes within microseconds).
const owedWakeWait = 250 * time.Millisecond

// settle brings the run to rest before the next operation: every
// execution parked, ended, or running with no driver (an aborted drive, a
// crash), each through the runtime's own wait. A process a crash left
// dying dies once the rest of it is at rest, and the next one starts and
// recovers. So no operation ever races a drive, and a run does not depend
// on how fast a drive is.
func (r *run) settle() {
	waitedOwed := map[string]int64{}
	for range maxSettlePasses {
		if r.wedged {
			r.wedged = false
			r.note("  a call did not return: the runtime is wedged; killing the process")
			r.proc.kill()
		}
		if r.proc.isDead() {
			r.restart()
			continue
		}
		// The drives open now, from the tracker (a drive is registered
		// before its launch returns), not from a listing of the log, which
		// a drive racing ahead may leave behind.
		pending, starting, stable := r.busy()
		if !stable {
			continue
		}
		if len(pending)+len(starting) > 0 {
			for _, id := range starting {
				if !r.waitStarted(id) {
					return
				}
			}
			for _, id := range pending {
				if !r.waitSettled(id) {
					return
				}
			}
			continue
		}
		if r.releaseAborted() {
			continue
		}
		w, err := r.look()
		if err != nil {
			r.violate(InvSettles, "", "reading the durable log: "+err.Error())
			return
		}
		if id := r.owedWake(w, waitedOwed); id != "" {
			r.waitMoved(id, w)
			continue
		}
		if r.proc.dying() {
			r.proc.kill()
			continue
		}
		if r.pendingRecovery {
			r.pendingRecovery = false
			if r.leaseWait(w) {
				continue
			}
		}
		if pending, starting, stable := r.busy(); !stable || len(pending)+len(starting) > 0 {
			continue // a follow-up of an ended drive started one meanwhile
		}
		return
	}
	r.violate(InvSettles, "", fmt.Sprintf("the executions kept moving through %d waits for rest", maxSettlePasses))
}

// busy lists the executions with a drive or an operation open whose log
// leaves them running, and those whose start is in flight (no log yet).
// stable is false when a drive opened while it read the logs: a drive it
// read as ended may have started it (a successor starts before its
// predecessor ends), so the caller looks again.
func (r *run) busy() (pending, starting []string, stable bool) {
	ids := r.proc.track.liveIDs()
	for _, id := range ids {
		switch n, running := r.logNow(id); {
		case n == 0:
			starting = append(starting, id)
		case running:
			pending = append(pending, id)
		}
	}
	return pending, starting, slices.Equal(ids, r.proc.track.liveIDs())
}

// runningNow reports whether id's durable log leaves it running.
func (r *run) runningNow(id string) bool {
	n, running := r.logNow(id)
	return n > 0 && running
}

// logNow returns the length of id's durable log and whether it leaves it
// running.
func (r *run) logNow(id string) (int, bool) {
	ctx, cancel := r.callCtx()
	defer cancel()
	evs, err := r.events.ReadFrom(ctx, id, 0)
	if err != nil || len(evs) == 0 {
		return 0, false
	}
	st := fold.Fold(evs)
	return len(evs), st.Status == fold.StatusRunning || st.Status == fold.StatusPending
}

// waitStarted waits for the operation starting id (its log still empty) to
// end: launched, or refused. False when it does not within the wait's
// bound (a "settles" violation).
func (r *run) waitStarted(id string) bool {
	ctx, cancel := r.callCtx()
	defer cancel()
	if r.proc.track.waitOpsEnded(ctx, id) != nil {
		r.violate(InvSettles, id, "its start did not end within the wait's bound (Simulation.WaitTimeout)")
		return false
	}
	return true
}

// waitSettled waits for id to come to rest: the runtime's wait returns
// (a park, an end, an abort), or every drive and operation of id has
// ended. The second matters: a runtime that no longer remembers why a
// drive of id stopped (a later claim of the id that refused makes it
// forget) would have its wait follow a log nobody writes. False when id
// does not come to rest within the wait's bound (a "settles" violation).
func (r *run) waitSettled(id string) bool {
	ctx, cancel := r.callCtx()
	defer cancel()
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	ended, track := make(chan struct{}), r.proc.track
	go func() {
		defer close(ended)
		if track.waitEnded(waitCtx, id) == nil {
			stop()
		}
	}()
	if !r.proc.isStopped(id) {
		if _, err := r.rt.WaitForSettled(waitCtx, id); err == nil {
			stop() // parked or ended; the log says how
		}
	}
	// Not parked: an abort, a crash, or a runtime that forgot which; the
	// drive's end is the signal.
	<-ended
	if ctx.Err() != nil {
		r.violate(InvSettles, id, "its drive did not come to rest within the wait's bound (Simulation.WaitTimeout)")
		return false
	}
	return true
}

// releaseAborted waits, for each execution whose drive stopped without an
// outcome in this process, until the runtime has let go of it. Its drive
// ends (as the Observer hears it) before the runtime settles the journal
// and releases the claim; until then a recovery pass skips it as driven
// here. Runtime.WaitForCompletion waits for exactly that release, then
// reports the abort. It reports whether it waited for any.
func (r *run) releaseAborted() bool {
	ids, gens := r.proc.track.takeAborted()
	for i, id := range ids {
		if r.proc.isStopped(id) || !r.runningNow(id) {
			continue
		}
		ctx, cancel := r.callCtx()
		waitCtx, stop := context.WithCancel(ctx)
		track, gen := r.proc.track, gens[i]
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			// A new claim of the id makes the runtime forget the abort,
			// and its wait would then follow a log nobody writes.
			if track.waitOpened(waitCtx, id, gen) == nil {
				stop()
			}
		}()
		_, _ = r.rt.WaitForCompletion(waitCtx, id) // the abort, once released
		stop()
		<-watched
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			r.violate(InvSettles, id, "the runtime did not let go of an aborted drive within the wait's bound (Simulation.WaitTimeout)")
		}
	}
	return len(ids) > 0
}

// owedWake returns a parent parked on a child that has ended, which the
// kernel owes an answer (its supervisor answers it right after the child's
// drive), unless a settle already waited for that one at this length.
func (r *run) owedWake(w world, waited map[string]int64) string {
	for _, x := range w.execs {
		if x.parkedOn() != gateChild || r.proc.isStopped(x.ID) {
			continue
		}
		child, ok := w.get(x.State.Variables.SuspendedOn.CorrelationKey)
		if !ok || !child.State.Status.Terminal() || child.State.Status == fold.StatusContinued {
			continue
		}
		if n, seen := waited[x.ID]; seen && n == x.Len {
			continue
		}
		waited[x.ID] = x.Len
		return x.ID
	}
	return ""
}

// waitMoved waits, for at most owedWakeWait, until id's log grows.
func (r *run) waitMoved(id string, w world) {
	x, _ := w.get(id)
	timer := time.NewTimer(owedWakeWait)
	defer timer.Stop()
	for {
		woken := r.proc.wake.Wait(id)
		if r.lenOf(id) > x.Len {
			return
		}
		select {
		case <-woken:
		case <-timer.C:
			return
		}
	}
}
