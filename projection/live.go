package projection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/loom-kernel/loom/store"
)

// Live queries (issue 18, point 4): a read-model query kept up to date. A
// read model changes only when a projection applies a step, in this
// process or another that shares the store, so a live query re-runs its
// query when this process's Runner applied something and, for the other
// processes' writers, every poll interval, and delivers the page each
// time it differs from the last one delivered.
//
// A page is identified by its digest: a hash of its rows (kind, id,
// version, fields, doc) and its cursor. A client that reconnects with the
// digest of the page it holds is sent nothing until the page changes, so
// it never sees one page twice in a row.

// DefaultLivePoll is how often a live query re-reads the store when no
// Runner of this process told it of a change.
const DefaultLivePoll = time.Second

// QueryUpdate is one page of a live query, as it stood after a change.
type QueryUpdate struct {
	Page store.ReadModelPage
	// Digest identifies the page's content (PageDigest).
	Digest string
}

// LiveOptions configures WatchQuery.
type LiveOptions struct {
	// Held is the digest of the page the caller holds ("" for none): the
	// first page is sent only when it differs.
	Held string
	// Poll is the interval between re-reads; DefaultLivePoll when 0.
	Poll time.Duration
	// Changes, when set, is a Runner whose applies wake the query at once
	// (Runner.Changed); other writers are seen at the next poll.
	Changes *Runner
}

// PageDigest returns the digest of a page: equal for pages with the same
// rows at the same versions and the same documents, and the same cursor.
func PageDigest(p store.ReadModelPage) string {
	b, err := json.Marshal(p) // maps marshal in key order: deterministic
	if err != nil {
		return "" // never for a page a store returned: its docs are JSON
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// QueryWatch is a running live query: its pages arrive on Updates, the
// current one first, until it is closed, its context ends or a read fails.
type QueryWatch struct {
	updates chan QueryUpdate
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// Updates is closed when the watch ends; then Err says why.
func (w *QueryWatch) Updates() <-chan QueryUpdate { return w.updates }

// Err returns why the watch ended: nil after Close or the end of its
// context, else the store's error. Call it once Updates is closed.
func (w *QueryWatch) Err() error {
	<-w.done
	return w.err
}

// Close ends the watch and waits for its goroutine to exit.
func (w *QueryWatch) Close() {
	w.cancel()
	<-w.done
}

// WatchQuery runs q on models as a live query. q is validated first: an
// invalid query (a bad kind, field or cursor) is refused here with the
// store's *store.InvalidReadModelError, and nothing is read.
func WatchQuery(ctx context.Context, models store.ReadModelStore, q store.ReadModelQuery, opts LiveOptions) (*QueryWatch, error) {
	if models == nil {
		return nil, errors.New("projection: WatchQuery needs a read-model store")
	}
	q, err := store.ValidateReadModelQuery(q)
	if err != nil {
		return nil, err
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultLivePoll
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &QueryWatch{updates: make(chan QueryUpdate), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.updates)
		w.err = w.run(ctx, models, q, opts)
	}()
	return w, nil
}

func (w *QueryWatch) run(ctx context.Context, models store.ReadModelStore, q store.ReadModelQuery, opts LiveOptions) error {
	held := opts.Held
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	for {
		// Take the change signal before the read: an apply after the
		// read closes it, so no change falls between the two.
		var changed <-chan struct{}
		if opts.Changes != nil {
			changed = opts.Changes.Changed()
		}
		page, err := models.Query(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if d := PageDigest(page); d != held {
			select {
			case w.updates <- QueryUpdate{Page: page, Digest: d}:
				held = d
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// changes is a Runner's change signal: a channel closed, and replaced,
// each time the Runner applies rows.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel closed the next time this Runner applies a
// step that writes rows (a live query's wake-up).
func (r *Runner) Changed() <-chan struct{} {
	r.changes.mu.Lock()
	defer r.changes.mu.Unlock()
	if r.changes.ch == nil {
		r.changes.ch = make(chan struct{})
	}
	return r.changes.ch
}

func (r *Runner) changed() {
	r.changes.mu.Lock()
	defer r.changes.mu.Unlock()
	if r.changes.ch != nil {
		close(r.changes.ch)
		r.changes.ch = nil
	}
}
