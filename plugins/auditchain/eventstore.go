package auditchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Inner is what Wrap needs of the store it wraps: every optional capability
// the kernel uses, which memstore, plugins/sqlite and plugins/postgres all
// implement. The wrapper forwards each one, so wrapping disables nothing.
type Inner interface {
	store.EventStore
	store.RangeReader
	store.Subscriber
	store.PrefixCopier
	store.ExecutionDeleter
	store.Fencer
	store.StatusIndex
	store.PrefixTrimmer
}

// Interface checks: the wrapper offers exactly what Inner has, and moves
// compacted history with its links (store.PrefixArchiver).
var (
	_ Inner                = (*EventStore)(nil)
	_ store.PrefixArchiver = (*EventStore)(nil)
)

// MinKeyBytes is the shortest HMAC key Wrap accepts.
const MinKeyBytes = 16

// DefaultCacheSize is the number of execution heads the wrapper remembers
// when Options.CacheSize is 0.
const DefaultCacheSize = 4096

// Options configures Wrap and Verify. The zero value is an unkeyed
// (SHA-256) chain with the default cache and event.Limits defaults.
type Options struct {
	// Key, when set, makes every link an HMAC-SHA-256 under it (at least
	// MinKeyBytes bytes; 32 random bytes is the intended size). The
	// application supplies it, from its key store; it is copied, never
	// logged or written. Verify needs the same key.
	Key []byte
	// CacheSize bounds the heads remembered between appends (default
	// DefaultCacheSize; negative disables the cache, so every append of a
	// non-empty log reads its last event first). Only Wrap reads it.
	CacheSize int
	// Archive is where compaction moved a log's settled history (the
	// archive the app configured, WrapArchive's or the one beneath it).
	// VerifyExecution reads a compacted log's archived events from it and
	// verifies them in place; only VerifyExecution reads it.
	Archive store.ArchiveStore
	// Limits are the inner store's envelope limits: a batch is checked
	// against them (store.ValidateAppend) before it is chained, so a
	// refusal is the typed error the inner store would return. The member
	// adds at most MemberBytes to each envelope's metadata. Only Wrap
	// reads it.
	Limits event.Limits
}

// MemberBytes is the most the chain member adds to an envelope's metadata
// (its key and its value), counted as event.Validate counts metadata.
const MemberBytes = len(MetadataKey) + 2 + len(algHMACSHA256) + 1 + 16 + 1 + 2*linkSize

// ErrMissingCapability is matched by *MissingCapabilityError.
var ErrMissingCapability = errors.New("auditchain: the inner event store lacks a capability")

// ErrShortKey refuses an HMAC key shorter than MinKeyBytes.
var ErrShortKey = errors.New("auditchain: the key is shorter than 16 bytes")

// MissingCapabilityError is Wrap's refusal of an inner store that lacks an
// optional capability the kernel uses: hiding it would silently disable a
// feature (fencing, forks, waits, recovery), so the wrapper refuses instead.
type MissingCapabilityError struct {
	Store      string // the inner store's type
	Capability string // for example "store.Fencer"
}

func (e *MissingCapabilityError) Error() string {
	return fmt.Sprintf("auditchain: the inner event store %s does not implement %s, which the chain must forward", e.Store, e.Capability)
}

// Is makes errors.Is(err, ErrMissingCapability) true.
func (e *MissingCapabilityError) Is(target error) bool { return target == ErrMissingCapability }

// ChainError refuses an append whose predecessor carries no usable link:
// the log was written without the chain (or under another key), so a link
// appended now would chain onto nothing verifiable. Nothing was written.
type ChainError struct {
	ExecutionID string
	Sequence    int64  // the predecessor's sequence
	Reason      Reason // ReasonUnchained, ReasonMalformed or ReasonWrongKey
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("auditchain: cannot append to %q: its event #%d has no link this chain can continue (%s)", e.ExecutionID, e.Sequence, e.Reason)
}

// EventStore is the hash-chained event log over an Inner store. It
// implements store.EventStore and every capability of Inner. Appends stamp
// the chain member; reads and subscriptions return envelopes without it,
// exactly as they were appended; CopyPrefix, DeleteExecution, fencing,
// listings and the status index are the inner store's.
type EventStore struct {
	inner Inner
	chain chainer
	lim   event.Limits
	heads *headCache
}

