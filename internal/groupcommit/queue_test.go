package groupcommit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom/store"
)

func TestLoneSubmitCommitsAsItsOwnLeader(t *testing.T) {
	f := &fake{}
	q := New[int](f, limits())
	defer q.Close()
	if err := q.Submit(context.Background(), 7, 1); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, f, [][]int{{7}})
}

func TestQueuedRequestsCommitAsOneGroupInQueueOrder(t *testing.T) {
	f := &fake{}
	q := New[int](f, limits())
	defer q.Close()
	release := holdAll(t, q)
	chs := queueInOrder(context.Background(), q, seq(1, 8), ones(8))
	release()
	wantNil(t, chs)
	wantGroups(t, f, [][]int{seq(1, 8)})
}

// A group is cut at GroupRequests or GroupBytes; a request over GroupBytes
// or submitted alone goes alone; what a cut leaves out opens the next group,
// so queue order holds across groups.
func TestGroupsAreCutAtTheirBounds(t *testing.T) {
	f := &fake{}
	lim := limits()
	lim.GroupRequests, lim.GroupBytes = 3, 10
	q := New[int](f, lim)
	defer q.Close()
	release := holdAll(t, q)
	//                  item: 1  2  3  4  5  6   7  8   9 10
	sizes := []int{4, 4, 4, 1, 1, 1, 20, 1, -1, 1}
	chs := queueInOrder(context.Background(), q, seq(1, 10), sizes)
	release()
	wantNil(t, chs)
	wantGroups(t, f, [][]int{{1, 2}, {3, 4, 5}, {6}, {7}, {8}, {9}, {10}})
}

func TestCanceledWhileQueuedIsNeverCommitted(t *testing.T) {
	f := &fake{}
	q := New[int](f, limits())
	defer q.Close()
	release := holdAll(t, q)
	bg := context.Background()
	ctx, cancel := context.WithCancel(bg)
	first := submitAsync(bg, q, 1, 1)
	awaitQueued(q, 1)
	canceled := submitAsync(ctx, q, 2, 1)
	awaitQueued(q, 2)
	last := submitAsync(bg, q, 3, 1)
	awaitQueued(q, 3)
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled while queued: %v, want context.Canceled", err)
	}
	release()
	wantNil(t, []<-chan error{first, last})
	wantGroups(t, f, [][]int{{1, 3}})
	if err := q.Submit(ctx, 4, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a done context: %v, want context.Canceled", err)
	}
	wantGroups(t, f, [][]int{{1, 3}})
}

// Once a leader has taken a request, its caller waits for, and gets, the
// Committer's outcome, whatever its context does meanwhile.
func TestCancelAfterTakenWaitsForTheOutcome(t *testing.T) {
	errLate := errors.New("committed with an error")
	for _, want := range []error{nil, errLate} {
		ctx, cancel := context.WithCancel(context.Background())
		f := &fake{result: func(int) error { cancel(); return want }}
		q := New[int](f, limits())
		if err := q.Submit(ctx, 1, 1); err != want {
			t.Fatalf("Submit canceled after it was taken = %v, want %v", err, want)
		}
		q.Close()
		cancel()
	}
}

// A failing commit reaches each of its callers with the error the
// Committer gave that caller, and no other.
func TestFailingCommitIsAcknowledgedPerCaller(t *testing.T) {
	itemErr := func(item int) error { return fmt.Errorf("item %d refused", item) }
	f := &fake{result: func(item int) error {
		if item%2 == 1 {
			return itemErr(item)
		}
		return nil
	}}
	q := New[int](f, limits())
	defer q.Close()
	release := holdAll(t, q)
	chs := queueInOrder(context.Background(), q, seq(1, 6), ones(6))
	release()
	for i, ch := range chs {
		item := i + 1
		err := <-ch
		if item%2 == 0 && err != nil {
			t.Errorf("item %d: %v, want nil", item, err)
		}
		if item%2 == 1 && (err == nil || err.Error() != itemErr(item).Error()) {
			t.Errorf("item %d: %v, want %v", item, err, itemErr(item))
		}
	}
	wantGroups(t, f, [][]int{seq(1, 6)})
}

