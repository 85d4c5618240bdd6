package crashtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// Run runs the crash matrix for every variant (Order, then Payment under a
// "payment" subtest): for each durability mode, an uncrashed reference
// run, then every case of Cases. open must return fresh, empty stores on
// each call (it is called once per case, with that case's subtest); it may
// register their closing with t.Cleanup. A failed case reports every
// property it broke (see Check) and the other cases still run. A mode of a
// variant with non-idempotent steps also fails when no case parked one of
// them in doubt with each verdict (done and rerun): the matrix would be
// checking nothing of K9.
func Run(t *testing.T, open func(t *testing.T) Stores) {
	t.Helper()
	for _, v := range Variants {
		if v == Order {
			runVariant(t, open, v)
			continue
		}
		t.Run(v.String(), func(t *testing.T) { runVariant(t, open, v) })
	}
}

// runVariant runs v's cases in every durability mode.
func runVariant(t *testing.T, open func(t *testing.T) Stores, v Variant) {
	t.Helper()
	for _, d := range Durabilities {
		t.Run(DurabilityName(d), func(t *testing.T) {
			ref := reference(t, open, v, d)
			start := time.Now()
			cases := Cases(ref)
			var parks []string
			verdicts := map[string]map[bool]bool{}
			for _, c := range cases {
				t.Run(c.point(), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
					defer cancel()
					out, err := CheckOutcome(ctx, open(t), ref, c)
					if err != nil {
						t.Error(err)
					}
					for _, p := range out.InDoubt {
						parks = append(parks, c.point()+": "+p.String())
						if verdicts[p.StepID] == nil {
							verdicts[p.StepID] = map[bool]bool{}
						}
						verdicts[p.StepID][p.Done] = true
					}
				})
			}
			t.Logf("%s%s: %d cases checked in %v", v.prefix(), DurabilityName(d), len(cases), time.Since(start).Round(time.Millisecond))
			if len(parks) > 0 {
				t.Logf("in-doubt parks: %s", strings.Join(parks, "; "))
			}
			for _, id := range v.spec().nonIdempotent {
				if !verdicts[id][true] || !verdicts[id][false] {
					t.Errorf("no case parked %s in doubt with both verdicts (done: %v, rerun: %v)", id, verdicts[id][true], verdicts[id][false])
				}
			}
		})
	}
}

// Cases returns the cases of ref's variant and mode: KillAfter(n) for
// every append point n in 1..Events-1, KillAfter(Events) — a kill after
// the whole run that loses nothing — and, for each non-idempotent step, a
// kill inside its effect before it acts.
func Cases(ref Reference) []Case {
	var cases []Case
	for n := 1; n <= ref.Events; n++ {
		cases = append(cases, Case{Variant: ref.Variant, Durability: ref.Durability, KillAfter: n})
	}
	for _, id := range ref.Variant.spec().nonIdempotent {
		cases = append(cases, Case{Variant: ref.Variant, Durability: ref.Durability, KillInEffect: id})
	}
	return cases
}

// reference runs the uncrashed run of v in mode d over fresh stores.
func reference(t *testing.T, open func(t *testing.T) Stores, v Variant, d loom.Durability) Reference {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	ref, err := RunReference(ctx, open(t), v, d)
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

// newRuntime builds a runtime over s running spec's flow over world w.
// Replay divergence fails (parks on the reserved gate): a recovery of
// unchanged code must never diverge, and the matrix would see the park.
func newRuntime(s Stores, spec flowSpec, d loom.Durability, w *World, logs *logBuffer) (*loom.Runtime, error) {
	every := 0
	if s.Snapshots != nil {
		every = SnapshotEvery
	}
	return loom.New(loom.Config{
		Events:        s.Events,
		Snapshots:     s.Snapshots,
		Flows:         []*loom.Flow{spec.build(w)},
		SnapshotEvery: every,
		Durability:    d,
		Divergence:    loom.DivergenceFail,
		Clock:         fixedClock{},
		Logger:        slog.New(logs),
		Recovery:      loom.Recovery{Disabled: true}, // the matrix recovers by hand, once
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
