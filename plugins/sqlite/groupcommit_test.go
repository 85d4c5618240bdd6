package sqlite

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
)

// holdWriter parks a leader inside an op until the returned release is
// called, so a test can queue requests and know the next leader will drain
// them as one group. It returns once the leader is parked.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	parked, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.w.run(context.Background(), func(*rawConn) error {
			close(parked)
			<-gate
			return nil
		})
	}()
	<-parked
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(gate)
			if err := <-done; err != nil {
				t.Errorf("held op: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// awaitQueued spins until n requests wait in the writer's queue. The
// leadership is held, so the count only grows; no clock is involved.
func awaitQueued(db *DB, n int) {
	for len(db.w.queue) < n {
		runtime.Gosched()
	}
}

// appendAsync starts an Append and returns its result channel.
func appendAsync(ctx context.Context, s *EventStore, exec string, expected int64, evs []event.Envelope) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Append(ctx, exec, expected, evs) }()
	return ch
}

// The group-commit kit, on the SQLite writer: one leader at a time, held
// by parking it inside an op; a temporary trigger poisons rows.
func TestGroupCommitKit(t *testing.T) {
	writertest.Run(t, func(t *testing.T) writertest.Writer {
		db := openTestDB(t)
		return writertest.Writer{
			Store:  db.EventStore(),
			Stats:  kitStats(db),
			Hold:   func(t *testing.T) func() { return holdWriter(t, db) },
			Queued: func() int { return len(db.w.queue) },
			Poison: func(t *testing.T) {
				err := db.w.run(context.Background(), func(c *rawConn) error {
					_, err := c.exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON main.events
						WHEN NEW.event_type = 'POISON' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END`)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			IsPoisonError: func(err error) bool { return err != nil && strings.Contains(err.Error(), "poisoned row") },
		}
	})
}

// Once the writer has taken a request, cancelling its context no longer
// abandons it: the caller waits for, and gets, the real outcome.
func TestCancelAfterTakenWaitsForOutcome(t *testing.T) {
	db := openTestDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := db.w.run(ctx, func(*rawConn) error {
		cancel()
		return nil
	})
	if err != nil {
		t.Fatalf("run = %v, want nil: the op ran", err)
	}
}

// kitStats reads db's write counters for the group-commit kit.
func kitStats(db *DB) func() writertest.Stats {
	return func() writertest.Stats {
		st := db.WriteStats()
		return writertest.Stats{Transactions: st.Transactions, Batches: st.Batches, Events: st.Events}
	}
}
