package crypto

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ArchiveStore seals the events compaction moves out of a log before they
// reach the inner archive, under the execution's subject and the same
// FieldTable as the log, and opens them on ReadArchived (shredded markers
// for an erased subject, *SealError for a value that does not open). The
// runtime reads the events it archives through the encrypting EventStore,
// so without this wrapper the archive would hold them in plaintext.
//
// Sealing here is deterministic (a synthetic nonce from the key, the
// place and the value): archiving the same events again produces the same
// bytes, so the inner archive's idempotency (a compaction re-run after a
// crash) holds. An erased subject's events cannot be archived
// (*KeyDestroyedError).
type ArchiveStore struct {
	inner    store.ArchiveStore
	keys     KeyStore
	subjects SubjectResolver
	fields   FieldTable
	closed   atomic.Bool
}

// NewArchiveStore wraps inner. subjects is normally the encrypting
// EventStore of the same log; fields nil means DefaultFields().
func NewArchiveStore(inner store.ArchiveStore, keys KeyStore, subjects SubjectResolver, fields *FieldTable) (*ArchiveStore, error) {
	if inner == nil || keys == nil || subjects == nil {
		return nil, errors.New("crypto: NewArchiveStore needs an inner store, a KeyStore and a SubjectResolver")
	}
	a := &ArchiveStore{inner: inner, keys: keys, subjects: subjects, fields: DefaultFields()}
	if fields != nil {
		a.fields = fields.clone()
	}
	return a, nil
}

// Archive implements store.ArchiveStore.
func (a *ArchiveStore) Archive(ctx context.Context, executionID string, events []event.Envelope) error {
	if a.closed.Load() {
		return store.ErrClosed
	}
	if err := store.ValidateArchive(executionID, events, event.Limits{}); err != nil {
		return err
	}
	if len(events) == 0 {
		return a.inner.Archive(ctx, executionID, events)
	}
	for i, e := range events {
		if _, ok := e.Metadata[SealMetadataKey]; ok {
			return &store.InvalidAppendError{Index: i, Reason: "metadata." + SealMetadataKey + " is reserved for the sealing store"}
		}
	}
	subject, err := a.subjects.SubjectOf(ctx, executionID)
	if err != nil || subject == "" {
		if err != nil {
			return err
		}
		return a.inner.Archive(ctx, executionID, events)
	}
	k, err := a.keys.Key(ctx, subject)
	if err != nil {
		return err
	}
	sl, err := newFieldSealer(k, nil)
	if err != nil {
		return err
	}
	sealed := make([]event.Envelope, len(events))
	for i, e := range events {
		if sealed[i], err = sl.seal(e, a.fields.For(e.Type)); err != nil {
			return &store.InvalidAppendError{Index: i, Reason: "cannot seal", Err: err}
		}
	}
	return a.inner.Archive(ctx, executionID, sealed)
}

// ReadArchived implements store.ArchiveStore.
func (a *ArchiveStore) ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if a.closed.Load() {
		return nil, store.ErrClosed
	}
	evs, err := a.inner.ReadArchived(ctx, executionID, from, to)
	if err != nil {
		return nil, err
	}
	asked, subject, serr := false, "", error(nil)
	o := opener{subject: func() (string, error) {
		if !asked {
			asked = true
			subject, serr = a.subjects.SubjectOf(ctx, executionID)
		}
		return subject, serr
	}}
	for i := range evs {
		if evs[i], err = o.open(ctx, a.keys, evs[i]); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// DeleteArchived implements store.ArchiveDeleter by forwarding it; an
// inner archive that cannot delete answers *MissingCapabilityError.
func (a *ArchiveStore) DeleteArchived(ctx context.Context, executionID string) error {
	if a.closed.Load() {
		return store.ErrClosed
	}
	d, ok := a.inner.(store.ArchiveDeleter)
	if !ok {
		return &MissingCapabilityError{Store: "ArchiveStore", Capability: "store.ArchiveDeleter"}
	}
	return d.DeleteArchived(ctx, executionID)
}

// Close closes the inner archive when it has a Close method (not the
// KeyStore); later calls return store.ErrClosed.
func (a *ArchiveStore) Close() error {
	if a.closed.Swap(true) {
		return store.ErrClosed
	}
	if c, ok := a.inner.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
