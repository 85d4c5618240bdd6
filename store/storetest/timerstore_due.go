package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// Sizes of the paging subtest: a poller drains pagedTimers due timers
// pageLimit at a time, while notDueTimers wait after its now.
const (
	pagedTimers  = 3000
	pageLimit    = 100
	notDueTimers = 200
	pagedNow     = 1_000
)

// dueOrder: Due orders by WakeAt, then by Key in code-point order (UTF-8
// byte order, not UTF-16: U+FF61 sorts before U+1D11E), whatever the order
// the timers were stored in.
func (k timerKit) dueOrder(t *testing.T) {
	s := k.open(t)
	want := []store.Timer{
		timerAt("z", 0),
		timerAt("B", 10), timerAt("a", 10), timerAt("a/1", 10), timerAt("é", 10),
		timerAt("\uff61", 10), timerAt("\U0001d11e", 10),
		timerAt("a/20", 20),
		timerAt("0", 30), timerAt("1", 30),
	}
	for _, i := range []int{9, 6, 3, 0, 7, 4, 1, 8, 5, 2} { // an order unrelated to Due's
		mustPut(t, s, want[i])
	}
	if got := due(t, s, everything, 100); len(got) != len(want) {
		t.Fatalf("Due returned %q, want %q", timerKeys(got), timerKeys(want))
	}
	expectDue(t, s, everything, 100, want...)
	expectDue(t, s, 10, 100, want[:7]...)
}

// dueRespectsNow: Due returns exactly the timers with WakeAt <= now (the
// bound is inclusive), nothing on an empty store or before the first.
func (k timerKit) dueRespectsNow(t *testing.T) {
	s := k.open(t)
	expectDue(t, s, everything, 10)
	t10, t20a, t20b, t30 := timerAt("t10", 10), timerAt("t20a", 20), timerAt("t20b", 20), timerAt("t30", 30)
	mustPut(t, s, t30, t20b, t10, t20a)
	for _, c := range []struct {
		now  int64
		want []store.Timer
	}{
		{-1, nil}, {0, nil}, {9, nil}, {10, []store.Timer{t10}}, {19, []store.Timer{t10}},
		{20, []store.Timer{t10, t20a, t20b}}, {29, []store.Timer{t10, t20a, t20b}},
		{30, []store.Timer{t10, t20a, t20b, t30}}, {everything, []store.Timer{t10, t20a, t20b, t30}},
	} {
		expectDue(t, s, c.now, 10, c.want...)
	}
}

// dueRespectsLimit: Due returns the first limit due timers in order; a
// limit below 1 means the store's default, which returns a few due timers
// rather than none.
func (k timerKit) dueRespectsLimit(t *testing.T) {
	s := k.open(t)
	var all []store.Timer
	for i := range 12 {
		all = append(all, timerAt(fmt.Sprintf("t%02d", i), int64(i/3)))
	}
	mustPut(t, s, all...)
	for _, limit := range []int{1, 2, 3, 4, 11, 12} {
		expectDue(t, s, everything, limit, all[:limit]...)
	}
	expectDue(t, s, everything, 100, all...)
	expectDue(t, s, 2, 4, all[:4]...)
	expectDue(t, s, 2, 100, all[:9]...)
	for _, limit := range []int{0, -1} {
		expectDue(t, s, everything, limit, all...)
	}
}

// duePaging: the poller's pattern — Due(now, 100), Delete each timer it
// returned with its wake time, repeat until Due is empty — fires each of
// 3,000 due timers (with ties on WakeAt) exactly once, in order across
// pages, in 30 full pages, and leaves the timers that were not due.
func (k timerKit) duePaging(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	for i := range pagedTimers {
		j := (i * 7919) % pagedTimers // a permutation: 7919 is prime to 3000
		mustPut(t, s, timerAt(fmt.Sprintf("due-%04d", j), int64(j%60)))
	}
	var waiting []store.Timer
	for i := range notDueTimers {
		tm := timerAt(fmt.Sprintf("later-%03d", i), pagedNow+1+int64(i%7))
		waiting = append(waiting, tm)
		mustPut(t, s, tm)
	}
	fired := make(map[string]bool, pagedTimers)
	var last *store.Timer
	pages := 0
	for {
		page := due(t, s, pagedNow, pageLimit)
		if len(page) == 0 {
			break
		}
		pages++
		if pages > pagedTimers/pageLimit+1 {
			t.Fatalf("still paging after %d pages", pages)
		}
		for _, tm := range page {
			if fired[tm.Key] {
				t.Fatalf("page %d: %s was already fired", pages, describeTimer(tm))
			}
			if last != nil && !timerBefore(*last, tm) {
				t.Fatalf("page %d: %s comes after %s of an earlier page", pages, describeTimer(tm), describeTimer(*last))
			}
			fired[tm.Key] = true
			last = &tm
			if ok, err := s.Delete(ctx, tm.Key, tm.WakeAt); err != nil || !ok {
				t.Fatalf("Delete(%q, %d) of a fired timer = %v, %v; want true, nil", tm.Key, tm.WakeAt, ok, err)
			}
		}
	}
	if len(fired) != pagedTimers || pages != pagedTimers/pageLimit {
		t.Fatalf("fired %d timers in %d pages, want %d in %d", len(fired), pages, pagedTimers, pagedTimers/pageLimit)
	}
	slices.SortFunc(waiting, func(a, b store.Timer) int {
		if timerBefore(a, b) {
			return -1
		}
		return 1
	})
	expectDue(t, s, everything, 1000, waiting...)
}

// deleteStale: Delete with a wake time other than the stored one (a timer
// replaced since the poller read it) keeps the newer timer and reports
// false; with the stored wake time it deletes and reports true, once.
func (k timerKit) deleteStale(t *testing.T) {
	s := k.open(t)
	old, newer := timerAt("k", 100), timerAt("k", 200)
	mustPut(t, s, old, newer)
	for _, wakeAt := range []int64{100, 0, 199, 201} {
		mustDelete(t, s, "k", wakeAt, false)
		expectTimer(t, s, "k", &newer)
	}
	expectDue(t, s, 150, 10)
	expectDue(t, s, 200, 10, newer)
	mustDelete(t, s, "k", 200, true)
	expectTimer(t, s, "k", nil)
	mustDelete(t, s, "k", 200, false)
	expectDue(t, s, everything, 10)
}

// deleteMissing: deleting a key never stored, or one already deleted,
// reports false without error and leaves other timers alone.
func (k timerKit) deleteMissing(t *testing.T) {
	s := k.open(t)
	mustDelete(t, s, "never", 0, false)
	keep := timerAt("keep", 5)
	mustPut(t, s, keep, timerAt("gone", 5))
	for _, key := range []string{"never", "kee", "Keep", "keep/x"} {
		mustDelete(t, s, key, 5, false)
	}
	mustDelete(t, s, "gone", 5, true)
	mustDelete(t, s, "gone", 5, false)
	expectTimer(t, s, "keep", &keep)
	expectDue(t, s, everything, 10, keep)
}
