package auditchain

import (
	"context"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ready is a wake-up that has always happened: the relay's read blocks on
// the inner subscription itself.
var ready = func() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Subscribe implements store.Subscriber: the inner store's subscription,
// relayed without the chain member. It ends as the inner one does (its
// error, such as store.ErrClosed, is Err's), and closing it ends the inner
// one.
func (s *EventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	innerCtx, cancel := context.WithCancel(ctx)
	in, err := s.inner.Subscribe(innerCtx, executionID, from)
	if err != nil {
		cancel()
		return nil, err
	}
	var once sync.Once
	read := func(ctx context.Context, _ int64) ([]event.Envelope, error) {
		// ctx is the relay's own: the inner subscription ends with it.
		once.Do(func() { context.AfterFunc(ctx, cancel) })
		select {
		case e, ok := <-in.Events():
			if !ok {
				cancel()
				if err := in.Err(); err != nil {
					return nil, err
				}
				return nil, context.Canceled
			}
			return []event.Envelope{strip(e)}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return store.Follow(ctx, read, func() <-chan struct{} { return ready }, from), nil
}