// A leader commits groups until its own request is done, and at most
// ExtraGroups counted from the one that finished it; the rest stays
// queued.
func TestLeaderCommitsAtMostExtraGroups(t *testing.T) {
	f := &fake{}
	lim := limits()
	lim.GroupRequests = 1
	q := New[int](f, lim)
	rs := make([]*Request[int], 9)
	for i := range rs {
		rs[i] = newQueued(t, q, i, 1)
	}
	q.tokens <- struct{}{}
	q.lead(rs[2], 3) // its own is the third group, and two more
	wantGroups(t, f, [][]int{{0}, {1}, {2}, {3}, {4}})
	q.lead(rs[6], 1) // stops with its own
	q.lead(nil, 1)   // no own request: one group
	wantGroups(t, f, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}})
	q.lead(nil, -1) // no bound: until the queue is empty
	<-q.tokens
	wantGroups(t, f, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}})
	for i, r := range rs {
		if !r.finished() || r.err != nil {
			t.Fatalf("request %d: finished %v, err %v", i, r.finished(), r.err)
		}
	}
	q.Close()
}

// A caller that finds the queue full leads one group to make room, then
// queues its own request.
func TestFullQueueIsDrainedByTheCallerThatFindsIt(t *testing.T) {
	f := &fake{}
	lim := limits()
	lim.Queued, lim.GroupRequests = 2, 2
	q := New[int](f, lim)
	defer q.Close()
	waiting := []*Request[int]{newQueued(t, q, 1, 1), newQueued(t, q, 2, 1)}
	if err := q.Submit(context.Background(), 3, 1); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, f, [][]int{{1, 2}, {3}})
	for _, r := range waiting {
		if !r.finished() {
			t.Fatalf("request %d still waits", r.Item)
		}
	}
}

// A caller waiting for room in a full queue may give up with its context;
// its request is never committed.
func TestCanceledWhileTheQueueIsFull(t *testing.T) {
	f := &fake{}
	lim := limits()
	lim.Queued = 1
	q := New[int](f, lim)
	defer q.Close()
	release := holdAll(t, q)
	queued := submitAsync(context.Background(), q, 1, 1)
	awaitQueued(q, 1)
	ctx, cancel := context.WithCancel(context.Background())
	blocked := submitAsync(ctx, q, 2, 1)
	cancel()
	if err := <-blocked; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled while the queue was full: %v, want context.Canceled", err)
	}
	release()
	wantNil(t, []<-chan error{queued})
	wantGroups(t, f, [][]int{{1}})
}

// Close commits what is queued; a caller waiting for room when it starts
// and a caller after it get store.ErrClosed.
func TestCloseCommitsWhatIsQueuedAndRefusesTheRest(t *testing.T) {
	f := &fake{}
	lim := limits()
	lim.Queued = 1
	q := New[int](f, lim)
	release := holdAll(t, q)
	queued := submitAsync(context.Background(), q, 1, 1)
	awaitQueued(q, 1)
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	<-q.stopping
	if err := q.Submit(context.Background(), 2, 1); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Submit to a full queue while closing: %v, want store.ErrClosed", err)
	}
	release()
	<-closed
	wantNil(t, []<-chan error{queued})
	if err := q.Submit(context.Background(), 3, 1); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Submit after Close: %v, want store.ErrClosed", err)
	}
	wantGroups(t, f, [][]int{{1}})
	q.tokens = make(chan struct{}, q.lim.Leaders) // Close keeps every token; the cleanup gives them back
	for range q.lim.Leaders {
		q.tokens <- struct{}{}
	}
}

// A request handed back with Retry opens the next group, ahead of the
// queue.
func TestRetriedRequestsGoFirst(t *testing.T) {
	retried := false
	f := &fake{lead: func(f *fake, l *Leadership[int]) {
		for g := l.Next(); g != nil; g = l.Next() {
			f.record(g)
			for _, r := range g {
				if r.Item == 1 && !retried {
					retried = true
					l.Retry(r)
					continue
				}
				r.Finish(nil)
			}
		}
	}}
	lim := limits()
	lim.GroupRequests = 2
	q := New[int](f, lim)
	defer q.Close()
	release := holdAll(t, q)
	chs := queueInOrder(context.Background(), q, seq(1, 4), ones(4))
	release()
	wantNil(t, chs)
	wantGroups(t, f, [][]int{{1, 2}, {1, 3}, {4}})
}

