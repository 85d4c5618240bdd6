package crypto

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"reflect"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// InnerEventStore is the store an EventStore wraps: the required SPI and
// every optional capability the runtime type-asserts, as memstore,
// plugins/sqlite and plugins/postgres implement them. The wrapper forwards
// each one, so wrapping never silently turns fencing, the status index or
// subscriptions off.
type InnerEventStore interface {
	store.EventStore
	store.RangeReader
	store.Subscriber
	store.PrefixCopier
	store.ExecutionDeleter
	store.Fencer
	store.StatusIndex
}

// ErrMissingCapability matches *MissingCapabilityError.
var ErrMissingCapability = errors.New("crypto: inner store lacks a capability")

// MissingCapabilityError refuses to wrap a store that lacks a capability
// the wrapper must forward.
type MissingCapabilityError struct {
	Store      string // "EventStore", "SnapshotStore" or "ContentStore"
	Capability string // e.g. "store.Fencer"
}

func (e *MissingCapabilityError) Error() string {
	return "crypto: the inner " + e.Store + " does not implement " + e.Capability + ", which the encrypting wrapper forwards"
}

// Is makes errors.Is(err, ErrMissingCapability) true.
func (e *MissingCapabilityError) Is(target error) bool { return target == ErrMissingCapability }

// SubjectFunc chooses the subject of an execution from its first envelope
// (sequence 0: EXECUTION_STARTED for a flow's execution), in plaintext. ""
// means the execution is not sealed. It is called once per execution; the
// choice is recorded in metadata.seal of sequence 0 and found there for
// every later append, snapshot and erasure, so it never changes.
type SubjectFunc func(first event.Envelope) string

// EventStoreOptions configures NewEventStore.
type EventStoreOptions struct {
	// Subject chooses each execution's subject. Required.
	Subject SubjectFunc
	// Fields is the data-field table (default DefaultFields()).
	Fields *FieldTable
	// Limits are the inner store's envelope limits; a batch is validated
	// against them before sealing, so a refusal is the inner store's own
	// typed error. A sealed member grows by a third plus 47 bytes, so the
	// plaintext that fits is smaller than the cap; past it the inner store
	// refuses with *event.PayloadTooLargeError, writing nothing.
	Limits event.Limits
	// Rand is the source of nonces (default crypto/rand).
	Rand io.Reader
	// Index, when set, records each sealed execution under its subject
	// (NewLogSubjectIndex over a store that is not inner), so ExecutionsOf
	// reads the subject's executions instead of sequence 0 of every
	// execution. It costs one durable Index.Add before each execution's
	// first append and each fork; an Add that fails refuses that write,
	// writing nothing. Default nil: ExecutionsOf scans.
	Index SubjectIndex
}

// EventStore seals the data members of every envelope (FieldTable) under
// the execution's subject key, AES-256-GCM with a random nonce and the
// execution it is sealed in, sequence, event type and member name as
// additional data, and opens them on every read; a read also refuses a
// seal naming another subject than the execution's. The frame (ids, type, sequence, timestamp,
// structural members) stays readable. A read of an erased subject returns
// a ShreddedMarker in place of each sealed member; a value that does not
// open is *SealError. Appends stay one inner append, so they stay atomic.
//
// Read paths strip metadata.seal, so a reader sees what was appended.
// An appended envelope that already carries metadata.seal is refused with
// *store.InvalidAppendError: the member is this store's.
type EventStore struct {
	inner    InnerEventStore
	keys     KeyStore
	subject  SubjectFunc
	fields   FieldTable
	lim      event.Limits
	rand     io.Reader
	subjects subjectCache
	index    SubjectIndex
	closed   atomic.Bool
}

