package crashtest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
)

// Stores are the stores of one case, freshly opened: nothing of another
// case may be in them.
type Stores struct {
	Events    store.EventStore
	Snapshots store.SnapshotStore
}

// caseTimeout bounds one case (or the reference run). It is a guard
// against a hang, never a pacing delay: every wait in a case follows the
// log or a runtime's Close.
const caseTimeout = 30 * time.Second

// Durabilities are the modes the matrix runs in: one pass each.
var Durabilities = []loom.Durability{loom.StepDurable, loom.WriteBehind}

// Run runs the crash matrix: for each durability mode, an uncrashed
// reference run, then one case per append point — KillAfter(n) for every n
// in 1..N_total-1 — and one KillAfter(N_total), a kill after the whole run
// that loses nothing. open must return fresh, empty stores on each call
// (it is called once per case, with that case's subtest); it may register
// their closing with t.Cleanup. A failed case reports every property it
// broke (see Check) and the other cases still run.
func Run(t *testing.T, open func(t *testing.T) Stores) {
	t.Helper()
	for _, d := range Durabilities {
		t.Run(DurabilityName(d), func(t *testing.T) {
			ref := reference(t, open, d)
			start := time.Now()
			for n := 1; n <= ref.Events; n++ {
				c := Case{Durability: d, KillAfter: n}
				t.Run(c.point(), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
					defer cancel()
					if err := Check(ctx, open(t), ref, c); err != nil {
						t.Error(err)
					}
				})
			}
			t.Logf("%s: %d append points checked in %v", DurabilityName(d), ref.Events, time.Since(start).Round(time.Millisecond))
		})
	}
}

// reference runs the uncrashed run of mode d over fresh stores.
func reference(t *testing.T, open func(t *testing.T) Stores, d loom.Durability) Reference {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	ref, err := RunReference(ctx, open(t), d)
	if err != nil {
		t.Fatalf("uncrashed reference run: %v", err)
	}
	if ref.Events < 2 {
		t.Fatalf("the reference run appended %d events: no append point to crash at", ref.Events)
	}
	return ref
}

// SnapshotEvery is the periodic snapshot interval of every runtime of the
// matrix: small, so recoveries fold a snapshot plus a tail, not only whole
// logs.
const SnapshotEvery = 4

// fixedClock is the matrix's injected clock: every timestamp is the same
// instant, so timestamps cannot differ between runs.
type fixedClock struct{}

// Now returns a fixed instant.
func (fixedClock) Now() time.Time { return time.UnixMilli(1_700_000_000_000) }

// newRuntime builds a runtime over s running the matrix flow over c. Replay
// divergence fails (parks on the reserved gate): a recovery of unchanged
// code must never diverge, and the matrix would see the park.
func newRuntime(s Stores, d loom.Durability, c *Counters, logs *logBuffer) (*loom.Runtime, error) {
	return loom.New(loom.Config{
		Events:        s.Events,
		Snapshots:     s.Snapshots,
		Flows:         []*loom.Flow{NewFlow(c)},
		SnapshotEvery: SnapshotEvery,
		Durability:    d,
		Divergence:    loom.DivergenceFail,
		Clock:         fixedClock{},
		Logger:        slog.New(logs),
	})
}

// DurabilityName names a durability mode for test names and reports.
func DurabilityName(d loom.Durability) string {
	switch d {
	case loom.StepDurable:
		return "StepDurable"
	case loom.WriteBehind:
		return "WriteBehind"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}
