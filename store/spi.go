package store

import (
	"context"

	"github.com/loom-kernel/loom/event"
)

// SPI versions. A MINOR bump adds an optional interface, a MAJOR bump changes
// a required method's contract; TestSPIVersionsPinMethodSets fails when a
// method set changes without its version.
const (
	EventStoreSPIVersion     = "1.0.0"
	SnapshotStoreSPIVersion  = "1.0.0"
	BranchRegistrySPIVersion = "1.0.0"
	// StatusIndexSPIVersion versions the StatusIndex capability and the
	// rule of statusindex.go that decides its entries.
	StatusIndexSPIVersion = "1.0.0"
)

// EventStore is the durable, append-only log of every execution.
//
// Sequences of one execution start at 0 and are contiguous. The journal is
// the only writer of an execution and allocates sequences itself, so a store
// never reads before it writes; it only checks the expectation atomically.
type EventStore interface {
	// Append durably writes events, all of executionID with contiguous
	// sequences starting at expected, iff the log holds exactly expected
	// events. It returns only once the events are durable. Otherwise it
	// returns *SequenceConflictError (a duplicate or a gap), or
	// *InvalidAppendError for a malformed batch; in both cases nothing is
	// written. Appends to different executions may run concurrently.
	Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error
	// ReadFrom returns the events of executionID with sequence >= from, in
	// order; an unknown execution has no events.
	ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error)
	// ListExecutions returns up to limit executions whose id sorts after
	// after in code-point order (byte order of UTF-8), and the cursor of the
	// next page ("" when there is none).
	ListExecutions(ctx context.Context, after string, limit int) (ExecutionPage, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// ExecutionInfo describes one execution in a listing.
type ExecutionInfo struct {
	ExecutionID string `json:"executionId"`
	WorkflowID  string `json:"workflowId"`
	// Length is the number of events in the log (the next sequence).
	Length int64 `json:"length"`
}

// ExecutionPage is one page of ListExecutions. Next is the cursor to pass as
// after for the next page, "" on the last page.
type ExecutionPage struct {
	Executions []ExecutionInfo `json:"executions"`
	Next       string          `json:"next,omitempty"`
}

// RangeReader is an optional EventStore capability: a bounded read.
type RangeReader interface {
	// ReadRange returns the events with from <= sequence < to, in order.
	ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error)
}

// Subscriber is an optional EventStore capability: follow a log as it grows.
type Subscriber interface {
	// Subscribe delivers every event of executionID with sequence >= from,
	// in order, first those already stored (catch-up), then each new one once
	// it is durable. A missed wake-up loses nothing: delivery re-reads the log.
	Subscribe(ctx context.Context, executionID string, from int64) (*Subscription, error)
}

// PrefixCopier is an optional EventStore capability used by fork.
type PrefixCopier interface {
	// CopyPrefix copies the events of from with sequence <= through into the
	// new execution to, byte for byte except for executionId. It refuses with
	// *SequenceConflictError when to already has events, and with
	// *InvalidAppendError when from holds fewer than through+1 events.
	CopyPrefix(ctx context.Context, from, to string, through int64) error
}

// ExecutionDeleter is an optional EventStore capability.
type ExecutionDeleter interface {
	// DeleteExecution removes every event of executionID; deleting an unknown
	// execution is not an error.
	DeleteExecution(ctx context.Context, executionID string) error
}

// Fencer is an optional EventStore capability: one live driver per
// execution. A store that omits it performs no fencing (single node).
type Fencer interface {
	// AcquireFence returns a token greater than every token acquired before
	// for executionID; from then on, appends under an older token are refused.
	AcquireFence(ctx context.Context, executionID string) (int64, error)
	// AppendFenced is Append that first refuses with *FencedError, writing
	// nothing, when a newer token than token has been acquired.
	AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error
}

