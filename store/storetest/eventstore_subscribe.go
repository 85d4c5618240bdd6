package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// subscribe runs the store.Subscriber subtests. Each ends by closing the
// store and checking, with goleak, that no goroutine started during the
// subtest (by the store or a subscription) is left.
func (k eventKit) subscribe(t *testing.T) {
	t.Run("CatchUpThenLive", k.subscribeCatchUpThenLive)
	t.Run("FromMiddle", k.subscribeFromMiddle)
	t.Run("FromBeyondEnd", k.subscribeFromBeyondEnd)
	t.Run("CloseEnds", k.subscribeCloseEnds)
	t.Run("ContextCancelEnds", k.subscribeContextCancelEnds)
	t.Run("StoreCloseEnds", k.subscribeStoreCloseEnds)
}

// openSubscriber opens a store, skipping the subtest unless it is a
// store.Subscriber, and returns the goroutine snapshot taken before it.
func (k eventKit) openSubscriber(t *testing.T) (store.EventStore, store.Subscriber, goleak.Option) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	s := k.open(t)
	sub, ok := s.(store.Subscriber)
	if !ok {
		t.Skip("store does not implement store.Subscriber")
	}
	return s, sub, before
}

// closeAndVerifyNoLeak closes s and fails the test if a goroutine started
// since before is still running.
func closeAndVerifyNoLeak(t *testing.T, s store.EventStore, before goleak.Option) {
	t.Helper()
	closeStore(t, s)
	goleak.VerifyNone(t, before)
}

// mustSubscribe subscribes and fails the test on an error.
func mustSubscribe(t *testing.T, ctx context.Context, sub store.Subscriber, exec string, from int64) *store.Subscription {
	t.Helper()
	sn, err := sub.Subscribe(ctx, exec, from)
	if err != nil {
		t.Fatalf("Subscribe(%q, %d): %v", exec, from, err)
	}
	if sn == nil {
		t.Fatalf("Subscribe(%q, %d) returned a nil subscription", exec, from)
	}
	return sn
}

// receive requires the next events of sn to be exactly want, in order.
func receive(t *testing.T, sn *store.Subscription, want []event.Envelope) {
	t.Helper()
	guard := time.NewTimer(waitTimeout)
	defer guard.Stop()
	for _, w := range want {
		select {
		case e, ok := <-sn.Events():
			if !ok {
				t.Fatalf("subscription ended (Err %v) before sequence %d", sn.Err(), w.Sequence)
			}
			if d := envelopeDiff(e, w); d != "" {
				t.Fatalf("subscription delivered %s at sequence %d", d, w.Sequence)
			}
		case <-guard.C:
			t.Fatalf("no event at sequence %d within %v", w.Sequence, waitTimeout)
		}
	}
}

// awaitEnd drains sn until its Events channel is closed and returns Err.
func awaitEnd(t *testing.T, sn *store.Subscription) error {
	t.Helper()
	guard := time.NewTimer(waitTimeout)
	defer guard.Stop()
	for {
		select {
		case _, ok := <-sn.Events():
			if !ok {
				return sn.Err()
			}
		case <-guard.C:
			t.Fatalf("subscription did not end within %v", waitTimeout)
		}
	}
}

// subscribeCatchUpThenLive: a subscription from 0 first delivers the stored
// events, then each append as it lands, in order with no gap or duplicate;
// two subscribers of one log each get everything from their start.
func (k eventKit) subscribeCatchUpThenLive(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-sub"
	all := batchAt(exec, 0, 12)
	mustAppend(t, s, exec, 0, all[:2])
	mustAppend(t, s, exec, 2, all[2:5])
	ctx := context.Background()
	a := mustSubscribe(t, ctx, sub, exec, 0)
	b := mustSubscribe(t, ctx, sub, exec, 2)
	receive(t, a, all[:5])
	mustAppend(t, s, exec, 5, all[5:6])
	receive(t, a, all[5:6])
	mustAppend(t, s, exec, 6, all[6:9])
	mustAppend(t, s, exec, 9, all[9:10])
	receive(t, a, all[6:10])
	receive(t, b, all[2:10])
	mustAppend(t, s, exec, 10, all[10:12])
	mustAppend(t, s, "exec-other", 0, batchAt("exec-other", 0, 1))
	receive(t, a, all[10:12])
	receive(t, b, all[10:12])
	a.Close()
	b.Close()
	if err := a.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	closeAndVerifyNoLeak(t, s, before)
}

