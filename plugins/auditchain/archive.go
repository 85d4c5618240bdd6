package auditchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ArchiveStore is the archive of a chained log: compaction (the chained
// EventStore's ArchiveRange) moves events into the archive beneath it with
// their chain members, and ReadArchived returns them without, as the log's
// reads do. Give the runtime WrapArchive(archive) as Config.Archive
// whenever its event store is chained.
type ArchiveStore struct {
	inner store.ArchiveStore
}

var _ store.ArchiveStore = (*ArchiveStore)(nil)

// WrapArchive returns the chained log's archive over inner.
func WrapArchive(inner store.ArchiveStore) (*ArchiveStore, error) {
	if inner == nil {
		return nil, errors.New("auditchain: the inner archive store is nil")
	}
	return &ArchiveStore{inner: inner}, nil
}

// Inner returns the archive beneath, whose reads carry the chain member.
func (a *ArchiveStore) Inner() store.ArchiveStore { return a.inner }

// Archive implements store.ArchiveStore by refusing, with
// *store.InvalidAppendError, every non-empty batch: an event handed in
// from outside carries no link, so the archive could not verify. Chained
// events reach the archive through the chained EventStore's ArchiveRange
// (Runtime.Compact, TrimInbox), which writes beneath this wrapper.
func (a *ArchiveStore) Archive(ctx context.Context, executionID string, events []event.Envelope) error {
	if len(events) == 0 {
		return nil
	}
	return &store.InvalidAppendError{Index: 0, Reason: "a chained log's events are archived through the chained EventStore (Runtime.Compact), which moves them with their links"}
}

// DeleteArchived implements store.ArchiveDeleter by forwarding it (for
// retention); an inner archive that cannot delete is *MissingCapabilityError.
func (a *ArchiveStore) DeleteArchived(ctx context.Context, executionID string) error {
	d, ok := a.inner.(store.ArchiveDeleter)
	if !ok {
		return &MissingCapabilityError{Store: fmt.Sprintf("%T", a.inner), Capability: "store.ArchiveDeleter"}
	}
	return d.DeleteArchived(ctx, executionID)
}

// ReadArchived implements store.ArchiveStore: the archived events without
// the chain member.
func (a *ArchiveStore) ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	evs, err := a.inner.ReadArchived(ctx, executionID, from, to)
	return stripAll(evs), err
}
