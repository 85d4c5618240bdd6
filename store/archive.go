package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// Log lifecycle: compaction moves an execution's settled history out of
// its log into an archive. The log keeps its start event (sequence 0: the
// execution's birth record — flow, tenant, trace, pins) and every event
// after the compaction point; the kernel keeps a snapshot at that point, so
// a load (snapshot + tail) never needs what was moved. Replay, resume and
// ReadRange never read the archive; ReadArchived is the explicit audit read.

// Versions of the lifecycle SPIs.
const (
	ArchiveStoreSPIVersion   = "1.0.0"
	PrefixTrimmerSPIVersion  = "1.0.0"
	PrefixArchiverSPIVersion = "1.0.0"
	ArchiveDeleterSPIVersion = "1.0.0"
)

// ArchiveStore keeps the events compaction moved out of logs. Archive is
// idempotent, so a compaction a crash interrupted is simply run again.
type ArchiveStore interface {
	// Archive stores events of executionID: one execution's, in ascending
	// sequence order, contiguous. An event already archived at its
	// sequence with the same canonical bytes is skipped; a different one
	// refuses the whole batch with *ArchiveConflictError, and a batch
	// that is not one execution's contiguous run with
	// *InvalidAppendError, writing nothing. An empty batch is a no-op.
	Archive(ctx context.Context, executionID string, events []event.Envelope) error
	// ReadArchived returns the archived events of executionID with
	// from <= sequence < to (to < 0: to the end), ascending; an unknown
	// execution yields none.
	ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error)
}

// ArchiveDeleter is an optional ArchiveStore capability: forgetting an
// execution's archived history, for retention (RetentionPolicy's
// deleteArchived) once its log is deleted.
type ArchiveDeleter interface {
	// DeleteArchived removes every archived event of executionID,
	// atomically; an unknown execution is not an error.
	DeleteArchived(ctx context.Context, executionID string) error
}

// PrefixTrimmer is an optional EventStore capability: dropping a log's
// settled history once it is archived.
type PrefixTrimmer interface {
	// TrimThrough removes the events of executionID with
	// 1 <= sequence <= through, atomically. The start event (sequence 0)
	// and the last event stay: the log's length is unchanged, appends go
	// on at it, and ReadFrom and ReadRange skip the removed range. A
	// through at or below the current trim point is a no-op; a through
	// below 1, or at or past the log's last event, or an unknown
	// execution, is refused with *TrimError, removing nothing.
	TrimThrough(ctx context.Context, executionID string, through int64) error
	// TrimmedThrough returns the log's trim point: the highest sequence
	// removed, 0 when nothing was (or for an unknown execution).
	TrimmedThrough(ctx context.Context, executionID string) (int64, error)
}

// PrefixArchiver is an optional EventStore capability of a store that
// wraps another and changes envelopes on the way (encryption, the audit
// chain): it moves a range of a log into an archive as the store beneath
// holds it, byte for byte, rather than as its reads return it. The
// archive then keeps what the log kept — sealed members stay sealed, chain
// links stay verifiable — and the wrapper's own ArchiveStore wrapper
// (passed as archive) turns it back into what reads return.
type PrefixArchiver interface {
	// ArchiveRange archives the events of executionID with
	// from <= sequence <= through into archive, which is the archive the
	// caller configured: a wrapper unwraps its own layer of it and passes
	// the rest down (ArchiveRange below), refusing, before anything is
	// written, an archive that is not its layer's. It returns the number of
	// events archived, which is less than through-from+1 only when the log
	// no longer holds some of them.
	ArchiveRange(ctx context.Context, archive ArchiveStore, executionID string, from, through int64) (int, error)
}

// ArchiveRange archives the events from..through of executionID in events
// into archive: through events' PrefixArchiver when it is one, else by
// reading them (ReadRange) and archiving what was read. It returns the
// number archived.
func ArchiveRange(ctx context.Context, events EventStore, archive ArchiveStore, executionID string, from, through int64) (int, error) {
	if pa, ok := events.(PrefixArchiver); ok {
		return pa.ArchiveRange(ctx, archive, executionID, from, through)
	}
	evs, err := ReadRange(ctx, events, executionID, from, through+1)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		return 0, nil
	}
	if err := archive.Archive(ctx, executionID, evs); err != nil {
		return 0, err
	}
	return len(evs), nil
}

// ArchiveLayerError refuses an ArchiveRange whose archive is not the
// wrapping store's own archive wrapper: archiving the store's bytes there
// would make the archive read back differently from the log. Nothing was
// written.
type ArchiveLayerError struct {
	Store string // the wrapping event store, e.g. "auditchain.EventStore"
	Want  string // what the archive must be, e.g. "auditchain.WrapArchive(...)"
	Got   string // the archive's type
}

func (e *ArchiveLayerError) Error() string {
	return fmt.Sprintf("store: %s archives through %s, and the configured archive is a %s: wrap the archive in the same order as the event store", e.Store, e.Want, e.Got)
}

// TrimError is TrimThrough's refusal; nothing was removed.
type TrimError struct {
	ExecutionID string
	Through     int64
	Reason      string
}

func (e *TrimError) Error() string {
	return "store: cannot trim " + strconv.Quote(e.ExecutionID) + " through #" + strconv.FormatInt(e.Through, 10) + ": " + e.Reason
}

// ArchiveConflictError refuses an Archive batch holding an event that
// differs from the one archived at its sequence; nothing was written.
type ArchiveConflictError struct {
	ExecutionID string
	Sequence    int64
}

func (e *ArchiveConflictError) Error() string {
	return fmt.Sprintf("store: the archive of %q already holds another event at #%d: an archived event is never replaced", e.ExecutionID, e.Sequence)
}

// ValidateArchive checks an Archive batch: one execution's events, valid
// envelopes, contiguous ascending sequences. Implementations call it
// before writing anything.
func ValidateArchive(executionID string, events []event.Envelope, lim event.Limits) error {
	for i, e := range events {
		if err := event.Validate(e, lim); err != nil {
			return &InvalidAppendError{Index: i, Reason: "invalid envelope", Err: err}
		}
		if e.ExecutionID != executionID {
			return &InvalidAppendError{Index: i, Reason: "envelope of another execution"}
		}
		if i > 0 && e.Sequence != events[i-1].Sequence+1 {
			return &InvalidAppendError{Index: i, Reason: "sequences are not contiguous"}
		}
	}
	return nil
}

// SameArchived says two envelopes are the same archived event: their
// canonical encodings are equal.
func SameArchived(a, b event.Envelope) bool {
	ea, errA := event.Encode(a)
	eb, errB := event.Encode(b)
	if errA != nil || errB != nil {
		return false
	}
	ca, errA := event.Canonical(ea)
	cb, errB := event.Canonical(eb)
	return errA == nil && errB == nil && string(ca) == string(cb)
}

// ValidateTrim checks a TrimThrough request against the log's length and
// its current trim point; it returns whether there is anything to do.
func ValidateTrim(executionID string, through, length, trimmed int64) (bool, error) {
	switch {
	case length == 0:
		return false, &TrimError{ExecutionID: executionID, Through: through, Reason: "no such execution"}
	case through < 1:
		return false, &TrimError{ExecutionID: executionID, Through: through, Reason: "the start event (#0) is never trimmed: trim through #1 or later"}
	case through >= length-1:
		return false, &TrimError{ExecutionID: executionID, Through: through,
			Reason: "the log's last event is #" + strconv.FormatInt(length-1, 10) + " and it always stays: trim through an earlier one"}
	}
	return through > trimmed, nil
}
