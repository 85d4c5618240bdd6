// Package journal is the sole sequencer and writer of one live execution:
// Commit allocates the next sequence, folds the event synchronously and
// queues its durable append on an ordered tail; Barrier waits until
// everything committed so far is durable. A failed append is sticky: every
// later Commit and Barrier reports it as *Error, and nothing after the
// failed batch is written. No lock is held during store I/O.
//
// A Journal is configured once, by New's options; nothing is set on it
// afterwards.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/planted"
	"github.com/loom-kernel/loom/store"
)

// Error reports that a durable append failed. The drive that owned the
// journal is aborted at its next barrier; the log holds everything before
// Sequence.
type Error struct {
	ExecutionID string
	Sequence    int64
	Err         error
}

func (e *Error) Error() string {
	return "loom: journal of " + strconv.Quote(e.ExecutionID) + " failed at sequence " +
		strconv.FormatInt(e.Sequence, 10) + ": " + e.Err.Error()
}

// Unwrap exposes the store's error.
func (e *Error) Unwrap() error { return e.Err }

// ErrSealed refuses a commit after the journal's terminal event.
var ErrSealed = errors.New("loom: execution already ended in this run")

// ErrNotContiguous is the failure of an append whose batch does not start
// at the next durable sequence or skips one: a bug, never a store fault,
// so it is checked on every batch.
var ErrNotContiguous = errors.New("loom: journal batch is not contiguous with the durable log")

// Option configures New.
type Option func(*Journal)

// WithClock stamps envelopes with now() in epoch milliseconds (default: 0,
// which only tests want).
func WithClock(now func() int64) Option { return func(j *Journal) { j.now = now } }

// WithIDs mints envelope ids (default: "<executionId>:<sequence>").
func WithIDs(newID func() string) Option {
	return func(j *Journal) { j.newID = func(int64) string { return newID() } }
}

// WithFence makes every append conditional on token still being the
// execution's newest fencing token: a driver another one took over from is
// refused by the store (K9.4). A nil fencer leaves appends unfenced.
func WithFence(f store.Fencer, token int64) Option {
	return func(j *Journal) { j.fencer, j.token = f, token }
}

// WithMeta stamps meta on every event (a simulation's marker); per-commit
// metadata is merged over it.
func WithMeta(meta map[string]json.RawMessage) Option { return func(j *Journal) { j.meta = meta } }

// WithFirstMeta stamps meta on the journal's first commit only (the trace
// context of the operation that opened it), merged under that commit's own.
func WithFirstMeta(meta map[string]json.RawMessage) Option {
	return func(j *Journal) { j.firstMeta = meta }
}

// WithSnapshots checkpoints the state after every every-th event, once that
// event is durable, through save (called off the journal's lock). A newer
// checkpoint replaces one still pending, so a slow snapshot store costs
// checkpoints, never memory or log throughput. every <= 0 disables it.
func WithSnapshots(every int64, save func(fold.State)) Option {
	return func(j *Journal) {
		if every > 0 && save != nil {
			j.snapshotEvery, j.saveSnapshot = every, save
		}
	}
}

// WithHooks reports events: onCommit synchronously at each commit, in
// commit order, off the journal's lock (a slow hook delays the committer,
// never the durable tail); onDurable with each batch once the store holds
// it, on the tail's goroutine, so it must hand the batch off and return.
// A nil hook is skipped; a panicking one is recovered and reported to
// onPanic.
func WithHooks(onCommit func(event.Envelope), onDurable func([]event.Envelope), onPanic func(hook string, v any)) Option {
	return func(j *Journal) { j.onCommit, j.onDurable, j.onPanic = onCommit, onDurable, onPanic }
}

// WithAppendObserver brackets every durable append batch: begin is called
// before the store write with the batch's size, and the func it returns
// with the write's error.
func WithAppendObserver(begin func(events int) func(error)) Option {
	return func(j *Journal) { j.observeAppend = begin }
}