// A retried request that does not fit a group while another request is
// carried over goes back ahead of the retried ones: neither is lost.
func TestRetriedAndCarriedRequestsAreNotLost(t *testing.T) {
	scripted := false
	f := &fake{lead: func(f *fake, l *Leadership[int]) {
		if scripted {
			f.commitAll(l)
			return
		}
		scripted = true
		first := l.Next() // [1]: 2 is carried, 1+2 would pass GroupBytes
		f.record(first)
		a := first[0]
		second := l.Next() // [2]: 3 is carried
		f.record(second)
		b := second[0]
		l.Retry(a, b) // 2 does not fit after 1 while 3 is carried
		f.commitAll(l)
	}}
	lim := limits()
	lim.GroupBytes = 10
	q := New[int](f, lim)
	defer q.Close()
	release := holdAll(t, q)
	chs := queueInOrder(context.Background(), q, seq(1, 3), []int{6, 6, 6})
	release()
	wantNil(t, chs)
	wantGroups(t, f, [][]int{{1}, {2}, {1}, {2}, {3}})
}

func TestFailQueuedFinishesEveryWaitingRequest(t *testing.T) {
	errGone := errors.New("connection gone")
	f := &fake{lead: func(_ *fake, l *Leadership[int]) { l.FailQueued(errGone) }}
	q := New[int](f, limits())
	defer q.Close()
	release := holdAll(t, q)
	chs := queueInOrder(context.Background(), q, seq(1, 5), ones(5))
	release()
	for i, ch := range chs {
		if err := <-ch; !errors.Is(err, errGone) {
			t.Fatalf("submit %d: %v, want the leader's error", i, err)
		}
	}
}

func TestNewRefusesLimitsOutOfRange(t *testing.T) {
	for _, mut := range []func(*Limits){
		func(l *Limits) { l.Queued = 0 },
		func(l *Limits) { l.Leaders = 0 },
		func(l *Limits) { l.GroupRequests = 0 },
		func(l *Limits) { l.GroupBytes = 0 },
		func(l *Limits) { l.ExtraGroups = -1 },
	} {
		lim := limits()
		mut(&lim)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", lim)
				}
			}()
			New[int](&fake{}, lim)
		}()
	}
}

var stressSeed = flag.Uint64("groupcommit.seed", 0, "seed of TestConcurrentSubmitters (0: from the clock)")

// TestConcurrentSubmitters runs many callers, two leaders, a small queue
// and random sizes and cancellations, and checks that every group keeps
// its bounds, every request is committed at most once, and exactly the
// requests whose Submit returned nil were committed. Rerun a failure with
// -groupcommit.seed (the schedule still varies).
func TestConcurrentSubmitters(t *testing.T) {
	seed := *stressSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -groupcommit.seed=%d)", seed, seed)
	lim := Limits{Queued: 8, Leaders: 2, GroupRequests: 5, GroupBytes: 100, ExtraGroups: 2}
	var mu sync.Mutex
	commits := map[int]int{}
	f := &fake{lead: func(f *fake, l *Leadership[int]) {
		for g := l.Next(); g != nil; g = l.Next() {
			size := 0
			for _, r := range g {
				size += r.size
			}
			if len(g) > lim.GroupRequests || (len(g) > 1 && size > lim.GroupBytes) {
				t.Errorf("group of %d requests and %d bytes passes %+v", len(g), size, lim)
			}
			mu.Lock()
			for _, r := range g {
				commits[r.Item]++
			}
			mu.Unlock()
			for _, r := range g {
				r.Finish(nil)
			}
		}
	}}
	q := New[int](f, lim)
	const callers, each = 16, 100
	type outcome struct {
		item int
		err  error
	}
	outcomes := make(chan outcome, callers*each)
	var wg sync.WaitGroup
	for c := range callers {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		wg.Go(func() {
			for i := range each {
				item := c*each + i
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(8) == 0 {
					cancel() // a done context: refused before it is queued
				}
				var err error
				if rng.IntN(10) == 0 {
					err = q.SubmitAlone(ctx, item)
				} else {
					err = q.Submit(ctx, item, rng.IntN(60))
				}
				cancel()
				outcomes <- outcome{item, err}
			}
		})
	}
	wg.Wait()
	q.Close()
	close(outcomes)
	for o := range outcomes {
		switch n := commits[o.item]; {
		case o.err == nil && n != 1:
			t.Errorf("item %d: Submit returned nil, committed %d times", o.item, n)
		case o.err != nil && (n != 0 || !errors.Is(o.err, context.Canceled)):
			t.Errorf("item %d: Submit returned %v, committed %d times", o.item, o.err, n)
		}
	}
}