// Wrap returns the chained store over inner. It refuses, with
// *MissingCapabilityError, an inner store without every capability of
// Inner, and with ErrShortKey a key shorter than MinKeyBytes. Wrapping a
// store that already holds unchained logs is allowed, but appending to one
// of them is refused with *ChainError: the chain starts with a log.
func Wrap(inner store.EventStore, opts Options) (*EventStore, error) {
	if inner == nil {
		return nil, errors.New("auditchain: the inner event store is nil")
	}
	if n := len(opts.Key); n > 0 && n < MinKeyBytes {
		return nil, ErrShortKey
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"store.RangeReader", is[store.RangeReader](inner)},
		{"store.Subscriber", is[store.Subscriber](inner)},
		{"store.PrefixCopier", is[store.PrefixCopier](inner)},
		{"store.ExecutionDeleter", is[store.ExecutionDeleter](inner)},
		{"store.Fencer", is[store.Fencer](inner)},
		{"store.StatusIndex", is[store.StatusIndex](inner)},
		{"store.PrefixTrimmer", is[store.PrefixTrimmer](inner)},
	} {
		if !c.ok {
			return nil, &MissingCapabilityError{Store: fmt.Sprintf("%T", inner), Capability: c.name}
		}
	}
	size := opts.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	return &EventStore{inner: inner.(Inner), chain: newChainer(opts.Key), lim: opts.Limits, heads: newHeadCache(size)}, nil
}

func is[T any](s store.EventStore) bool {
	_, ok := s.(T)
	return ok
}

// Inner returns the wrapped store, whose reads carry the chain member.
func (s *EventStore) Inner() store.EventStore { return s.inner }

// Append implements store.EventStore: it chains the batch onto the log's
// head and appends it in one inner Append. A refusal of the inner store is
// returned as is, and writes nothing; *ChainError refuses a batch whose
// predecessor carries no link.
func (s *EventStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, expected, events, func(chained []event.Envelope) error {
		return s.inner.Append(ctx, executionID, expected, chained)
	})
}

// AppendFenced implements store.Fencer: Append under the inner store's
// fence check.
func (s *EventStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, expected, events, func(chained []event.Envelope) error {
		return s.inner.AppendFenced(ctx, executionID, token, expected, chained)
	})
}

// append chains events onto the head before expected and hands the whole
// chained batch to write. Any failure drops the cached head, and a head is
// cached only if no drop happened while the append ran.
func (s *EventStore) append(ctx context.Context, executionID string, expected int64, events []event.Envelope,
	write func([]event.Envelope) error) error {
	if err := store.ValidateAppend(executionID, expected, events, s.lim); err != nil {
		return err
	}
	epoch := s.heads.epoch()
	prev, err := s.head(ctx, executionID, expected)
	if err != nil {
		s.heads.drop(executionID)
		return err
	}
	chained := make([]event.Envelope, len(events))
	h := s.chain.newHash()
	for i, e := range events {
		l, err := s.chain.next(h, prev, e, true)
		if err != nil {
			return &store.InvalidAppendError{Index: i, Reason: "envelope refused", Err: err}
		}
		meta := make(map[string]json.RawMessage, len(e.Metadata)+1)
		for k, v := range e.Metadata {
			meta[k] = v
		}
		meta[MetadataKey] = s.chain.format(l)
		e.Metadata = meta
		chained[i] = e
		prev = l
	}
	if err := write(chained); err != nil {
		s.heads.drop(executionID)
		return err
	}
	s.heads.put(executionID, expected+int64(len(events))-1, prev, epoch)
	return nil
}

// head returns the link of the event before expected: genesis for an empty
// log, else the cached head or the inner store's event expected-1. A log
// shorter than expected is refused here with *store.SequenceConflictError,
// since chaining onto a head that is not there could race a writer that
// fills it.
func (s *EventStore) head(ctx context.Context, executionID string, expected int64) (link, error) {
	if expected == 0 {
		return genesis, nil
	}
	if l, ok := s.heads.get(executionID, expected-1); ok {
		return l, nil
	}
	evs, err := s.inner.ReadRange(ctx, executionID, expected-1, expected)
	if err != nil {
		return link{}, err
	}
	if len(evs) != 1 || evs[0].Sequence != expected-1 {
		return link{}, s.conflict(ctx, executionID, expected)
	}
	m, st := parseMember(evs[0])
	switch {
	case st == memberMissing:
		return link{}, &ChainError{ExecutionID: executionID, Sequence: expected - 1, Reason: ReasonUnchained}
	case st == memberMalformed:
		return link{}, &ChainError{ExecutionID: executionID, Sequence: expected - 1, Reason: ReasonMalformed}
	case !s.chain.sameKey(m):
		return link{}, &ChainError{ExecutionID: executionID, Sequence: expected - 1, Reason: ReasonWrongKey}
	}
	return m.link, nil
}

