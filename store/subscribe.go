package store

import (
	"context"
	"errors"
	"sync"

	"github.com/loom-kernel/loom/event"
)

// Broadcaster wakes the followers of an execution when its log grows. A store
// calls Notify after an append is durable; Follow calls Wait before each
// read, so a wake-up between the read and the wait is never lost.
type Broadcaster struct {
	mu    sync.Mutex
	waits map[string]chan struct{}
}

// Wait returns a channel closed by the next Notify of executionID.
func (b *Broadcaster) Wait(executionID string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waits == nil {
		b.waits = make(map[string]chan struct{})
	}
	ch, ok := b.waits[executionID]
	if !ok {
		ch = make(chan struct{})
		b.waits[executionID] = ch
	}
	return ch
}

// Notify wakes every current waiter of executionID.
func (b *Broadcaster) Notify(executionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.waits[executionID]; ok {
		close(ch)
		delete(b.waits, executionID)
	}
}

// NotifyAll wakes every current waiter of every execution. A store calls it
// from Close, after it starts refusing reads with ErrClosed, so that each idle
// follower re-reads, gets ErrClosed and ends instead of waiting forever for an
// append that will never come.
func (b *Broadcaster) NotifyAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, ch := range b.waits {
		close(ch)
		delete(b.waits, id)
	}
}

// Subscription delivers a log's events in order until it is closed, its
// context ends, or a read fails.
type Subscription struct {
	events chan event.Envelope
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Events is closed when the subscription ends; then Err says why.
func (s *Subscription) Events() <-chan event.Envelope { return s.events }

// Err returns the read error that ended the subscription, or nil after Close
// or the end of its context. It is valid once Events is closed.
func (s *Subscription) Err() error {
	<-s.done
	return s.err
}

// Close ends the subscription and waits for its goroutine to exit.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

// Follow builds a Subscription from a read function and a wake-up source:
// catch-up from from, then one re-read per wake-up. Delivery blocks only this
// subscriber, never the writer.
func Follow(ctx context.Context, read func(ctx context.Context, from int64) ([]event.Envelope, error),
	wait func() <-chan struct{}, from int64) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{events: make(chan event.Envelope), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.events)
		next := from
		for {
			woken := wait()
			evs, err := read(ctx, next)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					s.err = err
				}
				return
			}
			for _, e := range evs {
				select {
				case s.events <- e:
					next = e.Sequence + 1
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-woken:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}