// NewEventStore wraps inner. It refuses an inner store without every
// capability of InnerEventStore with *MissingCapabilityError, a nil
// KeyStore or Subject with an error, and a LogSubjectIndex kept in inner
// itself with an error (the kernel would see its streams as executions).
func NewEventStore(inner store.EventStore, keys KeyStore, opts EventStoreOptions) (*EventStore, error) {
	in, err := innerEvents(inner)
	if err != nil {
		return nil, err
	}
	if keys == nil {
		return nil, errors.New("crypto: NewEventStore needs a KeyStore")
	}
	if opts.Subject == nil {
		return nil, errors.New("crypto: EventStoreOptions.Subject is required")
	}
	if ix, ok := opts.Index.(*LogSubjectIndex); ok && ix != nil && sameStore(ix.events, inner) {
		return nil, errors.New("crypto: the LogSubjectIndex must be kept in another store than the one it indexes")
	}
	s := &EventStore{inner: in, keys: keys, subject: opts.Subject, fields: DefaultFields(), lim: opts.Limits,
		rand: opts.Rand, index: opts.Index}
	if opts.Fields != nil {
		s.fields = opts.Fields.clone()
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}

func innerEvents(inner store.EventStore) (InnerEventStore, error) {
	if inner == nil {
		return nil, errors.New("crypto: NewEventStore needs an inner store")
	}
	missing := func(c string) error { return &MissingCapabilityError{Store: "EventStore", Capability: c} }
	if _, ok := inner.(store.RangeReader); !ok {
		return nil, missing("store.RangeReader")
	}
	if _, ok := inner.(store.Subscriber); !ok {
		return nil, missing("store.Subscriber")
	}
	if _, ok := inner.(store.PrefixCopier); !ok {
		return nil, missing("store.PrefixCopier")
	}
	if _, ok := inner.(store.ExecutionDeleter); !ok {
		return nil, missing("store.ExecutionDeleter")
	}
	if _, ok := inner.(store.Fencer); !ok {
		return nil, missing("store.Fencer")
	}
	if _, ok := inner.(store.StatusIndex); !ok {
		return nil, missing("store.StatusIndex")
	}
	return inner.(InnerEventStore), nil
}

// Inner returns the wrapped store (raw, sealed rows).
func (s *EventStore) Inner() store.EventStore { return s.inner }

// Append implements store.EventStore: it seals, then appends the batch in
// one inner Append. A subject whose key was destroyed refuses a batch that
// would seal data with *KeyDestroyedError, writing nothing; a batch with
// no data member (a cancel, PAYLOAD_SHREDDED) is still written. With an
// Index, a sealed execution's first append (expected 0) is added to it
// first; an Add that fails refuses the append with its error.
func (s *EventStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	sealed, subject, err := s.sealBatch(ctx, executionID, expected, events)
	if err != nil {
		return err
	}
	if err := s.indexFirst(ctx, executionID, expected, subject); err != nil {
		return err
	}
	if err := s.inner.Append(ctx, executionID, expected, sealed); err != nil {
		return err
	}
	s.remember(executionID, expected, subject)
	return nil
}

// AppendFenced implements store.Fencer like Append.
func (s *EventStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	sealed, subject, err := s.sealBatch(ctx, executionID, expected, events)
	if err != nil {
		return err
	}
	if err := s.indexFirst(ctx, executionID, expected, subject); err != nil {
		return err
	}
	if err := s.inner.AppendFenced(ctx, executionID, token, expected, sealed); err != nil {
		return err
	}
	s.remember(executionID, expected, subject)
	return nil
}

// indexFirst adds a sealed execution to the Index before its first
// append, so no execution with a log is missing from it. An inbox stream
// is not added: it follows its owner.
func (s *EventStore) indexFirst(ctx context.Context, executionID string, expected int64, subject string) error {
	if s.index == nil || expected != 0 || subject == "" || store.IsInboxStream(executionID) {
		return nil
	}
	return s.index.Add(ctx, subject, executionID)
}

// sameStore reports whether a and b are the same store value, without
// comparing values whose type is not comparable.
func sameStore(a, b store.EventStore) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// remember caches the subject a first append chose.
func (s *EventStore) remember(executionID string, expected int64, subject string) {
	if expected == 0 {
		s.subjects.put(executionID, subject)
	}
}

// ReadFrom implements store.EventStore, opening every sealed member.
func (s *EventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	evs, err := s.inner.ReadFrom(ctx, executionID, from)
	if err != nil {
		return nil, err
	}
	return s.openAll(ctx, executionID, evs)
}

// ReadRange implements store.RangeReader, opening every sealed member.
func (s *EventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	evs, err := s.inner.ReadRange(ctx, executionID, from, to)
	if err != nil {
		return nil, err
	}
	return s.openAll(ctx, executionID, evs)
}

// ListExecutions implements store.EventStore (ids and workflow ids are
// frame, never sealed).
func (s *EventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := s.usable(); err != nil {
		return store.ExecutionPage{}, err
	}
	return s.inner.ListExecutions(ctx, after, limit)
}

// ListUnfinished implements store.StatusIndex.
func (s *EventStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := s.usable(); err != nil {
		return store.UnfinishedPage{}, err
	}
	return s.inner.ListUnfinished(ctx, after, limit)
}

// AcquireFence implements store.Fencer.
func (s *EventStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	return s.inner.AcquireFence(ctx, executionID)
}

// DeleteExecution implements store.ExecutionDeleter.
func (s *EventStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.inner.DeleteExecution(ctx, executionID); err != nil {
		return err
	}
	s.subjects.drop(executionID)
	return nil
}

// Close closes the inner store (not the KeyStore, which other wrappers
// share). Later calls return store.ErrClosed.
func (s *EventStore) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	return s.inner.Close()
}

