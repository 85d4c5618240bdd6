package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// listener turns the schema's NOTIFY channel into wake-ups of the DB's
// store.Broadcaster, so a subscriber in this process learns of an append
// committed by any process. It runs one pgxlisten.Listener on a dedicated
// connection (not a pooled one: it is held for as long as the DB lives),
// started by the first Subscribe and stopped by DB.Close.
//
// Notifications are only a hint: store.Follow re-reads the log from its
// last delivered sequence on every wake-up, so a duplicate costs a read and
// a missed one is made good by the next read. Notifications can be missed
// only while the connection is down; every (re)connect therefore wakes every
// subscriber once it is LISTENing again (pgxlisten's backlog hook), and the
// re-read ticker covers a connection that hangs without failing.
type listener struct {
	db *DB

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    sync.WaitGroup

	// For tests: the backend pid of the current LISTEN connection, and a
	// count of LISTENs that took effect, with a channel closed at each.
	pid       atomic.Uint32
	listens   atomic.Int64
	listening chan struct{}
}

func newListener(db *DB) *listener {
	return &listener{db: db, listening: make(chan struct{})}
}

// start runs the listener and the re-read ticker unless they run already
// or the DB is closed.
func (l *listener) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	pl := &pgxlisten.Listener{
		Connect:        l.connect,
		LogError:       l.logError,
		ReconnectDelay: l.db.opts.ListenReconnectDelay,
	}
	pl.Handle(l.db.channel, l)
	l.done.Go(func() {
		// Listen returns only when ctx ends, with ctx.Err(): every other
		// failure is logged and followed by a reconnect.
		_ = pl.Listen(ctx)
	})
	if every := l.db.opts.RereadInterval; every > 0 {
		l.done.Go(func() { l.rereadEvery(ctx, every) })
	}
}

// stop ends the listener and the ticker and waits for their goroutines,
// which close the LISTEN connection. Later starts do nothing.
func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.done.Wait()
}

// connect opens the dedicated LISTEN connection with the pool's config.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.db.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

// logError reports a lost LISTEN connection or a failed reconnect; the
// errors of stopping are not news.
func (l *listener) logError(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	l.db.opts.Logger.Warn("postgres: LISTEN connection failed; reconnecting",
		"schema", l.db.schema, "channel", l.db.channel, "error", err)
}

// HandleNotification implements pgxlisten.Handler: the payload is the id
// of an execution whose log grew.
func (l *listener) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	l.db.wake.Notify(n.Payload)
	return nil
}

// HandleBacklog implements pgxlisten.BacklogHandler. pgxlisten calls it
// right after each LISTEN took effect, the first and every reconnect:
// whatever was committed while no LISTEN was in place is found by the
// re-read this wake-up causes, and everything committed later is notified.
func (l *listener) HandleBacklog(_ context.Context, _ string, _ *pgx.Conn) error {
	l.db.wake.NotifyAll()
	l.mu.Lock()
	l.listens.Add(1)
	close(l.listening)
	l.listening = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// listened returns the number of LISTENs that took effect so far and a
// channel closed at the next one (tests).
func (l *listener) listened() (int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listens.Load(), l.listening
}

// rereadEvery wakes every subscriber each interval until ctx ends.
func (l *listener) rereadEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.db.wake.NotifyAll()
		case <-ctx.Done():
			return
		}
	}
}
