package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/loom-kernel/loom/store"
)

// ChangePollInterval is how often a DB with followers (open
// subscriptions) checks whether another connection — another DB on the same
// file, in this process or another — committed: it reads PRAGMA
// data_version, which changes exactly when another connection has
// committed, and on a change wakes every follower, which re-reads its log.
// So an append made elsewhere reaches a subscriber within about one
// interval; an append through this DB wakes its followers at once, on its
// commit. While nothing is followed nothing is polled.
const ChangePollInterval = 50 * time.Millisecond

// changePoller is a DB's one watcher of commits made by other connections.
// It runs while the DB has followers: the first subscription starts it, the
// end of the last one stops it, and DB.Close stops it and waits for it. It
// polls on a connection of its own (data_version is per connection), so it
// never takes one from the read pool.
type changePoller struct {
	dsn      string
	interval time.Duration
	wake     *store.Broadcaster

	mu        sync.Mutex
	followers int
	stop      chan struct{} // closed to end the running poller; nil when none runs
	closed    bool
	runs      sync.WaitGroup
}

func newChangePoller(dsn string, interval time.Duration, wake *store.Broadcaster) *changePoller {
	return &changePoller{dsn: dsn, interval: interval, wake: wake}
}

// follow registers a follower, starting the poller for the first one, and
// returns the function that unregisters it (safe to call more than once).
// It refuses with store.ErrClosed once close has begun.
func (p *changePoller) follow() (unfollow func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, store.ErrClosed
	}
	p.followers++
	if p.followers == 1 {
		p.stop = make(chan struct{})
		p.runs.Add(1)
		go p.run(p.stop)
	}
	var once sync.Once
	return func() { once.Do(p.unfollow) }, nil
}

func (p *changePoller) unfollow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followers--
	if p.followers == 0 && p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
}

// close stops the poller for good and waits until it has exited and closed
// its connection.
func (p *changePoller) close() {
	p.mu.Lock()
	p.closed = true
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
	p.mu.Unlock()
	p.runs.Wait()
}

// run polls until stop is closed. Its first successful reading wakes every
// follower unconditionally: a commit made before it, after a follower's
// read, would otherwise go unseen, as no earlier reading exists to differ
// from. So does the first reading after a failed one. Later readings wake
// them when the version moved.
func (p *changePoller) run(stop <-chan struct{}) {
	defer p.runs.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var (
		conn  *sql.Conn
		pool  *sql.DB
		last  int64
		known bool
	)
	defer func() {
		if conn != nil {
			_ = conn.Close() // a read-only connection: nothing to lose
		}
		if pool != nil {
			_ = pool.Close()
		}
	}()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		if conn == nil {
			pool, conn = p.connect(ctx, pool)
		}
		if conn != nil {
			var v int64
			if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
				// Retried on a fresh connection at the next tick; until a
				// reading succeeds, a change cannot be ruled out.
				_ = conn.Close()
				conn, known = nil, false
			} else {
				if !known || v != last {
					p.wake.NotifyAll()
				}
				last, known = v, true
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// connect opens the poller's connection (and its one-connection pool, the
// first time), or returns a nil connection to retry at the next tick.
func (p *changePoller) connect(ctx context.Context, pool *sql.DB) (*sql.DB, *sql.Conn) {
	if pool == nil {
		var err error
		if pool, err = openPool(p.dsn); err != nil {
			return nil, nil
		}
		pool.SetMaxOpenConns(1)
		pool.SetMaxIdleConns(1)
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		return pool, nil
	}
	return pool, conn
}
