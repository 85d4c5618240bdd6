package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/store"
)

// Request states. A request moves from queued to taken when a leader picks
// it up, or to canceled when its caller gives up first; whichever CAS wins
// decides whether the write happens.
const (
	stateQueued int32 = iota
	stateTaken
	stateCanceled
)

// maxRechecks bounds how often a refused batch whose state read says it
// would now be accepted is tried again before it is refused anyway.
const maxRechecks = 3

// request is one Append waiting for its commit.
type request struct {
	state    atomic.Int32
	done     chan struct{} // closed once err is final
	err      error
	batch    *appendBatch
	bytes    int
	rechecks int // leader only
}

// writer commits appends in groups. There is no writer goroutine: the
// caller that finds the leadership free becomes the leader and, on its own
// goroutine, commits its batch together with every batch queued meanwhile,
// in ONE transaction on one pooled connection; the others wait for their
// result or for the leadership. So a lone appender commits on its own
// goroutine with no hand-off, and N concurrent appenders (of any
// executions) share one commit, one WAL flush and one round trip.
//
// The leadership is a token, a channel of capacity maxLeaders: up to that
// many groups are in flight at once, each on its own connection. Each
// group takes its execution rows' locks in execution-id order, so groups
// that meet on the same rows (here or in another process) wait for each
// other instead of deadlocking.
type writer struct {
	db       *DB
	queue    chan *request
	token    chan struct{}
	mu       sync.RWMutex // held for reading while a caller enqueues
	closed   bool
	stopping chan struct{} // closed first by close, unblocks enqueuers
	counters struct{ txs, batches, events atomic.Int64 }

	lmu   sync.Mutex // guards again and carry, shared by the leaders
	again []*request // refused batches to try once more
	carry *request   // taken but left for the next group
}

// maxLeaders is how many groups may be in flight at once, each led by its
// own caller on its own connection. Two let one group execute its
// statements while the previous one commits (its WAL flush, and the
// NOTIFY queue lock PostgreSQL holds through a notifying commit), instead
// of the queue waiting for both.
const maxLeaders = 2

func newWriter(db *DB) *writer {
	return &writer{
		db:       db,
		queue:    make(chan *request, MaxQueuedBatches),
		token:    make(chan struct{}, maxLeaders),
		stopping: make(chan struct{}),
	}
}

// submit queues r and returns its result. If ctx ends before a leader has
// taken r, submit returns ctx.Err() and r is never written; once taken, it
// waits for the outcome, so a nil return always means committed.
func (w *writer) submit(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	if err := w.enqueue(ctx, r); err != nil {
		return err
	}
	ctxDone := ctx.Done()
	for {
		select {
		case <-r.done:
			return r.err
		case w.token <- struct{}{}:
			w.lead(r, maxExtraGroups)
			<-w.token
		case <-ctxDone:
			if r.state.CompareAndSwap(stateQueued, stateCanceled) {
				return ctx.Err()
			}
			ctxDone = nil // taken: wait for the outcome like everyone else
		}
	}
}

// enqueue puts r in the queue. When the queue is full, the caller may take
// the leadership and drain it rather than wait for someone else to.
func (w *writer) enqueue(ctx context.Context, r *request) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return store.ErrClosed
	}
	for {
		select {
		case w.queue <- r:
			return nil
		default:
		}
		select {
		case w.queue <- r:
			return nil
		case w.token <- struct{}{}:
			w.lead(nil, 1) // one transaction frees room
			<-w.token
		case <-ctx.Done():
			return ctx.Err()
		case <-w.stopping:
			return store.ErrClosed
		}
	}
}

// maxExtraGroups is how many more transactions a leader commits for others
// once its own request is done, before it hands the leadership on: a bound
// on its caller's latency that still saves most hand-offs under load.
const maxExtraGroups = 4

// lead runs, with the token held, one transaction per group of what is
// queued until the queue is empty, or until mine is done (at once if mine
// is nil) and extra more transactions have run; a negative extra means
// until the queue is empty. It acquires one pooled connection once there is
// work and holds it meanwhile, and stops early if that connection breaks,
// leaving the queue to the next leader (which gets a fresh connection).
func (w *writer) lead(mine *request, extra int) {
	var conn *pgxpool.Conn
	defer func() {
		if conn != nil {
			conn.Release()
		}
	}()
	for {
		if extra == 0 && (mine == nil || isDone(mine)) {
			return
		}
		g := w.gather()
		if len(g) == 0 {
			return
		}
		if conn == nil {
			var err error
			if conn, err = w.db.pool.Acquire(context.Background()); err != nil {
				// No connection: fail what is queued now rather than let
				// each waiter try in turn, and report the cause.
				err = w.db.readErr("acquire a connection for appends", err)
				for _, r := range g {
					finish(r, err)
				}
				for r := w.take(); r != nil; r = w.take() {
					finish(r, err)
				}
				return
			}
		}
		w.commitGroup(conn.Conn(), g)
		if conn.Conn().IsClosed() {
			return
		}
		if extra > 0 && (mine == nil || isDone(mine)) {
			extra--
		}
	}
}

// take returns a request to retry, the carried one, or the next live
// queued one, marked taken, or nil when there is none.
func (w *writer) take() *request {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	return w.takeLocked()
}

func (w *writer) takeLocked() *request {
	if n := len(w.again); n > 0 {
		r := w.again[0]
		w.again = w.again[1:]
		return r
	}
	if r := w.carry; r != nil {
		w.carry = nil
		return r
	}
	for {
		select {
		case r := <-w.queue:
			if r.state.CompareAndSwap(stateQueued, stateTaken) {
				return r
			}
		default:
			return nil
		}
	}
}

// gather takes the next group without waiting: up to MaxGroupBatches
// requests and MaxGroupBytes of payload (a larger request goes alone).
func (w *writer) gather() []*request {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	var g []*request
	size := 0
	for len(g) < MaxGroupBatches {
		r := w.takeLocked()
		if r == nil {
			break
		}
		if len(g) > 0 && size+r.bytes > MaxGroupBytes {
			w.carry = r
			break
		}
		g = append(g, r)
		size += r.bytes
	}
	// Lock order: by execution id, stable so that two batches of one
	// execution keep their queue order.
	slices.SortStableFunc(g, func(a, b *request) int { return strings.Compare(a.batch.execID, b.batch.execID) })
	return g
}

// retryLater hands requests to the next group.
func (w *writer) retryLater(rs ...*request) {
	w.lmu.Lock()
	defer w.lmu.Unlock()
	w.again = append(w.again, rs...)
}

func isDone(r *request) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func finish(r *request, err error) {
	r.err = err
	close(r.done)
}

// close stops new submissions, takes every leadership for good once the
// current leaders are done, and commits everything still queued. The pool
// is the DB's to close.
func (w *writer) close() {
	close(w.stopping)
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	for range maxLeaders {
		w.token <- struct{}{}
	}
	w.lead(nil, -1)
}

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
