package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom/store"
)

// hangGuard bounds a test that waits for deliveries: a deadline, never an
// assertion on elapsed time.
func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// next receives the next event of sub and checks its sequence.
func next(ctx context.Context, t *testing.T, sub *store.Subscription, exec string, seq int64) {
	t.Helper()
	select {
	case e, ok := <-sub.Events():
		if !ok {
			t.Fatalf("%s: the subscription ended (%v) before #%d", exec, sub.Err(), seq)
		}
		if e.ExecutionID != exec || e.Sequence != seq {
			t.Fatalf("got %s #%d, want %s #%d", e.ExecutionID, e.Sequence, exec, seq)
		}
	case <-ctx.Done():
		t.Fatalf("%s #%d appended through another connection never arrived", exec, seq)
	}
}

// TestSubscribeSeesOtherConnectionsAppends opens two stores on one file —
// two DBs, two connection pools, as two processes would — subscribes
// through one and appends through the other: the subscriber receives every
// event, the catch-up and each live append, on a log that existed and on
// one created after the subscription. The appending DB never wakes the
// other's subscribers itself; only the data_version poller can.
func TestSubscribeSeesOtherConnectionsAppends(t *testing.T) {
	before := goleak.IgnoreCurrent()
	path := filepath.Join(t.TempDir(), "shared.db")
	follower := mustOpenEventStore(t, path)
	appender := mustOpenEventStore(t, path)
	t.Cleanup(func() { _, _ = follower.Close(), appender.Close() }) // after a failure; a second Close is harmless
	ctx := hangGuard(t)

	mustAppend(t, appender, "x", 0, batch("x", 0, 2))
	subX, err := follower.Subscribe(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	subY, err := follower.Subscribe(ctx, "y", 0) // no log yet
	if err != nil {
		t.Fatal(err)
	}
	next(ctx, t, subX, "x", 0)
	next(ctx, t, subX, "x", 1)
	for seq := int64(2); seq < 6; seq++ {
		mustAppend(t, appender, "x", seq, batch("x", seq, 1))
		next(ctx, t, subX, "x", seq)
		mustAppend(t, appender, "y", seq-2, batch("y", seq-2, 1))
		next(ctx, t, subY, "y", seq-2)
	}
	mustAppend(t, appender, "x", 6, batch("x", 6, 3))
	for seq := int64(6); seq < 9; seq++ {
		next(ctx, t, subX, "x", seq)
	}
	// Local appends still wake at once, beside the poller.
	mustAppend(t, follower, "y", 4, batch("y", 4, 1))
	next(ctx, t, subY, "y", 4)

	subX.Close()
	subY.Close()
	if subX.Err() != nil || subY.Err() != nil {
		t.Fatalf("Err after Close: %v, %v", subX.Err(), subY.Err())
	}
	// A later subscription starts the poller again.
	again, err := follower.Subscribe(ctx, "x", 9)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, appender, "x", 9, batch("x", 9, 1))
	next(ctx, t, again, "x", 9)

	for _, s := range []*EventStore{appender, follower} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range again.Events() {
	}
	if err := again.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Err after the store closed: %v", err)
	}
	goleak.VerifyNone(t, before)
}

// TestChangePollerRunsOnlyWhileFollowed: the poller starts with the first
// subscription, stops when the last one ends, and DB.Close stops it and
// waits for it, leaving no goroutine behind; a Subscribe after Close is
// refused with store.ErrClosed.
func TestChangePollerRunsOnlyWhileFollowed(t *testing.T) {
	before := goleak.IgnoreCurrent()
	db, err := Open(filepath.Join(t.TempDir(), "loom.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := db.EventStore()
	ctx := hangGuard(t)
	running := func() bool {
		db.changes.mu.Lock()
		defer db.changes.mu.Unlock()
		return db.changes.stop != nil
	}
	if running() {
		t.Fatal("a poller runs without followers")
	}
	subs := make([]*store.Subscription, 3)
	for i := range subs {
		if subs[i], err = s.Subscribe(ctx, "z", 0); err != nil {
			t.Fatal(err)
		}
	}
	if !running() {
		t.Fatal("no poller while subscriptions are open")
	}
	subs[0].Close()
	subs[1].Close()
	if !running() {
		t.Fatal("the poller stopped while a subscription is open")
	}
	subs[2].Close()
	// The unfollow runs once the subscription's goroutine has ended.
	for running() {
		select {
		case <-ctx.Done():
			t.Fatal("the poller still runs after the last subscription ended")
		case <-time.After(time.Millisecond):
		}
	}
	// Close while followed: it stops the poller and waits for it.
	cancelled, cancel := context.WithCancel(ctx)
	open, err := s.Subscribe(cancelled, "z", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if running() {
		t.Fatal("the poller runs after Close")
	}
	if _, err := s.Subscribe(ctx, "z", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want store.ErrClosed", err)
	}
	for range open.Events() {
	}
	cancel()
	goleak.VerifyNone(t, before)
}
