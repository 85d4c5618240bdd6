package goldentest

import (
	"fmt"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Record runs script on a fresh world for execution id and returns the log
// it wrote: the start at Epoch, every later action Tick after the previous
// one, a timer at the wakeAt of the park it fires. Any action that fails
// fails the test.
func Record(t testing.TB, flow FlowFunc, config func(*loom.Config), id string, script []Action) []event.Envelope {
	t.Helper()
	w := NewWorld(t, flow, config, id, nil)
	defer w.Close()
	at := Epoch
	var st fold.State
	for i, a := range script {
		switch {
		case i == 0:
		case a.Kind == ActTimer:
			if st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.WakeAt == nil {
				t.Fatalf("script action %d fires a timer, but the execution is not parked on one", i)
			}
			at = *st.Variables.SuspendedOn.WakeAt
			a.WakeAt = at
		default:
			at += Tick
		}
		a.At = at
		var err error
		if st, err = w.Perform(a); err != nil {
			t.Fatalf("recording action %d (%v): %v", i, a, err)
		}
	}
	w.Finish()
	return w.Log()
}

// Replay drives h's actions after cut under flow and config, and returns
// the log and the world's Env. cut is the index of the last action whose
// events the world starts with (the prefix-resume mode: a new process
// handed the recorded log up to the next action), or -1 for an empty world
// that drives the whole scenario. An action that fails fails the test.
func Replay(t testing.TB, h *History, flow FlowFunc, config func(*loom.Config), cut int) ([]event.Envelope, *Env) {
	t.Helper()
	var prefix []event.Envelope
	if cut >= 0 {
		prefix = h.Events[:h.Actions[cut+1].Seq]
	}
	w := NewWorld(t, flow, config, h.ID, prefix)
	defer w.Close()
	for i := cut + 1; i < len(h.Actions); i++ {
		if _, err := w.Perform(h.Actions[i]); err != nil {
			t.Fatalf("action %d (%v): %v", i, h.Actions[i], err)
		}
	}
	w.Finish()
	return w.Log(), w.env
}

// LogNeutral is config with kernel options a log must not depend on: step
// durability, a periodic snapshot after every second event (so resumes
// fold a snapshot and a tail) and, when sticky (unless the flow re-runs
// what a sticky park answers in place), sticky parks (answers reach the
// parked run in memory).
func LogNeutral(config func(*loom.Config), sticky bool) func(*loom.Config) {
	return func(c *loom.Config) {
		if config != nil {
			config(c)
		}
		c.Durability, c.SnapshotEvery = loom.StepDurable, 2
		if sticky {
			c.StickyParks = 0
		}
	}
}

// CheckFunc asserts what a replay's flow did (env) against tail, the part
// of the log the replay wrote itself; mode names the replay for a failure.
// CheckCounts is the kernel's.
type CheckFunc func(t testing.TB, mode string, tail []event.Envelope, env *Env)

// CheckReplay is a good history's contract: a fresh runtime under config
// reproduces h, so does one under neutral (the log-neutral options, see
// LogNeutral), and so does a new process handed the recorded prefix at
// every park or crash point; after each, check sees what the flow did. A
// log that differs from the file (see Diff) fails the test at its first
// difference; a Parallel block recorded in another interleaving is logged.
func CheckReplay(t testing.TB, h *History, flow FlowFunc, config, neutral func(*loom.Config), check CheckFunc) {
	t.Helper()
	type run struct {
		mode   string
		config func(*loom.Config)
		cut    int // Replay's
	}
	runs := []run{{"a fresh runtime driving the whole scenario", config, -1},
		{"a fresh runtime under the log-neutral options", neutral, -1}}
	for cut := 0; cut < len(h.Actions)-1; cut++ {
		runs = append(runs, run{fmt.Sprintf("a new process handed the recorded prefix #0–#%d", h.Actions[cut+1].Seq-1), config, cut})
	}
	for _, r := range runs {
		from := int64(0)
		if r.cut >= 0 {
			from = h.Actions[r.cut+1].Seq
		}
		log, env := Replay(t, h, flow, r.config, r.cut)
		msg, reordered := Diff(h.Raw, log)
		if msg != "" {
			t.Fatalf("%s: %s did not reproduce the history:\n%s", h.File.Name, r.mode, msg)
		}
		if reordered > 0 {
			t.Logf("%s: %s: %d Parallel block(s) recorded in another interleaving", h.File.Name, r.mode, reordered)
		}
		check(t, r.mode, h.Events[from:], env)
	}
}