// Journal is one live execution's writer. Build it with New.
type Journal struct {
	store       store.EventStore
	executionID string
	workflowID  string
	now         func() int64
	newID       func(seq int64) string
	meta        map[string]json.RawMessage
	firstMeta   map[string]json.RawMessage // merged into the first commit, then dropped
	fencer      store.Fencer
	token       int64

	snapshotEvery int64
	saveSnapshot  func(fold.State)

	onCommit      func(event.Envelope)
	onDurable     func([]event.Envelope)
	onPanic       func(hook string, v any)
	observeAppend func(events int) func(error)
	// hookMu orders onCommit calls as their commits: a committer takes it
	// before mu and calls the hook after releasing mu, so the durable tail
	// (which takes only mu) never waits for a hook.
	hookMu sync.Mutex

	mu     sync.Mutex
	folder *fold.Folder
	next   int64            // next sequence to allocate
	queue  []event.Envelope // committed, not yet handed to the store
	// joins marks the queued events that belong to the CommitAll unit of
	// the event before them; nil while none does.
	joins   []bool
	durable int64 // every sequence < durable is durable
	writing bool
	// snapPending is the newest checkpoint waiting for its sequence to be
	// durable.
	snapPending *fold.State
	saving      bool
	err         error         // a failed write: sticky, ends every barrier
	halted      error         // Halt's reason: refuses commits; queued writes still land
	sealed      bool          // a terminal event was committed: nothing may follow
	changed     chan struct{} // closed and replaced on every durable step or failure
}

// New opens a journal for executionID (of flow workflowID) over st, the
// execution's durable state: the next commit gets sequence st.Sequence+1.
func New(s store.EventStore, executionID, workflowID string, st fold.State, opts ...Option) *Journal {
	j := &Journal{
		store: s, executionID: executionID, workflowID: workflowID,
		folder: fold.NewFolder(st), next: st.Sequence + 1, durable: st.Sequence + 1,
		changed: make(chan struct{}),
	}
	for _, o := range opts {
		o(j)
	}
	if j.now == nil {
		j.now = func() int64 { return 0 }
	}
	if j.newID == nil {
		j.newID = func(seq int64) string { return executionID + ":" + strconv.FormatInt(seq, 10) }
	}
	return j
}

// ExecutionID is the execution this journal writes.
func (j *Journal) ExecutionID() string { return j.executionID }

// Commit appends one event to the in-memory fold and the durable tail and
// returns its envelope. After a write failure it refuses with the failure,
// after a terminal event with ErrSealed; an event that fails
// event.Validate is refused and nothing is allocated.
func (j *Journal) Commit(typ string, payload any, meta map[string]json.RawMessage) (event.Envelope, error) {
	return j.append(typ, payload, meta, false)
}

// CommitTerminal commits an event after which the journal takes no more.
func (j *Journal) CommitTerminal(typ string, payload any, meta map[string]json.RawMessage) (event.Envelope, error) {
	return j.append(typ, payload, meta, true)
}

// Event is one event of a CommitAll group.
type Event struct {
	Type    string
	Payload any
	Meta    map[string]json.RawMessage
}

// CommitAll commits evs as one unit: in order, with consecutive sequences,
// and handed to the store in one append, so a crash or a refused write
// leaves the log with all of them or none (store.EventStore.Append is all
// or nothing). An answer and the resume it wakes are one such unit: a log
// holding the answer alone would have it answered twice. An event that
// fails validation refuses the whole group and allocates nothing.
func (j *Journal) CommitAll(evs []Event) ([]event.Envelope, error) {
	if planted.Active(planted.UnitSplit) {
		return j.commitApart(evs)
	}
	raws := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		raw, err := MarshalPayload(e.Payload)
		if err != nil {
			return nil, err
		}
		raws[i] = raw
	}
	if j.onCommit != nil {
		j.hookMu.Lock()
		defer j.hookMu.Unlock()
	}
	j.mu.Lock()
	if err := j.admitLocked(); err != nil {
		j.mu.Unlock()
		return nil, err
	}
	out := make([]event.Envelope, len(evs))
	for i, e := range evs {
		env, err := j.envelopeLocked(e.Type, raws[i], e.Meta, j.next+int64(i))
		if err != nil {
			j.mu.Unlock()
			return nil, err
		}
		out[i] = env
	}
	for i, e := range out {
		j.applyLocked(e, false, i > 0)
	}
	j.mu.Unlock()
	if j.onCommit != nil {
		for _, e := range out {
			j.callHook("OnEvent", func() { j.onCommit(e) })
		}
	}
	return out, nil
}

