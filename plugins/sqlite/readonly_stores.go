package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// roView is what the read-only stores share.
type roView struct {
	db     *ReadOnlyDB
	closed atomic.Bool
}

// Close detaches the view: its later calls return store.ErrClosed. The
// ReadOnlyDB stays open.
func (v *roView) Close() error {
	if v.closed.CompareAndSwap(false, true) {
		v.db.wake.NotifyAll()
	}
	return nil
}

// query runs q on the connection to read with and scans each row; from a
// file that predates table need it reads no rows.
func query[T any](ctx context.Context, v *roView, need, op, q string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	return queryTable(ctx, v, need, nil, op, q, scan, args...)
}

// queryTable is query that returns missing, when not nil, from a file
// that predates table need.
func queryTable[T any](ctx context.Context, v *roView, need string, missing error, op, q string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	if v.closed.Load() {
		return nil, store.ErrClosed
	}
	c, release, err := v.db.conn()
	if err != nil {
		return nil, err
	}
	defer release()
	if need != "" && !c.tables[need] {
		return nil, missing
	}
	rows, err := c.pool.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, v.db.readErr(op, err)
	}
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, errors.Join(v.db.readErr(op, err), rows.Close())
		}
		out = append(out, x)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, v.db.readErr(op, err)
	}
	return out, nil
}

// ReadOnlyEventStore is the event log of a ReadOnlyDB: store.EventStore,
// store.RangeReader, store.Subscriber, store.PrefixTrimmer and
// store.ExecutionCatalog. Append and TrimThrough return ErrReadOnly. A
// trimmed log reads as the writer's does: its start event and the events
// after its trim point.
type ReadOnlyEventStore struct{ roView }

var (
	_ store.EventStore       = (*ReadOnlyEventStore)(nil)
	_ store.RangeReader      = (*ReadOnlyEventStore)(nil)
	_ store.Subscriber       = (*ReadOnlyEventStore)(nil)
	_ store.PrefixTrimmer    = (*ReadOnlyEventStore)(nil)
	_ store.ExecutionCatalog = (*ReadOnlyEventStore)(nil)
)

// ErrNoCatalog is the refusal of a catalog search or count of a file
// written before the catalog existed (migration 11): its logs are there,
// their catalog is not, and a read-only store never migrates. Open the
// file with Open once to migrate it. It matches store.ErrNoCatalog, so a
// reader falls back to the listing.
var ErrNoCatalog = fmt.Errorf("sqlite: the file predates the execution catalog; open it for writing once to migrate it: %w", store.ErrNoCatalog)

// SearchExecutions implements store.ExecutionCatalog, as
// EventStore.SearchExecutions does. A malformed q is refused with
// *store.InvalidCatalogQueryError, and a file that predates the catalog
// with ErrNoCatalog, before anything is read.
func (s *ReadOnlyEventStore) SearchExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogPage, error) {
	if err := store.ValidateCatalogQuery(q); err != nil {
		return store.CatalogPage{}, err
	}
	limit := store.CatalogLimit(q.Limit)
	text, args := catalogSearchSQL(q, limit)
	entries, err := queryTable(ctx, &s.roView, "catalog", ErrNoCatalog, "search executions", text, scanEntry, args...)
	if err != nil {
		return store.CatalogPage{}, err
	}
	return catalogPage(entries, limit), nil
}

// CountExecutions implements store.ExecutionCatalog, as
// EventStore.CountExecutions does; a file that predates the catalog is
// refused with ErrNoCatalog.
func (s *ReadOnlyEventStore) CountExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogCounts, error) {
	q.Status, q.After, q.Limit = "", "", 0
	if err := store.ValidateCatalogQuery(q); err != nil {
		return nil, err
	}
	text, args := catalogCountSQL(q)
	rows, err := queryTable(ctx, &s.roView, "catalog", ErrNoCatalog, "count executions", text, scanCount, args...)
	if err != nil {
		return nil, err
	}
	return catalogCounts(rows), nil
}

// Append implements store.EventStore: it writes nothing and returns
// ErrReadOnly.
func (s *ReadOnlyEventStore) Append(context.Context, string, int64, []event.Envelope) error {
	return ErrReadOnly
}

