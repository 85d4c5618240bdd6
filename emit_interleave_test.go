package loom_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
)

// seededTurns is a loom.Interleaver drawing every choice from one seed.
type seededTurns struct {
	mu  sync.Mutex
	rnd *rand.Rand
}

func newSeededTurns(seed uint64) *seededTurns {
	return &seededTurns{rnd: rand.New(rand.NewPCG(seed, 1))}
}

func (s *seededTurns) Next(_ string, runnable []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.IntN(len(runnable))
}

// emitsOf renders a log's emits with whether each is stamped, sorted: the
// decisions, not the order the branches' interleaving put them in.
func emitsOf(h *harness, id string) string {
	var out []string
	for _, e := range h.log(id) {
		if _, stamped := e.FlowEmit(); strings.HasPrefix(e.Type, "note.") {
			out = append(out, fmt.Sprintf("%s(stamped=%t)", e.Type, stamped))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestSpec3_SkipDecisionsNeverDependOnInterleaving (ADR 0102, "never
// timing"): one recorded first run, replayed under many interleavings of
// its Parallel branches, makes the same emit decisions every time: the
// same emits skipped, the same appended, stamped alike, so the final logs
// hold the same emits (in the order each interleaving put them in). The branches emit repeated content (one digest counted across
// branches), emit around their steps, and one step failed untyped in the
// first run, so its segment runs a step live on replay.
func TestSpec3_SkipDecisionsNeverDependOnInterleaving(t *testing.T) {
	var flakyRuns atomic.Int64
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
		branch := func(i int) func(*loom.Context) error {
			return func(c *loom.Context) error {
				if err := c.Emit("note.tick", map[string]any{"same": true}); err != nil {
					return err
				}
				if err := c.Emit(fmt.Sprintf("note.before%d", i), map[string]any{}); err != nil {
					return err
				}
				if _, err := c.Run(fmt.Sprintf("s%d", i), func(context.Context) (any, error) { return i, nil }); err != nil {
					return err
				}
				return c.Emit(fmt.Sprintf("note.after%d", i), map[string]any{})
			}
		}
		if err := ctx.Parallel(branch(0), branch(1), branch(2)); err != nil {
			return 0, err
		}
		if _, err := ctx.Suspend("first"); err != nil {
			return 0, err
		}
		// The second segment: two steps that failed untyped in the first
		// run run live again on the replay, in two branches, beside a third
		// branch that only emits: its emit's decision must not depend on
		// whether a sibling's live step came first.
		flaky := func(name string) func(*loom.Context) error {
			return func(c *loom.Context) error {
				_, err := c.Run(name, func(context.Context) (any, error) {
					if flakyRuns.Add(1) <= 2 {
						return nil, errors.New("transient")
					}
					return 1, nil
				})
				_ = err // tolerated
				return c.Emit("note."+name+"-done", map[string]any{})
			}
		}
		err := ctx.Parallel(flaky("flaky-a"), flaky("flaky-b"),
			func(c *loom.Context) error { return c.Emit("note.beside", map[string]any{}) })
		if err != nil {
			return 0, err
		}
		_, err = ctx.Suspend("second")
		return 1, err
	})
	// The first run, recorded under one interleaving, up to the second park.
	recordOnce := func(h *harness, id string) {
		if _, err := h.rt.Start(h.ctx(), "f", nil, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
		resume(t, h, id, "first", "1")
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	var want string
	orders := map[string]bool{}
	for seed := range uint64(24) {
		flakyRuns.Store(0)
		cfg := replaying
		cfg.Interleaver = newSeededTurns(1000) // the same first run every time
		h := newHarnessWith(t, cfg, flow)
		id := fmt.Sprintf("x%d", seed)
		recordOnce(h, id)
		// The replay: a new runtime over the same log, another interleaving.
		h.rt.Close()
		h.cfg.Interleaver = newSeededTurns(seed)
		h.rt = h.open(flow)
		resume(t, h, id, "second", "2")
		if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
		got := emitsOf(h, id)
		orders[logOrder(h, id)] = true
		if seed == 0 {
			want = got
			continue
		}
		if got != want {
			t.Fatalf("seed %d: the replay decided other emits:\n%s\nwant (seed 0):\n%s", seed, got, want)
		}
	}
	if len(orders) < 2 {
		t.Fatal("24 seeds replayed in one order only: the interleavings were not varied")
	}
}

// logOrder is the order of a log's event types.
func logOrder(h *harness, id string) string {
	var out []string
	for _, e := range h.log(id) {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}
