package memstore

import (
	"context"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Subscribe follows the log of executionID from sequence from (a negative
// from means 0): first the events already stored, then each new one once its
// append is applied, in order, through store.Follow. The subscription ends
// when ctx ends or Subscription.Close is called (Err is nil), or when the
// store is closed (Err is store.ErrClosed). A slow subscriber delays only
// itself. An unknown execution is followed until it is created.
func (s *EventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if from < 0 {
		from = 0
	}
	read := func(ctx context.Context, from int64) ([]event.Envelope, error) {
		return s.ReadFrom(ctx, executionID, from)
	}
	wait := func() <-chan struct{} { return s.wake.Wait(executionID) }
	return store.Follow(ctx, read, wait, from), nil
}
