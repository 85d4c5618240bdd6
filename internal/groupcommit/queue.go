package groupcommit

import (
	"context"
	"fmt"
	"sync"

	"github.com/loom-kernel/loom/store"
)

// Limits bounds a Queue. Each is a bound on memory or latency; New panics
// on a value out of range, a programming error.
type Limits struct {
	// Queued caps the requests waiting for a leader (at least 1).
	Queued int
	// Leaders caps the leaderships held at once (at least 1).
	Leaders int
	// GroupRequests caps the requests of one group (at least 1).
	GroupRequests int
	// GroupBytes caps the bytes of one group (at least 1); a single request
	// larger than this is committed alone.
	GroupBytes int
	// ExtraGroups bounds a leader's turn once its own request is done: it
	// hands the leadership on when ExtraGroups groups, counted from the one
	// that finished its request, have been committed (at least 0; 0 and 1
	// both stop with its own group). A caller that leads only to make room
	// in a full queue commits one group.
	ExtraGroups int
}

// Committer is the store-specific half of a Queue: how a leader commits.
type Committer[T any] interface {
	// Lead runs one leadership, on the goroutine of the caller that holds
	// it. It calls l.Next for each group and commits the group, finishing
	// each of its requests (Request.Finish) or handing some back
	// (Leadership.Retry), until Next returns nil. It may stop early, when
	// it cannot go on (its connection broke): what is still queued is then
	// left to the next leader, or failed with Leadership.FailQueued. It
	// must not keep l or a group after it returns.
	Lead(l *Leadership[T])
}

// Queue commits submitted items in groups through a Committer; see the
// package documentation for its contract. It is safe for concurrent use.
type Queue[T any] struct {
	c        Committer[T]
	lim      Limits
	queue    chan *Request[T]
	tokens   chan struct{} // one per leadership held
	mu       sync.RWMutex  // held for reading while a caller enqueues
	closed   bool
	stopping chan struct{} // closed first by Close, unblocks enqueuers
	idle     chan *Leadership[T]

	lmu   sync.Mutex    // guards again and carry, shared by the leaders
	again []*Request[T] // taken, handed back by Retry: first in the next group
	carry *Request[T]   // taken but left out of a full group: next after again
}

// New returns an empty Queue that commits through c within lim.
func New[T any](c Committer[T], lim Limits) *Queue[T] {
	if lim.Queued < 1 || lim.Leaders < 1 || lim.GroupRequests < 1 || lim.GroupBytes < 1 || lim.ExtraGroups < 0 {
		panic(fmt.Sprintf("groupcommit: limits out of range: %+v", lim))
	}
	return &Queue[T]{
		c:        c,
		lim:      lim,
		queue:    make(chan *Request[T], lim.Queued),
		tokens:   make(chan struct{}, lim.Leaders),
		stopping: make(chan struct{}),
		idle:     make(chan *Leadership[T], lim.Leaders),
	}
}

// Submit queues item, which carries size bytes, and returns its outcome:
// nil once it is committed, or the error its Committer finished it with.
// If ctx ends before a leader has taken it, Submit returns ctx.Err() and
// the item is never committed; once taken, Submit waits for the outcome
// whatever ctx does. After Close it returns store.ErrClosed.
func (q *Queue[T]) Submit(ctx context.Context, item T, size int) error {
	return q.submit(ctx, &Request[T]{Item: item, size: size})
}

// SubmitAlone is Submit for an item committed in a group of its own (an
// operation that cannot share its transaction).
func (q *Queue[T]) SubmitAlone(ctx context.Context, item T) error {
	return q.submit(ctx, &Request[T]{Item: item, alone: true})
}

func (q *Queue[T]) submit(ctx context.Context, r *Request[T]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	if err := q.enqueue(ctx, r); err != nil {
		return err
	}
	ctxDone := ctx.Done()
	for {
		select {
		case <-r.done:
			return r.err
		case q.tokens <- struct{}{}:
			q.lead(r, q.lim.ExtraGroups)
			<-q.tokens
		case <-ctxDone:
			if r.state.CompareAndSwap(stateQueued, stateCanceled) {
				return ctx.Err()
			}
			ctxDone = nil // taken: wait for the outcome like everyone else
		}
	}
}

// enqueue puts r in the queue. When the queue is full, the caller may take
// a leadership and commit one group rather than wait for someone else to.
func (q *Queue[T]) enqueue(ctx context.Context, r *Request[T]) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return store.ErrClosed
	}
	for {
		select {
		case q.queue <- r:
			return nil
		default:
		}
		select {
		case q.queue <- r:
			return nil
		case q.tokens <- struct{}{}:
			q.lead(nil, 1) // one group frees room
			<-q.tokens
		case <-ctx.Done():
			return ctx.Err()
		case <-q.stopping:
			return store.ErrClosed
		}
	}
}

// lead runs one leadership, with a token held: groups until nothing is
// queued, or until mine is done (at once if mine is nil) and extra more
// groups are committed; a negative extra means until nothing is queued.
func (q *Queue[T]) lead(mine *Request[T], extra int) {
	var l *Leadership[T]
	select {
	case l = <-q.idle:
	default: // every token is held by a leader, so this is rare
		l = &Leadership[T]{q: q, buf: make([]*Request[T], 0, q.lim.GroupRequests)}
	}
	l.mine, l.extra, l.groups = mine, extra, 0
	q.c.Lead(l)
	clear(l.buf[:cap(l.buf)])
	l.mine = nil
	select {
	case q.idle <- l:
	default:
	}
}

// Close refuses new submissions, takes every leadership for good once the
// current leaders are done, and commits everything still queued as the
// last leader. A caller waiting for room in a full queue gets
// store.ErrClosed. Close must be called once; the Committer's own
// resources (a connection) are its caller's to release afterwards.
func (q *Queue[T]) Close() {
	close(q.stopping)
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	for range q.lim.Leaders {
		q.tokens <- struct{}{}
	}
	q.lead(nil, -1)
}

// Tokens returns the leadership tokens, a channel of capacity
// Limits.Leaders: sending takes a leadership, receiving gives it back. It
// is for tests, which hold every leadership so that submitted requests pile
// up in the queue and the next leader takes them as one group.
func (q *Queue[T]) Tokens() chan struct{} { return q.tokens }

// Waiting returns the queue itself, for tests to read its length: the
// requests waiting for a leader (a canceled one until a leader drops it).
// Nothing but the Queue may receive from it.
func (q *Queue[T]) Waiting() <-chan *Request[T] { return q.queue }
