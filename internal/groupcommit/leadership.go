package groupcommit

import "slices"

// Leadership is one leader's turn, handed to Committer.Lead: it gives out
// the groups to commit and counts them against the leader's bound. It is
// valid only during that Lead call, and only on its goroutine.
type Leadership[T any] struct {
	q      *Queue[T]
	mine   *Request[T]   // the leader's own request; nil when it has none
	extra  int           // groups left to commit once mine is done; <0: no bound
	groups int           // groups handed out so far
	buf    []*Request[T] // the group being committed, reused by Next
}

// Next returns the next group to commit, marked taken: the requests handed
// back by Retry first, then one left out of the previous group, then the
// queue's, in order, up to Limits.GroupRequests requests and
// Limits.GroupBytes bytes (a request over GroupBytes, or submitted with
// SubmitAlone, goes alone). It returns nil when the leadership is over:
// nothing is queued, or the leader's own request is done and ExtraGroups
// groups have been committed since, the one that finished it included.
// Every call after the first counts the previous group as committed. The returned slice is reused by
// the next call; the requests in it are not.
func (l *Leadership[T]) Next() []*Request[T] {
	if l.groups > 0 && l.extra > 0 && l.mine.finished() {
		l.extra--
	}
	if l.extra == 0 && l.mine.finished() {
		return nil
	}
	clear(l.buf)
	g := l.q.gather(l.buf[:0])
	if len(g) == 0 {
		return nil
	}
	l.groups++
	l.buf = g
	return g
}

// Grow adds to g, the group Next last returned, what has been queued
// since, within the same bounds, and returns the grown group. A Committer
// that writes a group in rounds calls it between rounds, so requests that
// arrive while it writes share the commit instead of waiting for the next
// one.
func (l *Leadership[T]) Grow(g []*Request[T]) []*Request[T] {
	g = l.q.gather(g)
	l.buf = g
	return g
}

// Retry hands rs, taken and not finished, to the next group, ahead of
// everything queued; that group may be this leader's or, if it stops, a
// later one's.
func (l *Leadership[T]) Retry(rs ...*Request[T]) {
	l.q.lmu.Lock()
	defer l.q.lmu.Unlock()
	l.q.again = append(l.q.again, rs...)
}

// FailQueued finishes with err every request not yet taken, and those
// handed back or left out of a group. A leader calls it when it cannot
// commit at all (its connection is gone), so that the callers hear the
// cause at once rather than each trying in turn.
func (l *Leadership[T]) FailQueued(err error) {
	l.q.lmu.Lock()
	defer l.q.lmu.Unlock()
	for r, _ := l.q.takeLocked(); r != nil; r, _ = l.q.takeLocked() {
		r.Finish(err)
	}
}

// gather adds taken requests to g within the group bounds and returns it.
func (q *Queue[T]) gather(g []*Request[T]) []*Request[T] {
	size := 0
	for _, r := range g {
		size += r.size
	}
	q.lmu.Lock()
	defer q.lmu.Unlock()
	for len(g) < q.lim.GroupRequests && !(len(g) == 1 && g[0].alone) {
		r, retried := q.takeLocked()
		if r == nil {
			break
		}
		if len(g) > 0 && (r.alone || size+r.size > q.lim.GroupBytes) {
			q.putBackLocked(r, retried)
			break
		}
		g = append(g, r)
		size += r.size
	}
	return g
}

// takeLocked returns, marked taken, the first request handed back by
// Retry, else the carried one, else the next live queued one, or nil when
// there is none; retried reports the first case.
func (q *Queue[T]) takeLocked() (r *Request[T], retried bool) {
	if len(q.again) > 0 {
		r = q.again[0]
		q.again[0] = nil
		q.again = q.again[1:]
		return r, true
	}
	if r = q.carry; r != nil {
		q.carry = nil
		return r, false
	}
	for {
		select {
		case r = <-q.queue:
			if r.state.CompareAndSwap(stateQueued, stateTaken) {
				return r, false
			}
		default:
			return nil, false
		}
	}
}

// putBackLocked returns r, taken but left out of a full group, to be taken
// first by the next group after the requests still handed back. The carry
// slot is free unless r came from Retry while a carried request waits; r
// then goes back to the head of the retried ones, so neither is lost.
func (q *Queue[T]) putBackLocked(r *Request[T], retried bool) {
	if retried && q.carry != nil {
		q.again = slices.Insert(q.again, 0, r)
		return
	}
	q.carry = r
}