// conflict builds the refusal of an append past the end of the log, with
// the log's actual length (a rare path: it reads the log).
func (s *EventStore) conflict(ctx context.Context, executionID string, expected int64) error {
	evs, err := s.inner.ReadFrom(ctx, executionID, 0)
	if err != nil {
		return err
	}
	var actual int64
	if n := len(evs); n > 0 {
		actual = evs[n-1].Sequence + 1
	}
	return &store.SequenceConflictError{ExecutionID: executionID, Expected: expected, Actual: actual}
}

// ReadFrom implements store.EventStore: the inner store's events, without
// the chain member.
func (s *EventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	evs, err := s.inner.ReadFrom(ctx, executionID, from)
	return stripAll(evs), err
}

// ReadRange implements store.RangeReader, without the chain member.
func (s *EventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	evs, err := s.inner.ReadRange(ctx, executionID, from, to)
	return stripAll(evs), err
}

// ListExecutions implements store.EventStore (the inner store's).
func (s *EventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	return s.inner.ListExecutions(ctx, after, limit)
}

// ListUnfinished implements store.StatusIndex (the inner store's).
func (s *EventStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	return s.inner.ListUnfinished(ctx, after, limit)
}

// CopyPrefix implements store.PrefixCopier: the inner store copies the
// chained envelopes byte for byte; the links cover no executionId, so the
// copy verifies and its chain goes on from the copied head.
func (s *EventStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	return s.inner.CopyPrefix(ctx, from, to, through)
}

// DeleteExecution implements store.ExecutionDeleter; the cached head goes
// with the log, whatever the outcome.
func (s *EventStore) DeleteExecution(ctx context.Context, executionID string) error {
	err := s.inner.DeleteExecution(ctx, executionID)
	s.heads.drop(executionID)
	return err
}

// TrimThrough implements store.PrefixTrimmer (the inner store's). The
// head stays, so the chain goes on from it; the removed events verify
// from the archive (Options.Archive).
func (s *EventStore) TrimThrough(ctx context.Context, executionID string, through int64) error {
	return s.inner.TrimThrough(ctx, executionID, through)
}

// TrimmedThrough implements store.PrefixTrimmer (the inner store's).
func (s *EventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	return s.inner.TrimmedThrough(ctx, executionID)
}

// ArchiveRange implements store.PrefixArchiver: the events move into the
// archive beneath archive, which must be WrapArchive's, with their chain
// members, so the archived history verifies with the log
// (VerifyExecution with Options.Archive) and reads back through the
// wrapper without them. Another archive is refused with
// *store.ArchiveLayerError, writing nothing.
func (s *EventStore) ArchiveRange(ctx context.Context, archive store.ArchiveStore, executionID string, from, through int64) (int, error) {
	a, ok := archive.(*ArchiveStore)
	if !ok {
		return 0, &store.ArchiveLayerError{Store: "auditchain.EventStore", Want: "auditchain.WrapArchive(archive)", Got: fmt.Sprintf("%T", archive)}
	}
	return store.ArchiveRange(ctx, s.inner, a.inner, executionID, from, through)
}

// AcquireFence implements store.Fencer (the inner store's).
func (s *EventStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	return s.inner.AcquireFence(ctx, executionID)
}

// Close closes the inner store.
func (s *EventStore) Close() error { return s.inner.Close() }

// stripAll removes the chain member from envelopes the caller owns (stores
// return copies), leaving nil metadata when nothing else was there.
func stripAll(evs []event.Envelope) []event.Envelope {
	for i := range evs {
		evs[i] = strip(evs[i])
	}
	return evs
}

func strip(e event.Envelope) event.Envelope {
	if _, ok := e.Metadata[MetadataKey]; ok {
		delete(e.Metadata, MetadataKey)
		if len(e.Metadata) == 0 {
			e.Metadata = nil
		}
	}
	return e
}
