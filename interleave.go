package loom

import (
	"slices"
	"sync"
)

// Interleaver chooses the order in which the branches of a drive's
// Parallel blocks run, for simulation testing (package dst draws it from
// its seed). With Config.Interleaver set, the branches of one drive run
// one at a time: each goes on to its next syscall (a step, a decision, a
// suspend, a nested Parallel) and Next then chooses which runnable branch
// goes on. Without one, branches are goroutines the Go scheduler
// interleaves.
//
// A correct flow's outcome never depends on the choice, since replay
// serves steps by id; what does is the order its log records things in,
// which a seeded simulation wants to choose, vary and replay exactly.
// An effect runs with the turn held, so one that waits for a sibling's
// effect never ends: flows must not do that anyway (loomvet flags the
// channels and goroutines it would take).
type Interleaver interface {
	// Next returns the index in runnable of the branch that runs next.
	// runnable holds the branch paths of the execution's runnable branches
	// ("0", "1", "1.0", …; "" is the flow's root, waiting on a finished
	// block), sorted, at least two.
	Next(executionID string, runnable []string) int
}

// turns is a drive's turn under an Interleaver: one branch holds it, the
// others wait for it on a channel each.
type turns struct {
	il   Interleaver
	exec string

	mu      sync.Mutex
	held    bool
	waiting map[string]chan struct{} // runnable branches, by path
	// blocked holds the branches waiting on a Parallel block of their own:
	// how many of its branches are still alive, and the channel the last
	// one's end makes runnable.
	blocked map[string]*blockedOn
}

type blockedOn struct {
	alive int
	wake  chan struct{}
}

func newTurns(il Interleaver, exec string) *turns {
	return &turns{il: il, exec: exec, waiting: map[string]chan struct{}{}, blocked: map[string]*blockedOn{}}
}

// fork is called by the holder (path parent) at a Parallel block of n
// branches, before it starts them: it blocks the parent on them, makes
// them runnable and passes the turn. The returned channels are what each
// branch waits on before it runs, and what the parent waits on once they
// have all ended.
func (t *turns) fork(parent string, branches []string) (start []chan struct{}, resume chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = true // a drive's first block: its root takes the turn
	start = make([]chan struct{}, len(branches))
	for i, b := range branches {
		start[i] = make(chan struct{})
		t.waiting[b] = start[i]
	}
	resume = make(chan struct{})
	t.blocked[parent] = &blockedOn{alive: len(branches), wake: resume}
	t.passLocked()
	return start, resume
}

// exit is called by a branch (path b, of the block of parent) as it ends,
// holding the turn: the last branch of a block makes its parent runnable.
func (t *turns) exit(parent string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bo := t.blocked[parent]; bo != nil {
		if bo.alive--; bo.alive == 0 {
			delete(t.blocked, parent)
			t.waiting[parent] = bo.wake
		}
	}
	t.passLocked()
}

// yield is called by the holder (path b) at a syscall: it stays runnable,
// and Next chooses who goes on.
func (t *turns) yield(b string) {
	t.mu.Lock()
	if !t.held || len(t.waiting) == 0 {
		t.mu.Unlock()
		return // alone: nothing to choose
	}
	me := make(chan struct{})
	t.waiting[b] = me
	t.passLocked()
	t.mu.Unlock()
	<-me
}

// passLocked hands the turn to the runnable branch Next chooses, or frees
// it when none is.
func (t *turns) passLocked() {
	if len(t.waiting) == 0 {
		t.held = false
		return
	}
	ids := make([]string, 0, len(t.waiting))
	for id := range t.waiting { //loom:order-independent sorted next
		ids = append(ids, id)
	}
	slices.Sort(ids)
	i := 0
	if len(ids) > 1 {
		i = min(max(t.il.Next(t.exec, ids), 0), len(ids)-1)
	}
	ch := t.waiting[ids[i]]
	delete(t.waiting, ids[i])
	t.held = true
	close(ch)
}
