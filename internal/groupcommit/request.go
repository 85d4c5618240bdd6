package groupcommit

import "sync/atomic"

// Request states. A request moves from queued to taken when a leader picks
// it up, or to canceled when its caller gives up first; whichever CAS wins
// decides whether the request is committed.
const (
	stateQueued int32 = iota
	stateTaken
	stateCanceled
)

// Request is one submitted item waiting for its commit. A Committer reads
// and may change Item (its own bookkeeping, such as a retry count) while
// the request is in its hands, and acknowledges it with Finish.
type Request[T any] struct {
	// Item is the store's work, as submitted.
	Item T

	state atomic.Int32
	done  chan struct{} // closed once err is final
	err   error
	size  int  // bytes, counted against Limits.GroupBytes
	alone bool // committed in a group of its own
}

// Finish acknowledges r: its caller's Submit returns err, nil meaning
// committed. The leader that took r calls it exactly once (a second call
// panics, closing a closed channel), after which it must not touch r.
func (r *Request[T]) Finish(err error) {
	r.err = err
	close(r.done)
}

// finished reports whether r has been acknowledged. A nil r, no request of
// the leader's own, counts as finished.
func (r *Request[T]) finished() bool {
	if r == nil {
		return true
	}
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
