package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Sizes of the concurrency subtest.
const (
	timerWriters    = 32 // goroutines, each on its own keys
	timersPerWriter = 16
)

// expectRefused requires a Put refusal typed as *event.InvalidEnvelopeError.
func expectRefused(t *testing.T, what string, err error) {
	t.Helper()
	var ie *event.InvalidEnvelopeError
	if !errors.As(err, &ie) {
		t.Fatalf("%s = %v, want an *event.InvalidEnvelopeError", what, err)
	}
}

// invalidInput: Put refuses, with *event.InvalidEnvelopeError, a key that
// is empty, holds a control character (NUL, newline), is not UTF-8 or is
// longer than event.MaxIDBytes; an execution id that is not empty but
// invalid; and a payload that is not empty and not valid UTF-8 JSON. A
// refusal stores nothing: a new key stays missing, and a timer already
// under the key keeps its wake time and payload.
func (k timerKit) invalidInput(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	keep := timerAt("keep", 5)
	longest := timerAt(strings.Repeat("k", event.MaxIDBytes), 6)
	longest.ExecutionID = "exec-longest"
	mustPut(t, s, keep, longest)
	for _, key := range []string{"", "a\x00b", "line\nbreak", "tab\tkey", "bad\xff", strings.Repeat("k", event.MaxIDBytes+1)} {
		refused := store.Timer{Key: key, ExecutionID: "exec-1", WakeAt: 1, Payload: json.RawMessage(`{}`)}
		expectRefused(t, fmt.Sprintf("Put(key %q)", key), s.Put(ctx, refused))
	}
	badExec := timerAt("fresh", 1)
	badExec.ExecutionID = "exec\x00"
	expectRefused(t, "Put(execution id with NUL)", s.Put(ctx, badExec))
	for _, payload := range []string{`{"a":`, "\xff", `not json`, `{"a":1} {"b":2}`} {
		for _, key := range []string{"fresh", "keep"} {
			tm := timerAt(key, 1)
			tm.Payload = json.RawMessage(payload)
			expectRefused(t, fmt.Sprintf("Put(%q, payload %q)", key, payload), s.Put(ctx, tm))
		}
	}
	expectTimer(t, s, "fresh", nil)
	expectTimer(t, s, "keep", &keep)
	expectDue(t, s, everything, 10, keep, longest)
}

// concurrentWriters: 32 goroutines at once each store 16 timers under
// their own keys, replace the odd ones with a later wake time, delete the
// even ones (a Delete with the replaced wake time reports false) and call
// Due as they go; afterwards Due returns exactly the survivors, in order.
func (k timerKit) concurrentWriters(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range timerWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := writeTimers(ctx, s, w); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	var survivors []store.Timer
	for w := range timerWriters {
		for i := 1; i < timersPerWriter; i += 2 {
			survivors = append(survivors, replacedTimer(w, i))
		}
	}
	slices.SortFunc(survivors, func(a, b store.Timer) int {
		if timerBefore(a, b) {
			return -1
		}
		return 1
	})
	expectDue(t, s, everything, len(survivors)+10, survivors...)
}

// writerTimer is timer i of writer w, as first stored.
func writerTimer(w, i int) store.Timer { return timerAt(fmt.Sprintf("w%02d-%02d", w, i), int64(i)) }

// replacedTimer is timer i of writer w after its replacement.
func replacedTimer(w, i int) store.Timer {
	return timerAt(fmt.Sprintf("w%02d-%02d", w, i), int64(1000+i*timerWriters+w))
}

// writeTimers is one concurrent writer's work; it returns the first
// unexpected outcome.
func writeTimers(ctx context.Context, s store.TimerStore, w int) error {
	for i := range timersPerWriter {
		if err := s.Put(ctx, writerTimer(w, i)); err != nil {
			return err
		}
	}
	for i := range timersPerWriter {
		tm := writerTimer(w, i)
		if i%2 == 1 {
			if err := s.Put(ctx, replacedTimer(w, i)); err != nil {
				return err
			}
			if ok, err := s.Delete(ctx, tm.Key, tm.WakeAt); err != nil || ok {
				return fmt.Errorf("Delete(%q) with a replaced wake time = %v, %v; want false, nil", tm.Key, ok, err)
			}
			continue
		}
		if ok, err := s.Delete(ctx, tm.Key, tm.WakeAt); err != nil || !ok {
			return fmt.Errorf("Delete(%q, %d) = %v, %v; want true, nil", tm.Key, tm.WakeAt, ok, err)
		}
		if _, err := s.Due(ctx, int64(i), 8); err != nil {
			return fmt.Errorf("Due(%d, 8): %w", i, err)
		}
	}
	return nil
}

// closed: after Close every method returns store.ErrClosed.
func (k timerKit) closed(t *testing.T) {
	s := k.open(t)
	mustPut(t, s, timerAt("k", 1))
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	check("Put", s.Put(ctx, timerAt("k", 2)))
	_, _, err := s.Get(ctx, "k")
	check("Get", err)
	_, err = s.Due(ctx, everything, 10)
	check("Due", err)
	_, err = s.Delete(ctx, "k", 1)
	check("Delete", err)
}

// reopen: every timer survives a close and a reopen — replaced ones with
// their last value, deleted ones gone, payload bytes exact — and
// compare-and-delete carries on from the stored wake times.
func (k timerKit) reopen(t *testing.T) {
	s := k.open(t)
	text, bare, moved := timerAt("text", 3), store.Timer{Key: "bare", WakeAt: 3}, timerAt("moved", 9)
	text.Payload = json.RawMessage("{ \"big\" : 12345678901234567890, \"f\":1.0, \"u\":\"é\" }")
	mustPut(t, s, text, bare, timerAt("moved", 1), moved, timerAt("gone", 2))
	for i := range 50 {
		mustPut(t, s, timerAt(fmt.Sprintf("bulk-%02d", i), int64(10+i%5)))
	}
	mustDelete(t, s, "gone", 2, true)
	before := due(t, s, everything, 1000)
	closeStore(t, s)
	s = openStore(t, "TimerStoreFactory.Reopen", func(t *testing.T) store.TimerStore { return k.f.Reopen(t, s) })
	expectDue(t, s, everything, 1000, before...)
	expectTimer(t, s, "text", &text)
	expectTimer(t, s, "bare", &bare)
	expectTimer(t, s, "moved", &moved)
	expectTimer(t, s, "gone", nil)
	mustDelete(t, s, "moved", 1, false)
	mustDelete(t, s, "moved", 9, true)
	more := timerAt("more", 4)
	mustPut(t, s, more)
	expectDue(t, s, 4, 10, bare, text, more)
}
