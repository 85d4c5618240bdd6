package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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

// request is one unit of work on the write connection: an append batch,
// which may share a transaction with others, or an op that runs alone.
type request struct {
	state atomic.Int32
	done  chan struct{} // closed once err is final
	err   error
	batch *appendBatch
	op    func(c *rawConn) error
	bytes int
}

// writer owns the write connection and commits appends in groups. There
// is no writer goroutine: the caller that finds the connection free becomes
// the leader and, on its own goroutine, commits its batch together with
// every batch queued meanwhile; the others wait for their result or for the
// leadership. So a lone appender commits on its own goroutine, with no
// hand-off, and N concurrent appenders share one commit (and one fsync).
//
// The leadership is a token, a channel of capacity one. The leader alone
// touches the connection and the state below marked "leader only".
type writer struct {
	queue    chan *request
	token    chan struct{}
	mu       sync.RWMutex // held for reading while a caller enqueues
	closed   bool
	stopping chan struct{} // closed first by close, unblocks enqueuers
	conn     *sql.Conn
	wake     *store.Broadcaster
	counters struct{ txs, batches, events atomic.Int64 }

	c     *rawConn   // leader only: prepared statements and length cache
	carry *request   // leader only: taken but left for the next transaction
	buf   []*request // leader only: the group being built
}

