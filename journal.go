package loom

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// journal is the sole sequence allocator and the only appender of one live
// execution (architecture §4.2, D3). commit allocates the next sequence,
// folds the event synchronously and queues its durable append on an ordered
// tail; barrier waits until everything committed so far is durable. A failed
// append is sticky: the run aborts at its next barrier with *JournalError.
type journal struct {
	store       store.EventStore
	executionID string
	workflowID  string
	now         func() int64
	newID       func() string
	// meta is stamped on every event this journal writes (a simulation's
	// marker); per-commit metadata is merged over it.
	meta map[string]json.RawMessage
	// fencer, when the store fences, makes every append conditional on
	// token still being the execution's newest: a driver that another
	// took over from is refused (K9.4).
	fencer store.Fencer
	token  int64
	// snapshotEvery > 0 checkpoints the state after every N-th event, once
	// that event is durable, through saveSnapshot (called off the lock).
	snapshotEvery int64
	saveSnapshot  func(fold.State)

	mu      sync.Mutex
	folder  *fold.Folder
	next    int64            // next sequence to allocate
	queue   []event.Envelope // committed, not yet handed to the store
	durable int64            // every sequence < durable is durable
	writing bool
	// snapPending is the newest checkpoint waiting for its sequence to be
	// durable; a newer one replaces it, so a slow snapshot store costs
	// checkpoints, never memory or log throughput.
	snapPending *fold.State
	saving      bool
	err         error
	sealed      bool          // a terminal event was committed: nothing may follow
	changed     chan struct{} // closed and replaced on every durable step or failure
}

func newJournal(s store.EventStore, executionID, workflowID string, st fold.State,
	now func() int64, newID func() string) *journal {
	return &journal{
		store: s, executionID: executionID, workflowID: workflowID, now: now, newID: newID,
		folder: fold.NewFolder(st), next: st.Sequence + 1, durable: st.Sequence + 1,
		changed: make(chan struct{}),
	}
}

// errSealed refuses a commit after the run's terminal event.
var errSealed = errors.New("loom: execution already ended in this run")

// commit appends one event to the in-memory fold and the durable tail and
// returns its envelope. After a write failure it refuses with the failure,
// after a terminal event with errSealed.
func (j *journal) commit(typ string, payload any, meta map[string]json.RawMessage) (event.Envelope, error) {
	return j.append(typ, payload, meta, false)
}

// commitTerminal commits an event after which the journal takes no more.
func (j *journal) commitTerminal(typ string, payload any, meta map[string]json.RawMessage) (event.Envelope, error) {
	return j.append(typ, payload, meta, true)
}

func (j *journal) append(typ string, payload any, meta map[string]json.RawMessage, terminal bool) (event.Envelope, error) {
	raw, err := marshalPayload(payload)
	if err != nil {
		return event.Envelope{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return event.Envelope{}, j.err
	}
	if j.sealed {
		return event.Envelope{}, errSealed
	}
	if len(j.meta) > 0 {
		merged := make(map[string]json.RawMessage, len(j.meta)+len(meta))
		for k, v := range j.meta { //loom:order-independent map into map
			merged[k] = v
		}
		for k, v := range meta { //loom:order-independent map into map
			merged[k] = v
		}
		meta = merged
	}
	e := event.Envelope{ID: j.newID(), WorkflowID: j.workflowID, ExecutionID: j.executionID,
		Type: typ, Sequence: j.next, Timestamp: j.now(), Payload: raw, Metadata: meta}
	if err := event.Validate(e, event.Limits{}); err != nil {
		return event.Envelope{}, err
	}
	j.sealed = terminal
	j.next++
	j.folder.Apply(e)
	j.queue = append(j.queue, e)
	if j.snapshotEvery > 0 && (e.Sequence+1)%j.snapshotEvery == 0 {
		st := j.folder.State()
		j.snapPending = &st
	}
	if !j.writing {
		j.writing = true
		go j.drain()
	}
	return e, nil
}

// drain writes the queue in order, batch by batch, until it is empty.
func (j *journal) drain() {
	for {
		j.mu.Lock()
		batch := j.queue
		j.queue = nil
		if len(batch) == 0 {
			j.writing = false
			close(j.changed)
			j.changed = make(chan struct{})
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		var err error
		if j.fencer != nil {
			err = j.fencer.AppendFenced(context.Background(), j.executionID, j.token, batch[0].Sequence, batch)
		} else {
			err = j.store.Append(context.Background(), j.executionID, batch[0].Sequence, batch)
		}
		j.mu.Lock()
		if err != nil {
			j.err = &JournalError{ExecutionID: j.executionID, Sequence: batch[0].Sequence, Err: err}
			j.queue = nil
			j.writing = false
		} else {
			j.durable = batch[len(batch)-1].Sequence + 1
		}
		j.startSaveLocked()
		close(j.changed)
		j.changed = make(chan struct{})
		j.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// startSaveLocked hands a checkpoint whose sequence is durable to the saver
// goroutine, off the write path.
func (j *journal) startSaveLocked() {
	p := j.snapPending
	if p == nil || j.saving || p.Sequence >= j.durable {
		return
	}
	j.snapPending = nil
	j.saving = true
	go func(st fold.State) {
		j.saveSnapshot(st)
		j.mu.Lock()
		j.saving = false
		j.startSaveLocked()
		close(j.changed)
		j.changed = make(chan struct{})
		j.mu.Unlock()
	}(*p)
}

// halt refuses every later commit with err; what is already queued is
// still written. Used when the runtime closes: the execution stays as its
// log has it.
func (j *journal) halt(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
}

// ended reports whether a terminal event was committed or the journal failed.
func (j *journal) ended() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sealed || j.err != nil
}

// barrier waits until every event committed before the call is durable. It
// reports a failure only for events that did not become durable.
func (j *journal) barrier(ctx context.Context) error {
	j.mu.Lock()
	target := j.next
	return j.waitLocked(ctx, func() (bool, error) {
		if j.durable >= target {
			return true, nil
		}
		return j.err != nil, j.err
	})
}

// settle waits until the tail has nothing left to write (all durable, or
// the write failed) and no checkpoint is being saved, so no store write
// outlives the drive that queued it.
func (j *journal) settle() {
	j.mu.Lock()
	_ = j.waitLocked(context.Background(), func() (bool, error) { return !j.writing && !j.saving, nil })
}

// waitLocked is called with j.mu held and returns with it released; it
// waits for done to report true, re-checking after every tail step.
func (j *journal) waitLocked(ctx context.Context, done func() (bool, error)) error {
	for {
		if ok, err := done(); ok {
			j.mu.Unlock()
			return err
		}
		ch := j.changed
		j.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		j.mu.Lock()
	}
}

// read runs f on the current folded state under the journal's lock; f must
// not retain the state.
func (j *journal) read(f func(s *fold.State)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j.folder.Peek())
}

// state returns a frozen copy-on-write view of the folded state.
func (j *journal) state() fold.State {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.folder.State()
}

func marshalPayload(p any) (json.RawMessage, error) {
	switch v := p.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(p)
}
