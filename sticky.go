package loom

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"runtime"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Sticky parks. A flow that parks at a gate from its root goroutine (no
// Parallel branch alive) is kept in memory, blocked inside Suspend, for as
// long as it stays among the Config.StickyParks most recent parks. A Resume
// in this process then answers it in place: the gate rules run against the
// live state, the answer is made durable through the same journal, and the
// flow simply goes on — no snapshot load, no replay. Evicted (by newer parks,
// a log that moved under it, a ResumeAs, a Close), it unwinds exactly like a
// plain park, and the next resume replays from the log: the two paths are
// observably the same.

// stickyPark is a flow blocked in Suspend, waiting for its answer.
type stickyPark struct {
	r    *drive
	wake chan bool // true: answered, go on; false: evicted, unwind
	elem *list.Element
}

// defaultStickyParks bounds the parked flows kept in memory.
const defaultStickyParks = 256

func (rt *Runtime) stickyCap() int {
	switch {
	case rt.cfg.StickyParks < 0:
		return 0
	case rt.cfg.StickyParks == 0:
		return defaultStickyParks
	}
	return rt.cfg.StickyParks
}

// registerSticky makes r's park answerable in place, evicting the oldest
// park beyond the bound.
func (rt *Runtime) registerSticky(r *drive) *stickyPark {
	sp := &stickyPark{r: r, wake: make(chan bool, 1)}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sticky == nil {
		rt.sticky = map[string]*stickyPark{}
		rt.stickyOrder = list.New()
	}
	sp.elem = rt.stickyOrder.PushBack(r.x.id)
	rt.sticky[r.x.id] = sp
	rt.changedLocked()
	for rt.stickyOrder.Len() > rt.stickyCap() {
		oldest := rt.stickyOrder.Front()
		victim := rt.sticky[oldest.Value.(string)]
		rt.dropStickyLocked(victim)
		// Stopped before it is woken: until it has unwound, a Resume or a
		// Cancel waits for its drive to end instead of refusing it as running.
		victim.r.root.stop.Store(true)
		victim.wake <- false
	}
	return sp
}

// takeSticky removes and returns the sticky park of id, if any: whoever
// takes it is the only one who may wake it.
func (rt *Runtime) takeSticky(id string) *stickyPark {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	sp := rt.sticky[id]
	if sp != nil {
		rt.dropStickyLocked(sp)
	}
	return sp
}

func (rt *Runtime) dropStickyLocked(sp *stickyPark) {
	rt.stickyOrder.Remove(sp.elem)
	delete(rt.sticky, sp.r.x.id)
	rt.changedLocked()
}

// evictSticky unwinds the sticky park of id, if any, and waits for its
// drive to end.
func (rt *Runtime) evictSticky(ctx context.Context, id string) error {
	sp := rt.takeSticky(id)
	if sp == nil {
		return nil
	}
	sp.wake <- false
	select {
	case <-sp.r.x.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parkSticky records the park like park does, then blocks until a Resume
// (or a message delivery) answers it in place — the answer is then in the
// folded state — or it is evicted, and unwinds.
func (r *drive) parkSticky(p suspendPayload) {
	if r.verifying() {
		r.reach(frontier{kind: frontierPark, park: p})
	}
	r.mu.Lock()
	if r.parked || r.cancelled || r.abortErr != nil {
		r.mu.Unlock()
		r.root.stop.Store(true)
		runtime.Goexit()
	}
	r.parked = true
	r.mu.Unlock()
	sp := r.rt.registerSticky(r)
	r.armTimer(p)
	r.commit(event.ExecutionSuspended, p, nil)
	r.barrier()
	r.rt.releaseParkedLease(sp) // parked: any node may resume it
	st := r.j.State()
	r.rt.saveSnapshot(r.x.id, st)
	r.snapshotAt = st.Sequence
	// A message sent between the flow's look at its inbox and this park
	// found nobody parked: deliver it now. Only a select park waits on the
	// inbox; any other stays registered, so a Resume that saw the durable
	// park always finds it (taken out, it was refused as running).
	// A child that ended before this park is answered now, the same way.
	// A Send or a child's end while this look holds the park out of the
	// registry finds nothing to wake, so after putting the park back it
	// looks once more: whichever side comes second sees the other.
	var look answerLook
	switch p.On {
	case gateSelect:
		look = r.rt.messageAnswer
	case gateChild:
		look = r.rt.childAnswer
	}
	for look != nil && r.rt.takeStickyIf(sp) {
		if r.answerOwnParkHere(st, look) {
			r.unpark()
			return
		}
		r.rt.reregisterSticky(sp)
		if evs, err := look(r.ctx, r.x.id, st); err != nil || evs == nil {
			break
		}
	}
	var answered bool
	select {
	case answered = <-sp.wake:
	case <-r.ctx.Done():
	}
	if !answered {
		r.rt.takeSticky(r.x.id)
		r.root.stop.Store(true)
		runtime.Goexit()
	}
	r.unpark()
}

// unpark clears the drive's park once it was answered in place, and wakes
// whoever waits for the park to settle.
func (r *drive) unpark() {
	r.mu.Lock()
	r.parked = false
	r.mu.Unlock()
	r.rt.mu.Lock()
	r.rt.changedLocked()
	r.rt.mu.Unlock()
}

// resumeSticky answers a sticky park in place. handled is false when there
// is none (or it had to be evicted), and the caller takes the replay path.
func (rt *Runtime) resumeSticky(ctx context.Context, id string, ev ResumeEvent, principal json.RawMessage, simulate bool) (handled bool, err error) {
	sp := rt.takeSticky(id)
	if sp == nil {
		return false, nil
	}
	r := sp.r
	evict := func() (bool, error) {
		sp.wake <- false
		select {
		case <-r.x.done:
			return false, nil
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	if err := r.j.Barrier(ctx); err != nil || simulate && !r.simulate {
		return evict()
	}
	if err := rt.acquireLease(ctx, id); err != nil {
		return evict() // another node holds it: the store decides, not this memory
	}
	st := r.j.State()
	// Another process may have written to the log since this park.
	if tail, err := rt.cfg.Events.ReadFrom(ctx, id, st.Sequence+1); err != nil || len(tail) > 0 {
		return evict()
	}
	ans, err := rt.admit(id, st, r.flow, ev)
	if err != nil {
		rt.reregisterSticky(sp) // refused: the park stays as it was
		return true, err
	}
	if err := commitAdmitted(r.j, ans, principal); err != nil {
		return evict()
	}
	if err := r.j.Barrier(ctx); err != nil {
		sp.wake <- false
		return true, err
	}
	rt.afterAnswer(ctx, id, st, ev)
	sp.wake <- true
	return true, nil
}

// takeStickyIf takes sp out of the registry if it is still there.
func (rt *Runtime) takeStickyIf(sp *stickyPark) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sticky[sp.r.x.id] != sp {
		return false
	}
	rt.dropStickyLocked(sp)
	return true
}

// reregisterSticky puts back a park a refused resume took.
func (rt *Runtime) reregisterSticky(sp *stickyPark) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	sp.elem = rt.stickyOrder.PushBack(sp.r.x.id)
	rt.sticky[sp.r.x.id] = sp
	rt.changedLocked()
}

// changedLocked wakes callers waiting for a claimed execution to move on:
// a sticky park registered, taken or put back, a drive launched, a park
// answered in place. Called with rt.mu held, after the change.
func (rt *Runtime) changedLocked() {
	if rt.changed != nil {
		close(rt.changed)
	}
	rt.changed = make(chan struct{})
}

// changedChanLocked is closed at the next change; take it under rt.mu
// before looking at what may change.
func (rt *Runtime) changedChanLocked() <-chan struct{} {
	if rt.changed == nil {
		rt.changed = make(chan struct{})
	}
	return rt.changed
}

// awaitStickyPark waits while this process's run of id may be about to
// park in place: its park is committed but its sticky entry is out of the
// registry (being registered, or checked for a pending message, or answered
// by a concurrent resume), or the execution is claimed with no drive yet (a
// start or a gate transaction under way, whose drive may park sticky and
// then hold the claim until it is answered). It waits on the runtime's
// change signal, never on a clock. It reports whether it waited; the caller
// then looks again.
func (rt *Runtime) awaitStickyPark(ctx context.Context, id string) bool {
	rt.mu.Lock()
	x := rt.live[id]
	_, registered := rt.sticky[id]
	changed := rt.changedChanLocked()
	var r *drive
	if x != nil {
		r = x.drive
	}
	rt.mu.Unlock()
	if x == nil || registered || r != nil && (r.stopped() || !r.isParked()) {
		return false
	}
	var runDone <-chan struct{}
	if r != nil {
		runDone = r.ctx.Done()
	}
	select {
	case <-changed:
	case <-x.done:
	case <-runDone:
	case <-ctx.Done():
		return false
	}
	return true
}

// answerLook finds the events that answer the park of st (an arrived
// message, an ended child); nil while nothing does.
type answerLook func(ctx context.Context, id string, st fold.State) ([]pendingEvent, error)

// parkAnswer is what a drive's attempt to answer its own park came to.
type parkAnswer int

const (
	// parkPending: nothing answers the park yet; it goes on.
	parkPending parkAnswer = iota
	// parkAnswered: the answer is durable through the drive's journal.
	parkAnswered
	// parkLost: another node holds the execution's lease, the log moved
	// since the park, or the journal failed; the park must unwind and leave
	// the answer to a transaction, which reads the log as it is.
	parkLost
)

// answerOwnPark answers the drive's sticky park (st, the state it parked
// in) through its own journal with what look finds. It takes the
// execution's lease first, as a resume in place does: the park gave it
// up, and a node that sees the answer takes the execution over in a
// transaction, fencing this journal. Whoever holds the lease answers: held
// here, that node's take-over is refused; held there, this drive leaves
// the answer to it. A log that moved since the park (that node answered,
// drove it and parked it again) makes the park stale. It never unwinds
// the calling goroutine, which may be a sender's or a child's, so the
// caller decides what a lost park does.
func (r *drive) answerOwnPark(ctx context.Context, st fold.State, look answerLook) (parkAnswer, error) {
	evs, err := look(ctx, r.x.id, st)
	if err != nil || evs == nil {
		return parkPending, err
	}
	if err := r.rt.acquireLease(ctx, r.x.id); err != nil {
		return parkLost, nil
	}
	tail, err := r.rt.cfg.Events.ReadFrom(ctx, r.x.id, st.Sequence+1)
	if err != nil || len(tail) > 0 {
		r.rt.releaseLease(r.x.id)
		return parkLost, err
	}
	if err := commitAll(r.j, evs); err != nil {
		return parkLost, err
	}
	if err := r.j.Barrier(context.WithoutCancel(ctx)); err != nil {
		return parkLost, err
	}
	r.rt.afterAnswer(ctx, r.x.id, st, ResumeEvent{}) // not a timer's: the park's timer is moot
	return parkAnswered, nil
}

// answerOwnParkHere is answerOwnPark from the parking goroutine itself,
// which reports whether it answered: a failure aborts the drive, and a
// lost park unwinds it, its drive's end delivering in a transaction.
func (r *drive) answerOwnParkHere(st fold.State, look answerLook) bool {
	a, err := r.answerOwnPark(r.ctx, st, look)
	if err != nil {
		r.abort(err)
	}
	if a == parkLost {
		r.root.stop.Store(true)
		runtime.Goexit()
	}
	return a == parkAnswered
}

// deliverInPlace answers id's sticky park with what look finds when this
// process holds one; it reports whether it dealt with the delivery. A park
// nothing answers yet is put back and looked at once more, since an
// answer arriving while it was out of the registry found nobody to wake;
// a park out of the registry (looking at its own answer) is waited for.
// A park that can no longer answer itself (parkLost, or a journal
// failure) is evicted: its drive unwinds, ending as its log has it, and
// the caller delivers in a transaction. Unlike a park's own look, it never
// unwinds the calling goroutine.
func (rt *Runtime) deliverInPlace(ctx context.Context, id string, look answerLook) bool {
	for {
		sp := rt.takeSticky(id)
		if sp == nil {
			// A park out of the registry while it looks at its own answer
			// (or is being registered): wait for it to be back or gone,
			// rather than be refused as running while its look may have
			// come before this answer.
			if rt.awaitStickyPark(ctx, id) {
				continue
			}
			return false
		}
		switch a, err := sp.r.answerOwnPark(ctx, sp.r.j.State(), look); {
		case err == nil && a == parkAnswered:
			sp.wake <- true
			return true
		case err == nil && a == parkPending:
			rt.reregisterSticky(sp)
			if evs, err := look(ctx, id, sp.r.j.State()); err != nil || evs == nil {
				return true
			}
			continue
		}
		sp.r.root.stop.Store(true) // as an eviction: stopped before it is woken
		sp.wake <- false
		select {
		case <-sp.r.x.done:
			return false
		case <-ctx.Done():
			return true
		}
	}
}

// errNothingToAnswer ends an answer transaction that found nothing to
// answer the park with.
var errNothingToAnswer = errors.New("loom: nothing answers the park yet")

// answerTx answers id's park in a transaction with what look finds. It
// looks before it takes the execution over, so a park nothing answers yet
// costs no lease write and no fence: a take-over that wrote nothing would
// fence out another node's sticky park that later answers itself under
// its older token, and its drive would abort. It returns
// errNothingToAnswer when nothing answers the park.
func (rt *Runtime) answerTx(ctx context.Context, id, op string, look answerLook) error {
	var evs []pendingEvent
	return rt.transact(ctx, id, txSpec{
		op:  op,
		pin: true,
		admit: func(ctx context.Context, tx *txn) error {
			var err error
			if evs, err = look(ctx, id, tx.state); err == nil && evs == nil {
				err = errNothingToAnswer
			}
			return err
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			return true, commitAll(tx.j, evs)
		},
		durable: func(ctx context.Context, tx *txn) {
			rt.afterAnswer(ctx, id, tx.state, ResumeEvent{}) // not a timer's: the park's timer is moot
		},
	})
}
