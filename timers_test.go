package loom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store/memstore"
)

// timed is a harness with a fake clock and a memory TimerStore, and no
// background poller: tests fire due timers themselves.
func timed(t *testing.T, cfg loom.Config, flows ...*loom.Flow) (*harness, *fakeClock, *memstore.TimerStore) {
	t.Helper()
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	timers := memstore.NewTimerStore()
	cfg.Clock, cfg.Timers, cfg.TimerPoll = clock, timers, -1
	return newHarnessWith(t, cfg, flows...), clock, timers
}

func count(h *harness, id, typ string) int {
	n := 0
	for _, e := range h.log(id) {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func sleeper(ran *atomic.Int64) *loom.Flow {
	return loom.NewFlow("sleeper", func(ctx *loom.Context, _ struct{}) (string, error) {
		if err := ctx.Sleep(time.Hour); err != nil {
			return "", err
		}
		_, err := ctx.Run("after", func(context.Context) (any, error) { ran.Add(1); return 1, nil })
		return "woke", err
	})
}

func TestT1_SleepRecordsWakeAtAndFiresExactlyOnce(t *testing.T) {
	for _, mode := range []loom.Config{{}, replaying} {
		var ran atomic.Int64
		h, clock, timers := timed(t, mode, sleeper(&ran))
		id, _ := h.rt.Start(h.ctx(), "sleeper", nil)
		st, err := h.rt.WaitForSuspend(h.ctx(), id)
		if err != nil {
			t.Fatal(err)
		}
		wakeAt := st.Variables.SuspendedOn.WakeAt
		if wakeAt == nil || *wakeAt != clock.Now().Add(time.Hour).UnixMilli() {
			t.Fatalf("recorded wakeAt %v", wakeAt)
		}
		if n, _ := h.rt.FireDueTimers(h.ctx()); n != 0 {
			t.Fatalf("fired %d timers before they were due", n)
		}
		clock.advance(time.Hour)
		if n, err := h.rt.FireDueTimers(h.ctx()); n != 1 || err != nil {
			t.Fatalf("fired %d: %v", n, err)
		}
		if n, _ := h.rt.FireDueTimers(h.ctx()); n != 0 {
			t.Fatalf("a fired timer fired again (%d)", n)
		}
		res, err := h.rt.WaitForCompletion(h.ctx(), id)
		if err != nil || string(res.Output) != `"woke"` || ran.Load() != 1 {
			t.Fatalf("%s %v ran %d", res.Output, err, ran.Load())
		}
		if count(h, id, event.TimerFired) != 1 {
			t.Fatalf("TIMER_FIRED events: %d", count(h, id, event.TimerFired))
		}
		if due, _ := timers.Due(h.ctx(), clock.Now().Add(48*time.Hour).UnixMilli(), 10); len(due) != 0 {
			t.Fatalf("timers left behind: %v", due)
		}
	}
}

func TestT1_AGateAnsweredBeforeItsTimeoutDropsItsTimer(t *testing.T) {
	h, clock, timers := timed(t, loom.Config{}, gatedFlow())
	id := parked(t, h)
	if due, _ := timers.Due(h.ctx(), clock.Now().Add(2*time.Hour).UnixMilli(), 10); len(due) != 1 {
		t.Fatalf("timers %v, want the park's", due)
	}
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if due, _ := timers.Due(h.ctx(), clock.Now().Add(2*time.Hour).UnixMilli(), 10); len(due) != 0 {
		t.Fatalf("the answered gate's timer survived: %v", due)
	}
}

func TestT1_AnUnansweredTimeoutWakesTheGateWithTheTimer(t *testing.T) {
	h, clock, _ := timed(t, loom.Config{}, gatedFlow())
	id := parked(t, h)
	clock.advance(time.Hour)
	if n, err := h.rt.FireDueTimers(h.ctx()); n != 1 || err != nil {
		t.Fatalf("fired %d: %v", n, err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ WakeAt int64 }
	if json.Unmarshal(res.Output, &answer) != nil || answer.WakeAt != clock.Now().UnixMilli() {
		t.Fatalf("the gate returned %s, want the timer's {wakeAt}", res.Output)
	}
}

func TestT1_ATimedWaitSurvivesARestartAndFiresOnce(t *testing.T) {
	var ran atomic.Int64
	h, clock, timers := timed(t, replaying, sleeper(&ran))
	id, _ := h.rt.Start(h.ctx(), "sleeper", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close() // the process stops while the execution sleeps
	clock.advance(2 * time.Hour)
	// Two new processes poll the same stores: the timer fires once.
	cfg := loom.Config{Events: h.events, Snapshots: h.snaps, Timers: timers, Clock: clock, TimerPoll: -1,
		Flows: []*loom.Flow{sleeper(&ran)}}
	a, _ := loom.New(cfg)
	b, _ := loom.New(cfg)
	defer a.Close()
	defer b.Close()
	na, _ := a.FireDueTimers(h.ctx())
	nb, _ := b.FireDueTimers(h.ctx())
	if na+nb != 1 {
		t.Fatalf("fired %d + %d", na, nb)
	}
	if _, err := a.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 1 || count(h, id, event.TimerFired) != 1 || count(h, id, event.ExecutionResumed) != 1 {
		t.Fatalf("ran %d, TIMER_FIRED %d, RESUMED %d", ran.Load(), count(h, id, event.TimerFired), count(h, id, event.ExecutionResumed))
	}
}

func TestT1_ADeadlineIsTheSameOnEveryReplay(t *testing.T) {
	var wakes []int64
	flow := loom.NewFlow("twice", func(ctx *loom.Context, _ struct{}) (int, error) {
		for range 2 {
			if _, err := ctx.Suspend("g", loom.Timeout(time.Minute)); err != nil {
				return 0, err
			}
		}
		return 1, nil
	})
	h, clock, _ := timed(t, replaying, flow)
	id, _ := h.rt.Start(h.ctx(), "twice", nil)
	st, _ := h.rt.WaitForSuspend(h.ctx(), id)
	wakes = append(wakes, *st.Variables.SuspendedOn.WakeAt)
	clock.advance(10 * time.Second)
	resume(t, h, id, "g", `1`)
	st, _ = h.rt.WaitForSuspend(h.ctx(), id)
	wakes = append(wakes, *st.Variables.SuspendedOn.WakeAt)
	if wakes[1]-wakes[0] != 10_000 {
		t.Fatalf("second deadline %d ms after the first, want 10000 (each from its own recorded now)", wakes[1]-wakes[0])
	}
}

// T1: due timers are fired in batches within one poll cycle.
func TestT1_ManyDueTimersFireInOnePollCycle(t *testing.T) {
	const n = 2000
	var ran atomic.Int64
	h, clock, _ := timed(t, loom.Config{}, sleeper(&ran))
	for i := range n {
		id, err := h.rt.Start(h.ctx(), "sleeper", nil, loom.WithExecutionID(fmt.Sprintf("s%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(time.Hour)
	if fired, err := h.rt.FireDueTimers(h.ctx()); fired != n || err != nil {
		t.Fatalf("fired %d of %d: %v", fired, n, err)
	}
	for i := range n {
		if _, err := h.rt.WaitForCompletion(h.ctx(), fmt.Sprintf("s%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() != n {
		t.Fatalf("ran %d", ran.Load())
	}
}

// SleepUntil records the instant it was given as the park's wakeAt, and
// its timer fires there, once, and not before.
func TestT1_SleepUntilRecordsItsInstantAsWakeAt(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).Add(90 * time.Minute)
	flow := loom.NewFlow("until", func(c *loom.Context, _ struct{}) (string, error) {
		if err := c.SleepUntil(at); err != nil {
			return "", err
		}
		return "woke", nil
	})
	h, clock, _ := timed(t, loom.Config{}, flow)
	id, _ := h.rt.Start(h.ctx(), "until", nil)
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.Variables.SuspendedOn.WakeAt; w == nil || *w != at.UnixMilli() {
		t.Fatalf("recorded wakeAt %v, want %d", w, at.UnixMilli())
	}
	clock.advance(89 * time.Minute)
	if n, _ := h.rt.FireDueTimers(h.ctx()); n != 0 {
		t.Fatalf("fired %d timers a minute early", n)
	}
	clock.advance(time.Minute)
	if n, err := h.rt.FireDueTimers(h.ctx()); n != 1 || err != nil {
		t.Fatalf("fired %d at the instant: %v", n, err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != `"woke"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	if n := count(h, id, event.TimerFired); n != 1 {
		t.Fatalf("TIMER_FIRED %d times", n)
	}
}
