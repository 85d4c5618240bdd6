package crashtest

import (
	"context"
	"errors"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Follow follows execution id's log in inner (the store under fault) until
// the execution ends or fault kills the process, calling parked, when not
// nil, each time the folded state is suspended — to answer a gate through
// the dying runtime, so the answer is an append point too. An error of
// parked after the kill is the kill's doing and ignored. inner must
// implement store.Subscriber.
func Follow(ctx context.Context, fault *FaultStore, inner store.EventStore, id string, parked func(fold.State) error) error {
	s, ok := inner.(store.Subscriber)
	if !ok {
		return errors.New("crashtest: the event store must implement store.Subscriber")
	}
	sub, err := s.Subscribe(ctx, id, 0)
	if err != nil {
		return err
	}
	defer sub.Close()
	f := fold.NewFolder(fold.Initial())
	for {
		select {
		case <-fault.Killed():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
			f.Apply(e)
			st := f.Peek()
			switch {
			case st.Status.Terminal():
				return nil
			case st.Status == fold.StatusSuspended && parked != nil:
				if err := parked(*st); err != nil && !fault.Dead() {
					return err
				}
			}
		}
	}
}
