package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/loom-kernel/loom/internal/groupcommit"
	"github.com/loom-kernel/loom/store"
)

// job is one unit of work on the write connection: an append batch, which
// may share a transaction with others, or an op that runs alone.
type job struct {
	batch   *appendBatch
	op      func(c *rawConn) error
	refusal error // leader only: the batch's typed refusal in its group
}

// request is a job waiting in the writer's queue.
type request = groupcommit.Request[job]

// writer owns the write connection and commits appends in groups, through
// a groupcommit.Queue: the caller that finds the connection free becomes
// the leader and, on its own goroutine, commits its batch together with
// every batch queued meanwhile; the others wait for their result or for the
// leadership. So a lone appender commits on its own goroutine, with no
// hand-off, and N concurrent appenders share one commit (and one fsync).
//
// There is one leadership, so the leader alone touches the connection and
// the state below marked "leader only".
type writer struct {
	q        *groupcommit.Queue[job]
	queue    <-chan *request // q's queue, for its length in tests
	token    chan struct{}   // q's leadership token, held by tests
	conn     *sql.Conn
	wake     *store.Broadcaster
	counters struct{ txs, batches, events atomic.Int64 }

	c *rawConn // leader only: prepared statements and length cache
}

// maxExtraGroups bounds a leader's turn once its own request is done: it
// hands the leadership on after this many transactions counted from the
// one that finished its request (groupcommit.Limits.ExtraGroups), so at
// most three more for others: a bound on its caller's latency that still
// saves most hand-offs under load.
const maxExtraGroups = 4

func newWriter(conn *sql.Conn, wake *store.Broadcaster) *writer {
	w := &writer{conn: conn, wake: wake}
	w.q = groupcommit.New[job](w, groupcommit.Limits{
		Queued:        MaxQueuedBatches,
		Leaders:       1,
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

// run submits an op that executes alone on the write connection.
func (w *writer) run(ctx context.Context, op func(c *rawConn) error) error {
	return w.q.SubmitAlone(ctx, job{op: op})
}

// Lead implements groupcommit.Committer: with the leadership held, it runs
// a transaction per group, or the op of a group of one, until the
// leadership is over.
func (w *writer) Lead(l *groupcommit.Leadership[job]) {
	err := w.conn.Raw(func(dc any) error {
		if err := w.bind(dc); err != nil {
			return err
		}
		for g := l.Next(); g != nil; g = l.Next() {
			if op := g[0].Item.op; op != nil {
				g[0].Finish(op(w.c))
				continue
			}
			w.commitGroup(w.c, l, g)
		}
		return nil
	})
	if err != nil {
		// The connection is unusable: fail what waits rather than leave it.
		l.FailQueued(fmt.Errorf("sqlite: writer unavailable: %w", err))
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

// close stops new submissions, takes the leadership for good once the
// current leader is done, commits everything still queued, and closes the
// connection.
func (w *writer) close() error {
	w.q.Close()
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

// commitGroup commits the batches of g in one transaction; with l, it
// grows g with the batches queued while it writes (see writeGroup). A
// batch refused by its fence or its expected sequence gets its typed error
// and is left out; the others commit together. If anything else fails
// (I/O, a full disk, a row SQLite refuses), the transaction is rolled back
// and each batch is retried alone, so one bad batch cannot fail its
// neighbours.
func (w *writer) commitGroup(c *rawConn, l *groupcommit.Leadership[job], g []*request) {
	if err := c.begin(); err != nil {
		// Nothing was written and retrying alone would not help (the lock
		// is held elsewhere, or the file is gone): everyone gets the error.
		for _, r := range g {
			r.Finish(err)
		}
		return
	}
	accepted := make([]*appendBatch, 0, len(g))
	pending := make(map[string]int64, len(g))
	g, err := writeGroup(c, l, g, &accepted, pending)
	if err == nil {
		err = c.commit()
	}
	if err != nil {
		err = c.rollback(err)
	}
	if err != nil && len(g) > 1 {
		for _, r := range g {
			w.commitGroup(c, nil, []*request{r})
		}
		return
	}
	if err != nil {
		g[0].Finish(err)
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
	for _, r := range g {
		r.Finish(r.Item.refusal)
	}
	for _, b := range accepted {
		w.wake.Notify(b.execID)
	}
}

// writeGroup claims and inserts the batches of g inside the open
// transaction, appending the accepted ones to accepted, and returns g as
// written. With l, it grows g after each round of inserts, so batches that
// arrive while the transaction is being written join its commit instead of
// waiting for the next one.
func writeGroup(c *rawConn, l *groupcommit.Leadership[job], g []*request, accepted *[]*appendBatch, pending map[string]int64) ([]*request, error) {
	for done := 0; done < len(g); {
		round := len(*accepted)
		for _, r := range g[done:] {
			refusal, err := claim(c, r.Item.batch, pending)
			if err != nil {
				return g, err
			}
			r.Item.refusal = refusal
			if refusal == nil {
				*accepted = append(*accepted, r.Item.batch)
			}
		}
		done = len(g)
		if err := insertEvents(c, (*accepted)[round:]); err != nil {
			return g, err
		}
		if l != nil {
			g = l.Grow(g)
		}
	}
	return g, nil
}