// ReadFrom implements store.EventStore: the committed events of
// executionID with sequence >= from, in order, payloads and metadata as
// appended.
func (s *ReadOnlyEventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	return query(ctx, &s.roView, "", "read events", sqlEventsFrom, scanEvent(executionID), executionID, from)
}

// ReadRange implements store.RangeReader: the events with
// from <= sequence < to, in order.
func (s *ReadOnlyEventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	return query(ctx, &s.roView, "", "read events", sqlEventsRange, scanEvent(executionID), executionID, from, to)
}

// TrimThrough implements store.PrefixTrimmer: it removes nothing and
// returns ErrReadOnly.
func (s *ReadOnlyEventStore) TrimThrough(context.Context, string, int64) error { return ErrReadOnly }

// TrimmedThrough implements store.PrefixTrimmer: the log's trim point, 0
// when nothing was trimmed, for an unknown execution and in a file that
// predates trimming.
func (s *ReadOnlyEventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	points, err := query(ctx, &s.roView, "executions.trimmed", "read trim point", sqlTrimPoint, func(rows *sql.Rows) (int64, error) {
		var through int64
		return through, rows.Scan(&through)
	}, executionID)
	if err != nil || len(points) == 0 {
		return 0, err
	}
	return points[0], nil
}

// scanEvent reads a row of eventCols of executionID.
func scanEvent(executionID string) func(*sql.Rows) (event.Envelope, error) {
	return func(rows *sql.Rows) (event.Envelope, error) {
		e := event.Envelope{ExecutionID: executionID}
		var payload []byte
		var meta sql.NullString
		if err := rows.Scan(&e.Sequence, &e.ID, &e.WorkflowID, &e.Type, &e.Timestamp, &payload, &meta); err != nil {
			return e, err
		}
		e.Payload = json.RawMessage(payload)
		var err error
		if meta.Valid {
			e.Metadata, err = decodeMetadata(meta.String)
		}
		return e, err
	}
}

// ListExecutions implements store.EventStore, as EventStore.ListExecutions
// does.
func (s *ReadOnlyEventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	infos, err := query(ctx, &s.roView, "", "list executions", sqlListExecutions, func(rows *sql.Rows) (store.ExecutionInfo, error) {
		var info store.ExecutionInfo
		return info, rows.Scan(&info.ExecutionID, &info.WorkflowID, &info.Length)
	}, after, limit+1)
	if err != nil {
		return store.ExecutionPage{}, err
	}
	page := store.ExecutionPage{Executions: infos}
	if len(infos) > limit {
		page.Executions = infos[:limit]
		page.Next = infos[limit-1].ExecutionID
	}
	return page, nil
}

// Subscribe implements store.Subscriber: the events of executionID from
// from on, those stored first, then each one another process commits,
// within about ChangePollInterval (the files are watched while any
// subscription of the DB is open). It ends when ctx ends or it is closed
// (Err nil), or when the view or its DB is closed (store.ErrClosed).
func (s *ReadOnlyEventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	unfollow, err := s.db.follow()
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context, next int64) ([]event.Envelope, error) {
		return s.ReadFrom(ctx, executionID, next)
	}
	wait := func() <-chan struct{} { return s.db.wake.Wait(executionID) }
	sub := store.Follow(ctx, read, wait, max(from, 0))
	go func() {
		_ = sub.Err() // returns once the subscription has ended
		unfollow()
	}()
	return sub, nil
}

// ReadOnlySnapshotStore is the snapshots of a ReadOnlyDB:
// store.SnapshotStore and store.SnapshotLister. Save returns ErrReadOnly; a
// file that predates snapshots has none.
type ReadOnlySnapshotStore struct{ roView }

var (
	_ store.SnapshotStore  = (*ReadOnlySnapshotStore)(nil)
	_ store.SnapshotLister = (*ReadOnlySnapshotStore)(nil)
)

// Save implements store.SnapshotStore: it writes nothing and returns
// ErrReadOnly.
func (s *ReadOnlySnapshotStore) Save(context.Context, store.Snapshot) error { return ErrReadOnly }

