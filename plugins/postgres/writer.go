package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/internal/groupcommit"
)

// maxRechecks bounds how often a refused batch whose state read says it
// would now be accepted is tried again before it is refused anyway.
const maxRechecks = 3

// job is one Append waiting for its commit.
type job struct {
	batch    *appendBatch
	rechecks int // leader only
}

// request is a job waiting in the writer's queue.
type request = groupcommit.Request[job]

// writer commits appends in groups, through a groupcommit.Queue: the
// caller that finds a leadership free becomes a leader and, on its own
// goroutine, commits its batch together with every batch queued meanwhile,
// in ONE transaction on one pooled connection; the others wait for their
// result or for a leadership. So a lone appender commits on its own
// goroutine with no hand-off, and N concurrent appenders (of any
// executions) share one commit, one WAL flush and one round trip.
//
// Up to maxLeaders groups are in flight at once, each on its own
// connection. Each group takes its execution rows' locks in execution-id
// order, so groups that meet on the same rows (here or in another process)
// wait for each other instead of deadlocking.
type writer struct {
	db       *DB
	q        *groupcommit.Queue[job]
	queue    <-chan *request // q's queue, for its length in tests
	token    chan struct{}   // q's leadership tokens, held by tests
	counters struct{ txs, batches, events atomic.Int64 }
}

// maxLeaders is how many groups may be in flight at once, each led by its
// own caller on its own connection. Two let one group execute its
// statements while the previous one commits (its WAL flush, and the
// NOTIFY queue lock PostgreSQL holds through a notifying commit), instead
// of the queue waiting for both.
const maxLeaders = 2

// maxExtraGroups bounds a leader's turn once its own request is done: it
// hands the leadership on after this many transactions counted from the
// one that finished its request (groupcommit.Limits.ExtraGroups), so at
// most three more for others: a bound on its caller's latency that still
// saves most hand-offs under load.
const maxExtraGroups = 4

func newWriter(db *DB) *writer {
	w := &writer{db: db}
	w.q = groupcommit.New[job](w, groupcommit.Limits{
		Queued:        MaxQueuedBatches,
		Leaders:       maxLeaders,
		GroupRequests: MaxGroupBatches,
		GroupBytes:    MaxGroupBytes,
		ExtraGroups:   maxExtraGroups,
	})
	w.queue, w.token = w.q.Waiting(), w.q.Tokens()
	return w
}

// submit queues an append batch of size bytes and returns its result. If
// ctx ends before a leader has taken it, submit returns ctx.Err() and
// nothing is written; once taken, it waits for the outcome, so a nil
// return always means committed.
func (w *writer) submit(ctx context.Context, b *appendBatch, size int) error {
	return w.q.Submit(ctx, job{batch: b}, size)
}

// Lead implements groupcommit.Committer: with a leadership held, it runs
// one transaction per group until the leadership is over. It acquires one
// pooled connection once there is work and holds it meanwhile, and stops
// early if that connection breaks, leaving the queue to the next leader
// (which gets a fresh connection).
func (w *writer) Lead(l *groupcommit.Leadership[job]) {
	var conn *pgxpool.Conn
	defer func() {
		if conn != nil {
			conn.Release()
		}
	}()
	for g := l.Next(); g != nil; g = l.Next() {
		if conn == nil {
			var err error
			if conn, err = w.db.pool.Acquire(context.Background()); err != nil {
				// No connection: fail what is queued now rather than let
				// each waiter try in turn, and report the cause.
				err = w.db.readErr("acquire a connection for appends", err)
				for _, r := range g {
					r.Finish(err)
				}
				l.FailQueued(err)
				return
			}
		}
		// Lock order: by execution id, stable so that two batches of one
		// execution keep their queue order.
		slices.SortStableFunc(g, func(a, b *request) int { return strings.Compare(a.Item.batch.execID, b.Item.batch.execID) })
		w.commitGroup(conn.Conn(), l, g)
		if conn.Conn().IsClosed() {
			return
		}
	}
}

// close stops new submissions, takes every leadership for good once the
// current leaders are done, and commits everything still queued. The pool
// is the DB's to close.
func (w *writer) close() { w.q.Close() }

func (w *writer) stats() WriteStats {
	return WriteStats{
		Transactions: w.counters.txs.Load(),
		Batches:      w.counters.batches.Load(),
		Events:       w.counters.events.Load(),
	}
}

// ErrOutcomeUnknown matches the error of an append whose commit may or may
// not have happened: the connection failed (or the server ended it) after
// the batch was sent and before the commit was confirmed. The caller must
// read the log to learn whether its events are there; retrying the same
// Append is safe, since a landed batch makes it a *store.SequenceConflictError.
var ErrOutcomeUnknown = errors.New("postgres: append outcome unknown")

// outcomeUnknown wraps err, the failure of a commit in doubt.
func outcomeUnknown(err error) error {
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}