// commitApart is CommitAll under the planted UnitSplit fault: one commit
// per event, each waiting for its own append.
func (j *Journal) commitApart(evs []Event) ([]event.Envelope, error) {
	var out []event.Envelope
	for _, e := range evs {
		env, err := j.Commit(e.Type, e.Payload, e.Meta)
		if err != nil {
			return out, err
		}
		if err := j.Barrier(context.Background()); err != nil {
			return out, err
		}
		out = append(out, env)
	}
	return out, nil
}

func (j *Journal) append(typ string, payload any, meta map[string]json.RawMessage, terminal bool) (event.Envelope, error) {
	raw, err := MarshalPayload(payload)
	if err != nil {
		return event.Envelope{}, err
	}
	if j.onCommit == nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.appendLocked(typ, raw, meta, terminal)
	}
	j.hookMu.Lock()
	defer j.hookMu.Unlock()
	j.mu.Lock()
	e, err := j.appendLocked(typ, raw, meta, terminal)
	j.mu.Unlock()
	if err == nil {
		j.callHook("OnEvent", func() { j.onCommit(e) })
	}
	return e, err
}

// callHook runs an app hook, turning its panic into a report.
func (j *Journal) callHook(name string, f func()) {
	defer func() {
		if p := recover(); p != nil && j.onPanic != nil {
			j.onPanic(name, p)
		}
	}()
	f()
}

func (j *Journal) appendLocked(typ string, raw json.RawMessage, meta map[string]json.RawMessage, terminal bool) (event.Envelope, error) {
	if err := j.admitLocked(); err != nil {
		return event.Envelope{}, err
	}
	e, err := j.envelopeLocked(typ, raw, meta, j.next)
	if err != nil {
		return event.Envelope{}, err
	}
	j.applyLocked(e, terminal, false)
	return e, nil
}

// admitLocked refuses a commit after a write failure, a Halt or the
// terminal event.
func (j *Journal) admitLocked() error {
	switch {
	case j.err != nil:
		return j.err
	case j.halted != nil:
		return j.halted
	case j.sealed:
		return ErrSealed
	}
	return nil
}

// envelopeLocked builds and validates the envelope of an event at seq,
// changing nothing of the journal but the ids it mints.
func (j *Journal) envelopeLocked(typ string, raw json.RawMessage, meta map[string]json.RawMessage, seq int64) (event.Envelope, error) {
	if len(j.meta) > 0 || len(j.firstMeta) > 0 {
		merged := make(map[string]json.RawMessage, len(j.meta)+len(j.firstMeta)+len(meta))
		for k, v := range j.meta { //loom:order-independent map into map
			merged[k] = v
		}
		if seq == j.next {
			for k, v := range j.firstMeta { //loom:order-independent map into map
				merged[k] = v
			}
		}
		for k, v := range meta { //loom:order-independent map into map
			merged[k] = v
		}
		meta = merged
	}
	e := event.Envelope{ID: j.newID(seq), WorkflowID: j.workflowID, ExecutionID: j.executionID,
		Type: typ, Sequence: seq, Timestamp: j.now(), Payload: raw, Metadata: meta}
	if err := event.Validate(e, event.Limits{}); err != nil {
		return event.Envelope{}, err
	}
	if err := event.ValidateExact("payload", e.Payload); err != nil {
		return event.Envelope{}, err
	}
	return e, nil
}

// applyLocked folds e, queues it for the durable tail and starts the tail;
// joins says e belongs to the CommitAll unit of the event before it.
func (j *Journal) applyLocked(e event.Envelope, terminal, joins bool) {
	j.sealed = terminal
	j.firstMeta = nil
	j.next++
	j.folder.Apply(e)
	if joins && j.joins == nil {
		j.joins = make([]bool, len(j.queue))
	}
	if j.joins != nil {
		j.joins = append(j.joins, joins)
	}
	j.queue = append(j.queue, e)
	if j.snapshotEvery > 0 && (e.Sequence+1)%j.snapshotEvery == 0 {
		st := j.folder.State()
		j.snapPending = &st
	}
	if !j.writing {
		j.writing = true
		go j.drain()
	}
}

