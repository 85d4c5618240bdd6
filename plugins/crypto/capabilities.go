package crypto

import (
	"context"
	"fmt"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Subscribe implements store.Subscriber. The inner subscription is the
// wake-up source (so an append by another process wakes it as the inner
// store would); each delivery re-reads through this store, so the events
// delivered are opened. A read that fails (a *SealError) ends the
// subscription with that error.
func (s *EventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	innerCtx, cancel := context.WithCancel(ctx)
	in, err := s.inner.Subscribe(innerCtx, executionID, from)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &wakeups{ch: make(chan struct{})}
	go w.pump(in)
	var once sync.Once
	read := func(rctx context.Context, next int64) ([]event.Envelope, error) {
		// Follow's own context ends when the subscription does: end the
		// inner one with it, so no goroutine outlives the subscription.
		once.Do(func() { context.AfterFunc(rctx, func() { cancel(); in.Close() }) })
		evs, err := s.ReadFrom(rctx, executionID, next)
		if err == nil && len(evs) == 0 {
			if ended, ierr := w.ended(); ended {
				if ierr == nil {
					ierr = store.ErrClosed
				}
				return nil, ierr
			}
		}
		return evs, err
	}
	return store.Follow(ctx, read, w.wait, from), nil
}

// wakeups turns the inner subscription's deliveries into wake-ups.
type wakeups struct {
	mu   sync.Mutex
	ch   chan struct{} // closed at the next delivery
	done bool
	err  error
}

func (w *wakeups) pump(in *store.Subscription) {
	for range in.Events() {
		w.mu.Lock()
		close(w.ch)
		w.ch = make(chan struct{})
		w.mu.Unlock()
	}
	err := in.Err()
	w.mu.Lock()
	w.done, w.err = true, err
	close(w.ch)
	w.mu.Unlock()
}

func (w *wakeups) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *wakeups) ended() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done, w.err
}

// CopyPrefix implements store.PrefixCopier: the inner store copies the
// sealed bytes, atomically and byte for byte except for executionId, as it
// would a plain log (a trimmed prefix included). A sealed value keeps the
// execution it was sealed in (metadata.seal.exec) in its additional data,
// so the copy opens; the fork inherits its parent's subject from the copied
// sequence 0, and an erasure of that subject shreds both. With an Index,
// the fork is added under that subject first; an Add that fails refuses
// the copy with its error, copying nothing.
func (s *EventStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.index != nil {
		subject, err := s.SubjectOf(ctx, from)
		if err != nil {
			return err
		}
		if err := s.indexFirst(ctx, to, 0, subject); err != nil {
			return err
		}
	}
	if err := s.inner.CopyPrefix(ctx, from, to, through); err != nil {
		return err
	}
	s.subjects.drop(to)
	return nil
}

// TrimThrough implements store.PrefixTrimmer by forwarding it; sequence 0,
// which anchors the subject, always stays. An inner store that is not a
// store.PrefixTrimmer answers *MissingCapabilityError.
func (s *EventStore) TrimThrough(ctx context.Context, executionID string, through int64) error {
	tr, err := s.trimmer()
	if err != nil {
		return err
	}
	return tr.TrimThrough(ctx, executionID, through)
}

// TrimmedThrough implements store.PrefixTrimmer by forwarding it.
func (s *EventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	tr, err := s.trimmer()
	if err != nil {
		return 0, err
	}
	return tr.TrimmedThrough(ctx, executionID)
}

// ArchiveRange implements store.PrefixArchiver: the events move, sealed
// as the log holds them, into the archive beneath archive, which must be
// this log's NewArchiveStore (it opens them on ReadArchived). Another
// archive is refused with *store.ArchiveLayerError, writing nothing: the
// archive would otherwise hold sealed members it cannot open, or (as reads
// of this store return them) plaintext.
func (s *EventStore) ArchiveRange(ctx context.Context, archive store.ArchiveStore, executionID string, from, through int64) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	a, ok := archive.(*ArchiveStore)
	if !ok {
		return 0, &store.ArchiveLayerError{Store: "crypto.EventStore", Want: "crypto.NewArchiveStore(archive, ...)", Got: fmt.Sprintf("%T", archive)}
	}
	if a.closed.Load() {
		return 0, store.ErrClosed
	}
	return store.ArchiveRange(ctx, s.inner, a.inner, executionID, from, through)
}

func (s *EventStore) trimmer() (store.PrefixTrimmer, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	tr, ok := s.inner.(store.PrefixTrimmer)
	if !ok {
		return nil, &MissingCapabilityError{Store: "EventStore", Capability: "store.PrefixTrimmer"}
	}
	return tr, nil
}
