package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// DefaultListLimit is the page size ListExecutions uses when limit <= 0.
const DefaultListLimit = 1000

// Interface checks: the EventStore implements every EventStore capability.
var (
	_ store.EventStore       = (*EventStore)(nil)
	_ store.RangeReader      = (*EventStore)(nil)
	_ store.Subscriber       = (*EventStore)(nil)
	_ store.PrefixCopier     = (*EventStore)(nil)
	_ store.ExecutionDeleter = (*EventStore)(nil)
	_ store.Fencer           = (*EventStore)(nil)
	_ store.StatusIndex      = (*EventStore)(nil)
)

// Option configures an EventStore.
type Option func(*options)

// options holds what an Option may change.
type options struct {
	limits event.Limits
}

// defaultOptions is the one default set: limits is the zero event.Limits,
// which caps payloads and metadata at event.DefaultMaxPayloadBytes (16 MiB).
var defaultOptions = options{}

// WithLimits sets the envelope limits Append enforces through
// store.ValidateAppend. A zero field keeps its default.
func WithLimits(l event.Limits) Option {
	return func(o *options) { o.limits = l }
}

// execLog is one execution's log. Stored envelopes are never mutated after
// they are appended, so CopyPrefix may share their payload and metadata.
type execLog struct {
	workflowID string
	events     []event.Envelope // indexed by sequence
	// trimmed is the trim point (TrimThrough): the slots 1..trimmed hold
	// zero envelopes, skipped by reads. 0 when nothing was trimmed.
	trimmed int64
	// entry is the log's store.ExecutionCatalog entry, when cataloged
	// (every log but an inbox stream's).
	entry     store.CatalogEntry
	cataloged bool
}

// inTrimmed says sequence seq was trimmed from log.
func (l *execLog) inTrimmed(seq int64) bool { return seq >= 1 && seq <= l.trimmed }

// EventStore is the in-memory store.EventStore. Its zero value is not usable;
// build one with NewEventStore. It is safe for concurrent use.
type EventStore struct {
	limits event.Limits
	wake   store.Broadcaster
	closed atomic.Bool // set under mu; read without it for a fast refusal

	mu     sync.RWMutex
	logs   map[string]*execLog
	index  executionIndex
	status statusIndex      // the unfinished executions, changed with their logs
	cat    catalogIndex     // every execution's catalog entry, in search order
	fences map[string]int64 // current fence token per execution; survives DeleteExecution
}

// NewEventStore returns an empty in-memory event store configured by opts
// (see defaultOptions for the defaults).
func NewEventStore(opts ...Option) *EventStore {
	o := defaultOptions
	for _, opt := range opts {
		opt(&o)
	}
	return &EventStore{
		limits: o.limits,
		logs:   make(map[string]*execLog),
		status: newStatusIndex(),
		fences: make(map[string]int64),
	}
}

// Append writes events to executionID iff its log holds exactly expected
// events. It calls store.ValidateAppend first and applies the batch
// atomically: on *store.InvalidAppendError or *store.SequenceConflictError
// nothing is written. The envelopes are copied, so the caller may reuse them.
// Followers are woken once the batch is applied. The status index
// (ListUnfinished) changes with the log, under the same lock, so no reader
// sees one without the other. A done ctx or a closed store
// (store.ErrClosed) refuses the call before anything is written.
func (s *EventStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return s.appendChecked(ctx, executionID, expected, events, nil)
}

// appendChecked is Append with an optional extra check run under the write
// lock before the sequence check (the fence of AppendFenced).
func (s *EventStore) appendChecked(ctx context.Context, executionID string, expected int64,
	events []event.Envelope, check func() error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := store.ValidateAppend(executionID, expected, events, s.limits); err != nil {
		return err
	}
	stored := make([]event.Envelope, len(events))
	for i, e := range events {
		stored[i] = cloneEnvelope(e)
	}
	var change store.StatusChange // Kept: inbox streams are not indexed
	if !store.IsInboxStream(executionID) {
		change = store.StatusChangeOf(expected, stored)
	}

	if err := s.apply(executionID, expected, stored, change, check); err != nil {
		return err
	}
	s.wake.Notify(executionID)
	return nil
}

// apply appends stored, already validated and copied, under the write lock
// iff check passes and the log holds exactly expected events, and applies
// change to the status index with it.
func (s *EventStore) apply(executionID string, expected int64, stored []event.Envelope, change store.StatusChange, check func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	log := s.logs[executionID]
	var length int64
	if log != nil {
		length = int64(len(log.events))
	}
	if length != expected {
		return &store.SequenceConflictError{ExecutionID: executionID, Expected: expected, Actual: length}
	}
	if log == nil {
		log = &execLog{}
		s.logs[executionID] = log
		s.index.add(executionID)
	}
	if log.workflowID == "" {
		log.workflowID = firstWorkflowID(stored)
	}
	log.events = append(log.events, stored...)
	if !store.IsInboxStream(executionID) {
		s.status.apply(executionID, log, change, length == 0, s.logs)
		s.catalog(executionID, log, store.CatalogChangeOf(stored), length == 0)
	}
	return nil
}

// ReadFrom returns copies of the events of executionID with sequence >=
// from, in order. An unknown execution (or any from past the end) yields no
// events and no error; a negative from reads from 0.
func (s *EventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	return s.readRange(ctx, executionID, from, -1)
}

// ReadRange returns copies of the events with from <= sequence < to, in
// order; an empty or inverted range, or an unknown execution, yields none.
func (s *EventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if to < 0 {
		to = 0
	}
	return s.readRange(ctx, executionID, from, to)
}

// readRange reads [from, to), or [from, end) when to is -1.
func (s *EventStore) readRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	log := s.logs[executionID]
	if log == nil {
		return nil, nil
	}
	n := int64(len(log.events))
	if to < 0 || to > n {
		to = n
	}
	if from < 0 {
		from = 0
	}
	if from >= to {
		return nil, nil
	}
	out := make([]event.Envelope, 0, to-from)
	for i, e := range log.events[from:to] {
		if !log.inTrimmed(from + int64(i)) {
			out = append(out, cloneEnvelope(e))
		}
	}
	return out, nil
}

// Close marks the store closed, drops its contents and ends every open
// subscription (their Err reports store.ErrClosed). The first Close returns
// nil; a later one returns store.ErrClosed.
func (s *EventStore) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed.Store(true)
	s.logs = nil
	s.index = executionIndex{}
	s.status = statusIndex{}
	s.fences = nil
	s.mu.Unlock()
	s.wake.NotifyAll()
	return nil
}

// usable refuses a call on a closed store or with a done context.
func (s *EventStore) usable(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// firstWorkflowID returns the first non-empty workflow id of a batch.
func firstWorkflowID(events []event.Envelope) string {
	for _, e := range events {
		if e.WorkflowID != "" {
			return e.WorkflowID
		}
	}
	return ""
}

// cloneEnvelope deep-copies the byte slices and the metadata map of e, so
// neither the caller nor the store can change the other's copy.
func cloneEnvelope(e event.Envelope) event.Envelope {
	e.Payload = cloneRaw(e.Payload)
	if e.Metadata != nil {
		md := make(map[string]json.RawMessage, len(e.Metadata))
		for k, v := range e.Metadata {
			md[k] = cloneRaw(v)
		}
		e.Metadata = md
	}
	return e
}

// cloneRaw copies b, keeping nil as nil.
func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}
