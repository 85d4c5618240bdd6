package loomtest_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/loomtest"
)

// sleeper sleeps for each duration of its input in turn, and returns the
// recorded instant it woke last.
var sleeper = loom.NewFlow("sleeper", func(ctx *loom.Context, naps []time.Duration) (time.Time, error) {
	for _, d := range naps {
		if err := ctx.Sleep(d); err != nil {
			return time.Time{}, err
		}
	}
	return loom.Now(ctx).UTC(), nil
})

// wakeAts are the wakeAt of every TIMER_FIRED of a log, in log order.
func wakeAts(t *testing.T, log []event.Envelope) []int64 {
	t.Helper()
	var out []int64
	for _, ev := range log {
		if ev.Type != event.TimerFired {
			continue
		}
		var p struct {
			WakeAt int64 `json:"wakeAt"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.WakeAt)
	}
	return out
}

func TestSkipTime_ThirtyDaySleepCompletesAtOnce(t *testing.T) {
	for _, backend := range []struct {
		name string
		opts []loomtest.Option
	}{{"memory", nil}, {"sqlite", []loomtest.Option{loomtest.WithSQLite()}}} {
		t.Run(backend.name, func(t *testing.T) {
			env := loomtest.New(t, append(backend.opts, loomtest.WithFlows(sleeper))...)
			naps := []time.Duration{30 * 24 * time.Hour, time.Hour, 90 * time.Second}
			id := env.Start(t, "sleeper", naps)

			st := env.SkipTime(t, id)

			if st.Status != fold.StatusCompleted {
				t.Fatalf("status %s, want completed", st.Status)
			}
			woke := loomtest.Epoch.Add(30*24*time.Hour + time.Hour + 90*time.Second)
			var out time.Time
			if err := json.Unmarshal(st.Variables.Output, &out); err != nil || !out.Equal(woke) {
				t.Errorf("woke at %s (%v), want %s", out, err, woke)
			}
			if now := env.Clock().Now(); !now.Equal(woke) {
				t.Errorf("the clock stands at %s, want %s: time skipping moves it to each wakeAt", now, woke)
			}
			want := []int64{
				loomtest.Epoch.Add(naps[0]).UnixMilli(),
				loomtest.Epoch.Add(naps[0] + naps[1]).UnixMilli(),
				woke.UnixMilli(),
			}
			if got := wakeAts(t, env.Log(t, id)); !slices.Equal(got, want) {
				t.Errorf("timers fired at %v, want %v", got, want)
			}
			if _, ok := env.FireNextTimer(t); ok {
				t.Error("a timer is left after the execution completed")
			}
		})
	}
}

func TestFireNextTimer_FiresTimersOfManyExecutionsInWakeOrder(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(sleeper))
	ids := map[string]time.Duration{}
	for _, d := range []time.Duration{72 * time.Hour, 24 * time.Hour, 48 * time.Hour} {
		id := env.Start(t, "sleeper", []time.Duration{d})
		env.WaitForSettled(t, id)
		ids[id] = d
	}
	var order []time.Duration
	for {
		tm, ok := env.FireNextTimer(t)
		if !ok {
			break
		}
		order = append(order, ids[tm.ExecutionID])
		if st := env.WaitForSettled(t, tm.ExecutionID); st.Status != fold.StatusCompleted {
			t.Errorf("%s is %s after its timer, want completed", tm.ExecutionID, st.Status)
		}
	}
	if want := []time.Duration{24 * time.Hour, 48 * time.Hour, 72 * time.Hour}; !slices.Equal(order, want) {
		t.Errorf("woke %v, want %v", order, want)
	}
}

// approval sleeps a day, then waits for an approval (with no timeout) and
// a confirmation (with a one-hour timeout, whose timer answers it with
// {"wakeAt": …}, so OK decodes false).
var approval = loom.NewFlow("approval", func(ctx *loom.Context, _ struct{}) (string, error) {
	if err := ctx.Sleep(24 * time.Hour); err != nil {
		return "", err
	}
	who, err := loom.Suspend[string](ctx, "approve")
	if err != nil {
		return "", err
	}
	c, err := loom.Suspend[struct {
		OK bool `json:"ok"`
	}](ctx, "confirm", loom.Timeout(time.Hour))
	if err != nil || !c.OK {
		return who + ", unconfirmed", err
	}
	return who + ", confirmed", nil
})

func TestSkipTime_StopsAtAGateOnlyAnAnswerMoves(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(approval))
	id := env.Start(t, "approval", nil)

	st := env.SkipTime(t, id)
	if st.Status != fold.StatusSuspended || st.Variables.SuspendedOn.On != "approve" {
		t.Fatalf("SkipTime returned %s on %+v, want parked on approve", st.Status, st.Variables.SuspendedOn)
	}
	if want := loomtest.Epoch.Add(24 * time.Hour); !env.Clock().Now().Equal(want) {
		t.Errorf("clock %s, want %s: SkipTime must stop at the untimed gate", env.Clock().Now(), want)
	}

	env.Answer(t, id, "approve", "ada")
	env.WaitForGate(t, id, "confirm")
	env.AdvanceTime(t, 30*time.Minute) // within the timeout: nothing fires
	if st := env.WaitForSettled(t, id); st.Status != fold.StatusSuspended {
		t.Fatalf("after 30 minutes: %s, want still parked on confirm", st.Status)
	}
	env.AdvanceTime(t, 31*time.Minute)
	res := env.WaitForCompletion(t, id)
	if string(res.Output) != `"ada, unconfirmed"` {
		t.Errorf("output %s, want the timeout's answer", res.Output)
	}
	if want := loomtest.Epoch.Add(24*time.Hour + 61*time.Minute); !env.Clock().Now().Equal(want) {
		t.Errorf("clock %s, want %s", env.Clock().Now(), want)
	}
}

func TestSkipTime_FiresADeadline(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(approval))
	ctx, cancel := env.Context(t)
	defer cancel()
	id, err := env.Runtime().Start(ctx, "approval", nil, loom.WithDeadline(loomtest.Epoch.Add(36*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	st := env.SkipTime(t, id) // the sleep's timer, then the deadline's
	if st.Status != fold.StatusCancelled {
		t.Fatalf("status %s, want cancelled by its deadline", st.Status)
	}
}

func TestClock(t *testing.T) {
	c := loomtest.NewClock(time.Time{})
	if !c.Now().Equal(loomtest.Epoch) {
		t.Fatalf("a new clock stands at %s, want Epoch", c.Now())
	}
	if got := c.Advance(time.Hour); !got.Equal(loomtest.Epoch.Add(time.Hour)) || !c.Now().Equal(got) {
		t.Fatalf("Advance: %s", got)
	}
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	c.Set(at)
	if !c.Now().Equal(at) {
		t.Fatalf("Set: %s", c.Now())
	}
	var zero loomtest.Clock
	if !zero.Now().Equal(loomtest.Epoch) || !zero.Advance(time.Second).Equal(loomtest.Epoch.Add(time.Second)) {
		t.Fatal("the zero Clock does not stand at Epoch")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			c.Advance(time.Millisecond)
		}
	}()
	for range 100 {
		_ = c.Now()
	}
	<-done
	if want := at.Add(100 * time.Millisecond); !c.Now().Equal(want) {
		t.Fatalf("after concurrent advances: %s, want %s", c.Now(), want)
	}
}

// busy runs three steps before it sleeps, so a test that moves time right
// after Start would, without waiting for rest, move it before the Sleep
// reads the clock.
var busy = loom.NewFlow("busy", func(ctx *loom.Context, _ struct{}) (time.Time, error) {
	for i := range 3 {
		if _, err := loom.Run(ctx, double.Iter(i), i); err != nil {
			return time.Time{}, err
		}
	}
	if err := ctx.Sleep(24 * time.Hour); err != nil {
		return time.Time{}, err
	}
	return loom.Now(ctx).UTC(), nil
})

func TestAdvanceTime_WaitsForRunningExecutionsFirst(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(busy))
	id := env.Start(t, "busy", nil)
	env.AdvanceTime(t, 24*time.Hour) // the Sleep began at Epoch, so it ends now
	res := env.WaitForCompletion(t, id)
	var woke time.Time
	if err := json.Unmarshal(res.Output, &woke); err != nil || !woke.Equal(loomtest.Epoch.Add(24*time.Hour)) {
		t.Errorf("woke at %s (%v), want a day after Epoch", woke, err)
	}
}
