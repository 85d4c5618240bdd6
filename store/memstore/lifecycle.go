package memstore

import (
	"context"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// CopyPrefix creates execution to holding the events of from with sequence
// <= through, identical except for ExecutionID (ids, types, timestamps,
// payload and metadata bytes are shared, never re-encoded: stored envelopes
// are immutable). It refuses, writing nothing, with *store.InvalidAppendError
// when to is not a valid id, through is negative or from holds fewer than
// through+1 events, and with *store.SequenceConflictError when to already has
// events. Followers of to are woken once the copy is applied. The copy's
// status index entry is that of its prefix (store.StatusChangeOf), set
// under the same lock.
func (s *EventStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := event.ValidateID("executionId", to); err != nil {
		return &store.InvalidAppendError{Index: -1, Reason: "bad target execution id", Err: err}
	}
	if through < 0 {
		return &store.InvalidAppendError{Index: -1, Reason: "negative through sequence"}
	}

	if err := s.copyLocked(from, to, through); err != nil {
		return err
	}
	s.wake.Notify(to)
	return nil
}

// copyLocked performs CopyPrefix's checks and copy under the write lock.
func (s *EventStore) copyLocked(from, to string, through int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	src := s.logs[from]
	if src == nil || int64(len(src.events)) <= through {
		return &store.InvalidAppendError{Index: -1, Reason: "source execution holds fewer than through+1 events"}
	}
	if src.inTrimmed(through) {
		return &store.InvalidAppendError{Index: -1, Reason: "the source's events through #" + strconv.FormatInt(src.trimmed, 10) +
			" were trimmed (compacted): copy through a later sequence"}
	}
	if dst := s.logs[to]; dst != nil && len(dst.events) > 0 {
		return &store.SequenceConflictError{ExecutionID: to, Expected: 0, Actual: int64(len(dst.events))}
	}
	copied := make([]event.Envelope, through+1)
	for i, e := range src.events[:through+1] {
		e.ExecutionID = to
		copied[i] = e
	}
	log := &execLog{workflowID: src.workflowID, events: copied}
	if through > src.trimmed {
		log.trimmed = src.trimmed // a copy of #0 alone holds no trimmed range
	}
	s.logs[to] = log
	s.index.add(to)
	if !store.IsInboxStream(to) {
		s.status.apply(to, log, store.StatusChangeOf(0, copied), true, s.logs)
		s.catalog(to, log, store.CatalogChangeOf(copied), true)
	}
	return nil
}

// DeleteExecution removes every event of executionID; the execution leaves
// the listing and its log is empty again, so an append at sequence 0
// recreates it. Deleting an unknown execution is not an error. The fence of
// the execution is kept, so a driver fenced before the delete stays fenced.
// Its status index entry goes too, and a continued execution whose
// successor it was is listed again.
func (s *EventStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	if _, ok := s.logs[executionID]; ok {
		delete(s.logs, executionID)
		s.index.markDirty()
		s.status.remove(executionID)
		s.status.relist(executionID, true)
		s.cat.dirty = true
	}
	return nil
}

// AcquireFence returns the next fence token of executionID: 1 for the first
// acquisition, then one more than the previous token. From then on
// AppendFenced refuses every older token. An invalid id is refused with the
// *event.InvalidEnvelopeError of event.ValidateID.
func (s *EventStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	s.fences[executionID]++
	return s.fences[executionID], nil
}

// AppendFenced is Append under fence token: after store.ValidateAppend, and
// atomically with the sequence check, it refuses with *store.FencedError when
// a token newer than token has been acquired for executionID. Every refusal
// writes nothing. A token never acquired but not older than the current one
// is accepted, as the Fencer contract only refuses older tokens.
func (s *EventStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	fence := func() error {
		if current := s.fences[executionID]; current > token {
			return &store.FencedError{ExecutionID: executionID, Token: token, Current: current}
		}
		return nil
	}
	return s.appendChecked(ctx, executionID, expected, events, fence)
}

// TrimThrough implements store.PrefixTrimmer: the events 1..through of
// executionID are dropped (their slots emptied), atomically under the
// write lock; the start event and the last one stay (store.ValidateTrim).
func (s *EventStore) TrimThrough(ctx context.Context, executionID string, through int64) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	log := s.logs[executionID]
	var length, trimmed int64
	if log != nil {
		length, trimmed = int64(len(log.events)), log.trimmed
	}
	more, err := store.ValidateTrim(executionID, through, length, trimmed)
	if err != nil || !more {
		return err
	}
	for seq := trimmed + 1; seq <= through; seq++ {
		log.events[seq] = event.Envelope{} // free the payload
	}
	log.trimmed = through
	return nil
}

// TrimmedThrough implements store.PrefixTrimmer.
func (s *EventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	if log := s.logs[executionID]; log != nil {
		return log.trimmed, nil
	}
	return 0, nil
}
