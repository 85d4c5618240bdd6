package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// TimerStoreFactory builds the stores RunTimerStore checks.
type TimerStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it. It is called once
	// per subtest and may call t.Fatal (t.TempDir is the place for files).
	New func(t *testing.T) store.TimerStore
	// Reopen is optional: it reopens the durable storage behind a store New
	// returned, after the kit closed it. When nil the Reopen subtest is left
	// out.
	Reopen func(t *testing.T, closed store.TimerStore) store.TimerStore
}

// timerKit carries the factory through the TimerStore subtests.
type timerKit struct{ f TimerStoreFactory }

// RunTimerStore runs the TimerStore conformance kit against the stores f
// builds, one fresh store per named subtest: put and get (payload bytes
// exact, absent payload and execution id), upsert by key, isolation from the
// caller's buffers, Due ordered by (WakeAt, Key) in code-point order with
// ties, Due bounded by now (inclusive) and by limit (a limit below 1 means
// the store's default, never zero timers), a poller paging through 3,000 due
// timers 100 at a time by deleting what it fired, compare-and-delete on the
// wake time (a stale Delete keeps the newer timer and reports false),
// deleting a missing key, refused keys and payloads (typed, storing
// nothing), 32 concurrent writers, Close, and Reopen when f.Reopen is set.
func RunTimerStore(t *testing.T, f TimerStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: TimerStoreFactory.New is nil")
	}
	k := timerKit{f: f}
	t.Run("PutAndGet", k.putAndGet)
	t.Run("PutReplaces", k.putReplaces)
	t.Run("CallerMutationIsolation", k.mutationIsolation)
	t.Run("DueOrder", k.dueOrder)
	t.Run("DueRespectsNow", k.dueRespectsNow)
	t.Run("DueRespectsLimit", k.dueRespectsLimit)
	t.Run("DuePagingByDelete", k.duePaging)
	t.Run("DeleteStaleWakeAt", k.deleteStale)
	t.Run("DeleteMissing", k.deleteMissing)
	t.Run("InvalidInput", k.invalidInput)
	t.Run("ConcurrentWriters", k.concurrentWriters)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: TimerStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// everything is a now at or after every wake time the kit uses.
const everything = math.MaxInt64

// open returns a fresh store for one subtest.
func (k timerKit) open(t *testing.T) store.TimerStore {
	t.Helper()
	return openStore(t, "TimerStoreFactory.New", k.f.New)
}

// timerAt is a timer under key, waking at wakeAt, of execution "exec-"+key,
// with a small JSON payload naming both.
func timerAt(key string, wakeAt int64) store.Timer {
	name, err := json.Marshal(key)
	if err != nil {
		panic(err) // a Go string always marshals
	}
	return store.Timer{
		Key:         key,
		ExecutionID: "exec-" + key,
		WakeAt:      wakeAt,
		Payload:     json.RawMessage(`{"key":` + string(name) + `,"wakeAt":` + strconv.FormatInt(wakeAt, 10) + `}`),
	}
}

// mustPut stores timers and fails the test on an error.
func mustPut(t *testing.T, s store.TimerStore, timers ...store.Timer) {
	t.Helper()
	for _, tm := range timers {
		if err := s.Put(context.Background(), tm); err != nil {
			t.Fatalf("Put(%q at %d): %v", tm.Key, tm.WakeAt, err)
		}
	}
}

// sameTimer reports whether got equals want field by field, payload bytes
// exactly (an absent payload may be nil or empty).
func sameTimer(got, want store.Timer) bool {
	return got.Key == want.Key && got.ExecutionID == want.ExecutionID && got.WakeAt == want.WakeAt &&
		bytes.Equal(got.Payload, want.Payload)
}

// describeTimer renders a timer for failure messages.
func describeTimer(tm store.Timer) string {
	return "{" + strconv.Quote(tm.Key) + " exec " + strconv.Quote(tm.ExecutionID) + " at " +
		itoa(tm.WakeAt) + " payload " + excerpt(tm.Payload) + "}"
}

// expectTimer gets key and requires it to equal *want, or to be missing
// when want is nil.
func expectTimer(t *testing.T, s store.TimerStore, key string, want *store.Timer) {
	t.Helper()
	got, found, err := s.Get(context.Background(), key)
	switch {
	case err != nil:
		t.Fatalf("Get(%q): %v", key, err)
	case want == nil && found:
		t.Fatalf("Get(%q) found %s, want none", key, describeTimer(got))
	case want == nil:
	case !found:
		t.Fatalf("Get(%q) found nothing, want %s", key, describeTimer(*want))
	case !sameTimer(got, *want):
		t.Fatalf("Get(%q) = %s, want %s", key, describeTimer(got), describeTimer(*want))
	}
}

