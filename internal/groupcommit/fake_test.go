package groupcommit

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// fake is a Committer that records the groups it commits, as item lists,
// and finishes each request with result(item) (nil when result is nil).
// lead, when set, replaces the whole leadership.
type fake struct {
	mu     sync.Mutex
	groups [][]int
	result func(item int) error
	lead   func(f *fake, l *Leadership[int])
}

func (f *fake) Lead(l *Leadership[int]) {
	if f.lead != nil {
		f.lead(f, l)
		return
	}
	f.commitAll(l)
}

// commitAll is the plain leadership: every group committed and each of its
// requests finished with result(item).
func (f *fake) commitAll(l *Leadership[int]) {
	for g := l.Next(); g != nil; g = l.Next() {
		f.record(g)
		for _, r := range g {
			var err error
			if f.result != nil {
				err = f.result(r.Item)
			}
			r.Finish(err)
		}
	}
}

func (f *fake) record(g []*Request[int]) {
	items := make([]int, len(g))
	for i, r := range g {
		items[i] = r.Item
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = append(f.groups, items)
}

func (f *fake) committed() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.groups)
}

// limits are roomy defaults the tests narrow.
func limits() Limits {
	return Limits{Queued: 64, Leaders: 1, GroupRequests: 64, GroupBytes: 1 << 20, ExtraGroups: 4}
}

// holdAll takes every leadership of q, so that submitted requests pile up
// in the queue; release gives one back (the next leader then takes what is
// queued), and the rest are given back when the test ends.
func holdAll(t *testing.T, q *Queue[int]) (release func()) {
	t.Helper()
	for range q.lim.Leaders {
		q.tokens <- struct{}{}
	}
	var once sync.Once
	release = func() { once.Do(func() { <-q.tokens }) }
	t.Cleanup(func() {
		release()
		for range q.lim.Leaders - 1 {
			<-q.tokens
		}
	})
	return release
}

// awaitQueued spins until n requests wait in q. The leaderships are held,
// so the count only grows; no clock is involved.
func awaitQueued(q *Queue[int], n int) {
	for len(q.queue) < n {
		runtime.Gosched()
	}
}

// submitAsync starts a Submit (SubmitAlone when size < 0) and returns its
// result channel.
func submitAsync(ctx context.Context, q *Queue[int], item, size int) <-chan error {
	ch := make(chan error, 1)
	go func() {
		if size < 0 {
			ch <- q.SubmitAlone(ctx, item)
			return
		}
		ch <- q.Submit(ctx, item, size)
	}()
	return ch
}

// queueInOrder submits items one at a time, each queued before the next
// starts, so their queue order is the slice order; sizes[i] < 0 submits
// items[i] alone. The leaderships must be held.
func queueInOrder(ctx context.Context, q *Queue[int], items, sizes []int) []<-chan error {
	chs := make([]<-chan error, len(items))
	for i, it := range items {
		chs[i] = submitAsync(ctx, q, it, sizes[i])
		awaitQueued(q, i+1)
	}
	return chs
}

// newQueued builds a request as submit does, for tests that enqueue
// directly and drive lead themselves.
func newQueued(t *testing.T, q *Queue[int], item, size int) *Request[int] {
	t.Helper()
	r := &Request[int]{Item: item, size: size, done: make(chan struct{})}
	if err := q.enqueue(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func wantGroups(t *testing.T, f *fake, want [][]int) {
	t.Helper()
	got := f.committed()
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("committed groups %v, want %v", got, want)
	}
}

func wantNil(t *testing.T, chs []<-chan error) {
	t.Helper()
	for i, ch := range chs {
		if err := <-ch; err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from+1)
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