func (s *EventStore) usable() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// sealBatch validates the batch, finds the execution's subject and seals
// every envelope under one key.
func (s *EventStore) sealBatch(ctx context.Context, executionID string, expected int64, events []event.Envelope) ([]event.Envelope, string, error) {
	if err := s.usable(); err != nil {
		return nil, "", err
	}
	if err := store.ValidateAppend(executionID, expected, events, s.lim); err != nil {
		return nil, "", err
	}
	for i, e := range events {
		if _, ok := e.Metadata[SealMetadataKey]; ok {
			return nil, "", &store.InvalidAppendError{Index: i, Reason: "metadata." + SealMetadataKey + " is reserved for the sealing store"}
		}
	}
	subject, err := s.subjectForAppend(ctx, executionID, expected, events[0])
	if err != nil {
		return nil, "", err
	}
	if subject == "" {
		return events, "", nil
	}
	out, err := s.sealUnder(ctx, subject, events)
	return out, subject, err
}

// sealUnder seals events under subject's key; the key is fetched (and
// created) only when an envelope needs it.
func (s *EventStore) sealUnder(ctx context.Context, subject string, events []event.Envelope) ([]event.Envelope, error) {
	var sl *fieldSealer
	out := make([]event.Envelope, len(events))
	for i, e := range events {
		if sl == nil && (e.Sequence == 0 || s.needsKey(e)) {
			k, err := s.keys.Key(ctx, subject)
			if err != nil {
				return nil, err
			}
			if sl, err = newFieldSealer(k, s.rand); err != nil {
				return nil, err
			}
		}
		if sl == nil {
			out[i] = e
			continue
		}
		se, err := sl.seal(e, s.fields.For(e.Type))
		if err != nil {
			return nil, &store.InvalidAppendError{Index: i, Reason: "cannot seal", Err: err}
		}
		out[i] = se
	}
	return out, nil
}

// needsKey reports whether e has a data member to seal.
func (s *EventStore) needsKey(e event.Envelope) bool {
	names := s.fields.For(e.Type)
	if len(names) == 0 || isNull(e.Payload) {
		return false
	}
	if contains(names, WholePayload) {
		return true
	}
	ms, _, err := objectMembers(e.Payload)
	if err != nil {
		return true // sealing reports it
	}
	for _, m := range ms {
		if contains(names, m.name) && !isNull(e.Payload[m.start:m.end]) {
			return true
		}
	}
	return false
}

// openAll opens evs, events of executionID, in place, sharing one key
// lookup per (subject, key) and checking every seal names the execution's
// subject.
func (s *EventStore) openAll(ctx context.Context, executionID string, evs []event.Envelope) ([]event.Envelope, error) {
	o := opener{subject: s.subjectOnce(ctx, executionID)}
	for i := range evs {
		e, err := o.open(ctx, s.keys, evs[i])
		if err != nil {
			return nil, err
		}
		evs[i] = e
	}
	return evs, nil
}

// subjectOnce returns SubjectOf(executionID), asked at most once.
func (s *EventStore) subjectOnce(ctx context.Context, executionID string) func() (string, error) {
	var subject string
	var err error
	asked := false
	return func() (string, error) {
		if !asked {
			asked = true
			subject, err = s.SubjectOf(ctx, executionID)
		}
		return subject, err
	}
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw []byte) bool {
	i := skipSpace(raw, 0)
	if i == len(raw) {
		return true
	}
	return len(raw)-i >= 4 && string(raw[i:i+4]) == "null" && skipSpace(raw, i+4) == len(raw)
}