// StatusIndex is an optional EventStore capability: the index of
// unfinished executions, so a recovery pass costs O(unfinished), not
// O(all executions). The store keeps it in the same transaction as every
// write to the log (Append, AppendFenced, CopyPrefix, DeleteExecution), so
// a crash never leaves it disagreeing with the log, and a refused write
// changes it no more than the log.
//
// An entry is decided by the execution's last status-moving event
// (EventStatus; StatusChangeOf folds a batch): running (EXECUTION_STARTED,
// EXECUTION_RESUMED, or a log with no status-moving event yet: the fold's
// pending), suspended (EXECUTION_SUSPENDED), or continued (a kernel-stamped
// EXECUTION_CONTINUED naming its successor) while the successor's log is
// empty. Completed, failed and cancelled executions, continued ones whose
// successor has events, and inbox streams (IsInboxStream) are not listed.
// The index is a superset of what recovery must act on, never a fold: the
// caller re-folds the log before acting on an entry.
type StatusIndex interface {
	// ListUnfinished returns up to limit unfinished executions whose id
	// sorts after after in code-point order, and the cursor of the next
	// page ("" when there is none), like ListExecutions.
	ListUnfinished(ctx context.Context, after string, limit int) (UnfinishedPage, error)
}

// Snapshot is a checkpoint of an execution's folded state after the event at
// Sequence. State is the encoded fold.State; SchemaVersion the event schema
// of the fold that wrote it (read older ones through fold.NormalizeSnapshot).
type Snapshot struct {
	ExecutionID   string
	Sequence      int64
	SchemaVersion string
	State         []byte
}

// SnapshotStore keeps checkpoints out of band: there is no snapshot event in
// the log, and fold(snapshot, tail) must equal fold(all events).
type SnapshotStore interface {
	// Save stores s, replacing a snapshot at the same sequence.
	Save(ctx context.Context, s Snapshot) error
	// LoadLatest returns the snapshot with the highest sequence.
	LoadLatest(ctx context.Context, executionID string) (Snapshot, bool, error)
	// LoadAt returns the snapshot with the highest sequence <= atMost.
	LoadAt(ctx context.Context, executionID string, atMost int64) (Snapshot, bool, error)
	// Close releases the store.
	Close() error
}

// SnapshotLister is an optional SnapshotStore capability.
type SnapshotLister interface {
	// ListSequences returns the stored snapshot sequences, ascending.
	ListSequences(ctx context.Context, executionID string) ([]int64, error)
}

// SnapshotPruner is an optional SnapshotStore capability. The caller decides
// what is safe to remove.
type SnapshotPruner interface {
	// Prune deletes the snapshots of executionID with sequence < below and
	// returns how many it deleted.
	Prune(ctx context.Context, executionID string, below int64) (int, error)
}

// SnapshotDeleter is an optional SnapshotStore capability.
type SnapshotDeleter interface {
	// DeleteExecution removes every snapshot of executionID, which makes its
	// log authoritative again.
	DeleteExecution(ctx context.Context, executionID string) error
}

// Ref is a named pointer to an execution: promotion moves it, there is no
// merge. Version starts at 1 and grows by one on every move.
type Ref struct {
	Name        string `json:"name"`
	ExecutionID string `json:"executionId"`
	Version     int64  `json:"version"`
}

// AnyVersion makes MoveRef unconditional.
const AnyVersion int64 = -1

// BranchRegistry holds git-style refs over executions.
type BranchRegistry interface {
	// CreateRef creates name at executionID, or returns ErrRefExists.
	CreateRef(ctx context.Context, name, executionID string) (Ref, error)
	// MoveRef points name at executionID iff its version is expected (or
	// expected is AnyVersion); otherwise *RefConflictError or ErrRefNotFound.
	MoveRef(ctx context.Context, name, executionID string, expected int64) (Ref, error)
	// ReadRef returns the ref or ErrRefNotFound.
	ReadRef(ctx context.Context, name string) (Ref, error)
	// ListRefs returns the refs whose name starts with prefix, by name.
	ListRefs(ctx context.Context, prefix string) ([]Ref, error)
	// Close releases the registry.
	Close() error
}