// due calls Due and fails the test on an error; it also checks that the
// page is ordered by (WakeAt, Key), holds each key once, holds no timer
// after now and no more than limit (when limit > 0).
func due(t *testing.T, s store.TimerStore, now int64, limit int) []store.Timer {
	t.Helper()
	got, err := s.Due(context.Background(), now, limit)
	if err != nil {
		t.Fatalf("Due(%d, %d): %v", now, limit, err)
	}
	if limit > 0 && len(got) > limit {
		t.Fatalf("Due(%d, %d) returned %d timers", now, limit, len(got))
	}
	for i, tm := range got {
		if tm.WakeAt > now {
			t.Fatalf("Due(%d, %d)[%d] = %s, which is not due", now, limit, i, describeTimer(tm))
		}
		if i > 0 && !timerBefore(got[i-1], tm) {
			t.Fatalf("Due(%d, %d): %s is returned before %s", now, limit, describeTimer(got[i-1]), describeTimer(tm))
		}
	}
	return got
}

// timerBefore reports whether a comes strictly before b in Due's order.
func timerBefore(a, b store.Timer) bool {
	if a.WakeAt != b.WakeAt {
		return a.WakeAt < b.WakeAt
	}
	return a.Key < b.Key
}

// expectDue requires Due(now, limit) to return exactly want, in order.
func expectDue(t *testing.T, s store.TimerStore, now int64, limit int, want ...store.Timer) {
	t.Helper()
	got := due(t, s, now, limit)
	if len(got) != len(want) {
		t.Fatalf("Due(%d, %d) returned %d timers %q, want %d %q", now, limit, len(got), timerKeys(got), len(want), timerKeys(want))
	}
	for i := range got {
		if !sameTimer(got[i], want[i]) {
			t.Fatalf("Due(%d, %d)[%d] = %s, want %s", now, limit, i, describeTimer(got[i]), describeTimer(want[i]))
		}
	}
}

// timerKeys lists the keys of timers, for failure messages.
func timerKeys(timers []store.Timer) []string {
	out := make([]string, len(timers))
	for i, tm := range timers {
		out[i] = tm.Key
	}
	return out
}

// mustDelete deletes key at wakeAt and requires the reported outcome.
func mustDelete(t *testing.T, s store.TimerStore, key string, wakeAt int64, want bool) {
	t.Helper()
	got, err := s.Delete(context.Background(), key, wakeAt)
	if err != nil || got != want {
		t.Fatalf("Delete(%q, %d) = %v, %v; want %v, nil", key, wakeAt, got, err, want)
	}
}

// putAndGet: a stored timer reads back field for field, its payload byte
// for byte (whitespace, key order, big numbers, 1.0, <>& and non-ASCII);
// a timer without payload or execution id reads back without them; an
// unknown key, or one differing by case or a prefix, is not found.
func (k timerKit) putAndGet(t *testing.T) {
	s := k.open(t)
	text := timerAt("text", 1_700_000_000_000)
	text.Payload = json.RawMessage("{ \"big\" : 12345678901234567890,\n\"f\":1.0, \"html\":\"<>&\", \"u\":\"é日本\", \"b\":1, \"a\":2 }")
	bare := store.Timer{Key: "sched/é日本/next", WakeAt: 0}
	scalar := store.Timer{Key: "scalar", WakeAt: 5, Payload: json.RawMessage(`"x"`)}
	mustPut(t, s, text, bare, scalar)
	expectTimer(t, s, "text", &text)
	expectTimer(t, s, bare.Key, &bare)
	expectTimer(t, s, "scalar", &scalar)
	for _, key := range []string{"missing", "Text", "tex", "text/x"} {
		expectTimer(t, s, key, nil)
	}
	expectDue(t, s, everything, 10, bare, scalar, text)
}

// putReplaces: Put under a taken key replaces the whole timer (wake time,
// execution id, payload); the old wake time no longer makes it due.
func (k timerKit) putReplaces(t *testing.T) {
	s := k.open(t)
	first, other := timerAt("k", 100), timerAt("other", 150)
	mustPut(t, s, first, other)
	later := store.Timer{Key: "k", ExecutionID: "exec-2", WakeAt: 200, Payload: json.RawMessage(`{"n":2}`)}
	mustPut(t, s, later)
	expectTimer(t, s, "k", &later)
	expectDue(t, s, 199, 10, other)
	expectDue(t, s, 200, 10, other, later)
	earlier := store.Timer{Key: "k", WakeAt: 50}
	mustPut(t, s, earlier)
	expectTimer(t, s, "k", &earlier)
	expectDue(t, s, everything, 10, earlier, other)
}

// mutationIsolation: changing the buffer given to Put, or one returned by
// Get or Due, changes nothing stored.
func (k timerKit) mutationIsolation(t *testing.T) {
	s := k.open(t)
	in, want := timerAt("k", 7), timerAt("k", 7)
	mustPut(t, s, in)
	in.Payload[0] = 'X'
	expectTimer(t, s, "k", &want)
	got, _, err := s.Get(context.Background(), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(got.Payload) > 0 {
		got.Payload[0] = 'Y'
	}
	expectTimer(t, s, "k", &want)
	for _, tm := range due(t, s, everything, 10) {
		if len(tm.Payload) > 0 {
			tm.Payload[0] = 'Z'
		}
	}
	expectDue(t, s, everything, 10, want)
}