// drain writes the queue in order, batch by batch, until it is empty.
func (j *Journal) drain() {
	for {
		j.mu.Lock()
		batch, joins := j.queue, j.joins
		j.queue, j.joins = nil, nil
		if len(batch) == 0 {
			j.writing = false
			j.notifyLocked()
			j.mu.Unlock()
			return
		}
		from := j.durable
		j.mu.Unlock()
		err := contiguous(batch, from)
		var observed func(error)
		if err == nil && j.observeAppend != nil {
			observed = j.observeAppend(len(batch))
		}
		ctx := context.Background()
		if joins != nil {
			ctx = context.WithValue(ctx, unitsKey{}, joins)
		}
		if err == nil && j.fencer != nil {
			err = j.fencer.AppendFenced(ctx, j.executionID, j.token, batch[0].Sequence, batch)
		} else if err == nil {
			err = j.store.Append(ctx, j.executionID, batch[0].Sequence, batch)
		}
		if observed != nil {
			observed(err)
		}
		if err == nil && j.onDurable != nil {
			j.callHook("OnDurableEvent", func() { j.onDurable(batch) })
		}
		j.mu.Lock()
		if err != nil {
			j.err = &Error{ExecutionID: j.executionID, Sequence: batch[0].Sequence, Err: err}
			j.queue, j.joins = nil, nil
			j.writing = false
		} else {
			j.durable = batch[len(batch)-1].Sequence + 1
		}
		j.startSaveLocked()
		j.notifyLocked()
		j.mu.Unlock()
		if err != nil {
			return
		}
	}
}

type unitsKey struct{}

// Joins reports, for the context of a batch the journal hands its store,
// whether batch[i] belongs to the same CommitAll unit as batch[i-1]. The
// journal never splits a unit across two appends, and a batch is one
// append because the store writes it all or nothing; a fault-injecting
// store modelling a crash part-way through the journal's work (package
// dst) may cut a batch only where joins is false, the cuts a different
// batching could have made. Without the context's value no event joins
// another.
func Joins(ctx context.Context, i int) bool {
	joins, _ := ctx.Value(unitsKey{}).([]bool)
	return i < len(joins) && joins[i]
}

// contiguous checks that batch starts at from and has no gap.
func contiguous(batch []event.Envelope, from int64) error {
	for i, e := range batch {
		if e.Sequence != from+int64(i) {
			return ErrNotContiguous
		}
	}
	return nil
}

func (j *Journal) notifyLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// startSaveLocked hands a checkpoint whose sequence is durable to the saver
// goroutine, off the write path.
func (j *Journal) startSaveLocked() {
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
		j.notifyLocked()
		j.mu.Unlock()
	}(*p)
}

// Halt refuses every later commit with err; what is already queued is
// still written. Used when the runtime closes or the lease is lost: the
// execution stays as its log has it.
func (j *Journal) Halt(err error) {
	j.mu.Lock()
	if j.halted == nil {
		j.halted = err
	}
	j.mu.Unlock()
}

// Ended reports whether a terminal event was committed, the journal
// failed, or it was halted.
func (j *Journal) Ended() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sealed || j.err != nil || j.halted != nil
}

// Err returns the journal's sticky failure or halt, if any.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	return j.halted
}

// Barrier waits until every event committed before the call is durable. It
// reports a failure only for events that did not become durable: a halt
// does not cut it short, since what was queued is still written.
func (j *Journal) Barrier(ctx context.Context) error {
	j.mu.Lock()
	if planted.Active(planted.BarrierEarly) {
		defer j.mu.Unlock()
		return j.err
	}
	target := j.next
	return j.waitLocked(ctx, func() (bool, error) {
		if j.durable >= target {
			return true, nil
		}
		return j.err != nil, j.err
	})
}

// Settle waits until the tail has nothing left to write (all durable, or
// the write failed) and no checkpoint is being saved, so no store write
// outlives the drive that queued it.
func (j *Journal) Settle() {
	j.mu.Lock()
	_ = j.waitLocked(context.Background(), func() (bool, error) { return !j.writing && !j.saving, nil })
}

// waitLocked is called with j.mu held and returns with it released; it
// waits for done to report true, re-checking after every tail step.
func (j *Journal) waitLocked(ctx context.Context, done func() (bool, error)) error {
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

// Read runs f on the current folded state under the journal's lock; f must
// not retain the state.
func (j *Journal) Read(f func(s *fold.State)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j.folder.Peek())
}

// State returns a frozen copy-on-write view of the folded state.
func (j *Journal) State() fold.State {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.folder.State()
}

// MarshalPayload renders a commit's payload: nil is no payload, a
// json.RawMessage is taken as it is, anything else is encoded.
func MarshalPayload(p any) (json.RawMessage, error) {
	switch v := p.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(p)
}