// subscribeFromMiddle: a subscription from sequence 4 starts there.
func (k eventKit) subscribeFromMiddle(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-mid"
	all := batchAt(exec, 0, 12)
	mustAppend(t, s, exec, 0, all[:10])
	sn := mustSubscribe(t, context.Background(), sub, exec, 4)
	receive(t, sn, all[4:10])
	mustAppend(t, s, exec, 10, all[10:])
	receive(t, sn, all[10:])
	sn.Close()
	closeAndVerifyNoLeak(t, s, before)
}

// subscribeFromBeyondEnd: a subscription from a sequence the log has not
// reached (of an execution that does not exist yet) delivers nothing before
// it, then the events from it on.
func (k eventKit) subscribeFromBeyondEnd(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-future"
	all := batchAt(exec, 0, 5)
	sn := mustSubscribe(t, context.Background(), sub, exec, 3)
	mustAppend(t, s, exec, 0, all[:2])
	mustAppend(t, s, exec, 2, all[2:])
	receive(t, sn, all[3:])
	sn.Close()
	closeAndVerifyNoLeak(t, s, before)
}

// subscribeCloseEnds: Subscription.Close ends delivery at once, with a nil
// Err, and later appends are unaffected.
func (k eventKit) subscribeCloseEnds(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-close"
	mustAppend(t, s, exec, 0, batchAt(exec, 0, 3))
	sn := mustSubscribe(t, context.Background(), sub, exec, 0)
	receive(t, sn, batchAt(exec, 0, 1))
	sn.Close()
	if _, ok := <-sn.Events(); ok {
		t.Fatal("Events delivered after Close returned")
	}
	if err := sn.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil", err)
	}
	mustAppend(t, s, exec, 3, batchAt(exec, 3, 1))
	closeAndVerifyNoLeak(t, s, before)
}

// subscribeContextCancelEnds: cancelling the context ends the subscription
// with a nil Err, whether it is idle or blocked delivering.
func (k eventKit) subscribeContextCancelEnds(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-cancel"
	mustAppend(t, s, exec, 0, batchAt(exec, 0, 3))

	idleCtx, cancelIdle := context.WithCancel(context.Background())
	idle := mustSubscribe(t, idleCtx, sub, exec, 0)
	receive(t, idle, batchAt(exec, 0, 3))
	busyCtx, cancelBusy := context.WithCancel(context.Background())
	busy := mustSubscribe(t, busyCtx, sub, exec, 0) // never read: blocked delivering

	cancelIdle()
	if err := awaitEnd(t, idle); err != nil {
		t.Fatalf("idle subscription: Err after cancel = %v, want nil", err)
	}
	cancelBusy()
	if err := awaitEnd(t, busy); err != nil {
		t.Fatalf("busy subscription: Err after cancel = %v, want nil", err)
	}
	closeAndVerifyNoLeak(t, s, before)
}

// subscribeStoreCloseEnds: closing the store ends an open subscription; its
// Err is nil or matches store.ErrClosed.
func (k eventKit) subscribeStoreCloseEnds(t *testing.T) {
	s, sub, before := k.openSubscriber(t)
	const exec = "exec-storeclose"
	mustAppend(t, s, exec, 0, batchAt(exec, 0, 2))
	sn := mustSubscribe(t, context.Background(), sub, exec, 0)
	receive(t, sn, batchAt(exec, 0, 2))
	closeStore(t, s)
	if err := awaitEnd(t, sn); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Err after the store closed = %v, want nil or store.ErrClosed", err)
	}
	goleak.VerifyNone(t, before)
}