func newWriter(conn *sql.Conn, wake *store.Broadcaster) *writer {
	return &writer{
		queue:    make(chan *request, MaxQueuedBatches),
		token:    make(chan struct{}, 1),
		stopping: make(chan struct{}),
		conn:     conn,
		wake:     wake,
		buf:      make([]*request, 0, MaxGroupBatches),
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

// run submits an op that executes alone on the write connection.
func (w *writer) run(ctx context.Context, op func(c *rawConn) error) error {
	return w.submit(ctx, &request{op: op})
}

// maxExtraGroups is how many more transactions a leader commits for others
// once its own request is done, before it hands the leadership on: a bound
// on its caller's latency that still saves most hand-offs under load.
const maxExtraGroups = 4

// lead runs, with the token held, transactions for what is queued until the
// queue is empty, or until mine is done (at once if mine is nil) and extra
// more transactions have run; a negative extra means until the queue is
// empty.
func (w *writer) lead(mine *request, extra int) {
	err := w.conn.Raw(func(dc any) error {
		if err := w.bind(dc); err != nil {
			return err
		}
		for {
			if extra == 0 && (mine == nil || isDone(mine)) {
				return nil
			}
			r := w.take()
			if r == nil {
				return nil
			}
			if r.op != nil {
				finish(r, r.op(w.c))
			} else {
				g := group{reqs: append(w.buf[:0], r), size: r.bytes}
				w.commitGroup(w.c, &g, true)
				w.carry = g.carry
				clear(g.reqs)
			}
			if extra > 0 && (mine == nil || isDone(mine)) {
				extra--
			}
		}
	})
	if err != nil {
		// The connection is unusable: fail what waits rather than leave it.
		err = fmt.Errorf("sqlite: writer unavailable: %w", err)
		for r := w.take(); r != nil; r = w.take() {
			finish(r, err)
		}
	}
}

// bind lends the driver connection of this Raw call to the leader's
// rawConn, creating it on first use. The sql.Conn pins one driver
// connection for its life, so statements prepared by an earlier leader
// stay valid; they are only ever used inside a Raw call.
func (w *writer) bind(dc any) error {
	if w.c == nil {
		c, err := newRawConn(dc)
		if err != nil {
			return err
		}
		if c.lengths, err = newLengthCache(dc); err != nil {
			return err
		}
		w.c = c
	}
	return nil
}

// take returns the carried request or the next live queued one, marked
// taken, or nil when there is none.
func (w *writer) take() *request {
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

func isDone(r *request) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// close stops new submissions, takes the leadership for good once the
// current leader is done, commits everything still queued, and closes the
// connection.
func (w *writer) close() error {
	close(w.stopping)
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.token <- struct{}{}
	w.lead(nil, -1)
	var err error
	if w.c != nil {
		err = w.conn.Raw(func(any) error { return w.c.close() })
	}
	return errors.Join(err, w.conn.Close())
}

func (w *writer) stats() WriteStats {
	return WriteStats{
		Transactions: w.counters.txs.Load(),
		Batches:      w.counters.batches.Load(),
		Events:       w.counters.events.Load(),
	}
}

func finish(r *request, err error) {
	r.err = err
	close(r.done)
}

// group is the appends of one transaction, cut at MaxGroupBatches and
// MaxGroupBytes. carry is a request taken from the queue but left for the
// next transaction: an op, or a batch that would pass MaxGroupBytes.
type group struct {
	reqs  []*request
	size  int
	carry *request
}

// drain moves what is queued into g without waiting.
func (w *writer) drain(g *group) {
	for g.carry == nil && len(g.reqs) < MaxGroupBatches {
		select {
		case n := <-w.queue:
			if !n.state.CompareAndSwap(stateQueued, stateTaken) {
				continue
			}
			if n.op != nil || g.size+n.bytes > MaxGroupBytes {
				g.carry = n
				return
			}
			g.reqs = append(g.reqs, n)
			g.size += n.bytes
		default:
			return
		}
	}
}

// commitGroup commits the batches of g in one transaction. A batch refused by its fence or its expected sequence
// gets its typed error and is left out; the others commit together. If
// anything else fails (I/O, a full disk, a row SQLite refuses), the
// transaction is rolled back and each batch is retried alone, so one bad
// batch cannot fail its neighbours.
func (w *writer) commitGroup(c *rawConn, g *group, grow bool) {
	if err := c.begin(); err != nil {
		// Nothing was written and retrying alone would not help (the lock
		// is held elsewhere, or the file is gone): everyone gets the error.
		for _, r := range g.reqs {
			finish(r, err)
		}
		return
	}
	accepted := make([]*appendBatch, 0, len(g.reqs))
	pending := make(map[string]int64, len(g.reqs))
	err := w.writeGroup(c, g, grow, &accepted, pending)
	if err == nil {
		err = c.commit()
	}
	if err != nil {
		err = c.rollback(err)
	}
	if err != nil && len(g.reqs) > 1 {
		for _, r := range g.reqs {
			w.commitGroup(c, &group{reqs: []*request{r}}, false)
		}
		return
	}
	if err != nil {
		finish(g.reqs[0], err)
		return
	}
	for execID, n := range pending {
		c.lengths.set(execID, n)
	}
	if len(accepted) > 0 {
		w.counters.txs.Add(1)
	}
	for _, b := range accepted {
		w.counters.batches.Add(1)
		w.counters.events.Add(int64(b.n))
	}
	for _, r := range g.reqs {
		close(r.done)
	}
	for _, b := range accepted {
		w.wake.Notify(b.execID)
	}
}

// writeGroup claims and inserts the batches of g inside the open
// transaction, appending the accepted ones to accepted. With grow, it
// drains the queue after each round of inserts, so batches that arrive
// while the transaction is being written join its commit instead of waiting
// for the next one.
func (w *writer) writeGroup(c *rawConn, g *group, grow bool, accepted *[]*appendBatch, pending map[string]int64) error {
	for done := 0; done < len(g.reqs); {
		round := len(*accepted)
		for _, r := range g.reqs[done:] {
			refusal, err := claim(c, r.batch, pending)
			if err != nil {
				return err
			}
			r.err = refusal
			if refusal == nil {
				*accepted = append(*accepted, r.batch)
			}
		}
		done = len(g.reqs)
		if err := insertEvents(c, (*accepted)[round:]); err != nil {
			return err
		}
		if grow {
			w.drain(g)
		}
	}
	return nil
}