// LoadLatest implements store.SnapshotStore.
func (s *ReadOnlySnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, sqlSnapshotLatest, executionID)
}

// LoadAt implements store.SnapshotStore.
func (s *ReadOnlySnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, sqlSnapshotAt, executionID, atMost)
}

func (s *ReadOnlySnapshotStore) load(ctx context.Context, executionID, q string, args ...any) (store.Snapshot, bool, error) {
	snaps, err := query(ctx, &s.roView, "snapshots", "load snapshot", q, func(rows *sql.Rows) (store.Snapshot, error) {
		snap := store.Snapshot{ExecutionID: executionID}
		err := rows.Scan(&snap.Sequence, &snap.SchemaVersion, &snap.State)
		if snap.State == nil {
			snap.State = []byte{}
		}
		return snap, err
	}, args...)
	if err != nil || len(snaps) == 0 {
		return store.Snapshot{}, false, err
	}
	return snaps[0], true, nil
}

// ListSequences implements store.SnapshotLister.
func (s *ReadOnlySnapshotStore) ListSequences(ctx context.Context, executionID string) ([]int64, error) {
	return query(ctx, &s.roView, "snapshots", "list snapshots", sqlSnapshotSeqs, func(rows *sql.Rows) (int64, error) {
		var seq int64
		return seq, rows.Scan(&seq)
	}, executionID)
}

// ReadOnlyBranchRegistry is the branch refs of a ReadOnlyDB
// (store.BranchRegistry). CreateRef and MoveRef return ErrReadOnly; a file
// that predates refs has none.
type ReadOnlyBranchRegistry struct{ roView }

var _ store.BranchRegistry = (*ReadOnlyBranchRegistry)(nil)

// CreateRef implements store.BranchRegistry: it returns ErrReadOnly.
func (r *ReadOnlyBranchRegistry) CreateRef(context.Context, string, string) (store.Ref, error) {
	return store.Ref{}, ErrReadOnly
}

// MoveRef implements store.BranchRegistry: it returns ErrReadOnly.
func (r *ReadOnlyBranchRegistry) MoveRef(context.Context, string, string, int64) (store.Ref, error) {
	return store.Ref{}, ErrReadOnly
}

// ReadRef implements store.BranchRegistry: the ref, or store.ErrRefNotFound.
func (r *ReadOnlyBranchRegistry) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	refs, err := query(ctx, &r.roView, "refs", "read ref", sqlRef, scanRef, name)
	if err != nil {
		return store.Ref{}, err
	}
	if len(refs) == 0 {
		return store.Ref{}, refNotFound(name)
	}
	return refs[0], nil
}

// ListRefs implements store.BranchRegistry: the refs whose name starts with
// prefix, by name in code-point order.
func (r *ReadOnlyBranchRegistry) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	return query(ctx, &r.roView, "refs", "list refs", sqlRefsFrom, scanRef, prefix, prefix)
}

func scanRef(rows *sql.Rows) (store.Ref, error) {
	var ref store.Ref
	return ref, rows.Scan(&ref.Name, &ref.ExecutionID, &ref.Version)
}

// ReadOnlyArchiveStore is the archive of compacted events of a ReadOnlyDB
// (store.ArchiveStore). Archive returns ErrReadOnly; a file that predates
// compaction has an empty archive.
type ReadOnlyArchiveStore struct{ roView }

var _ store.ArchiveStore = (*ReadOnlyArchiveStore)(nil)

// Archive implements store.ArchiveStore: it writes nothing and returns
// ErrReadOnly.
func (a *ReadOnlyArchiveStore) Archive(context.Context, string, []event.Envelope) error {
	return ErrReadOnly
}

// ReadArchived implements store.ArchiveStore: the archived events of
// executionID with from <= sequence < to (to < 0: to the end), in order.
func (a *ReadOnlyArchiveStore) ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if to < 0 {
		to = math.MaxInt64
	}
	return query(ctx, &a.roView, "archive", "read archived events", sqlArchiveRange, scanEvent(executionID), executionID, from, to)
}
