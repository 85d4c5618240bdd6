package loom_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// pickBy is an Interleaver choosing with a function, recording every
// choice it was offered.
type pickBy struct {
	mu      sync.Mutex
	offered [][]string
	pick    func(runnable []string) int
}

func (p *pickBy) Next(_ string, runnable []string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offered = append(p.offered, slices.Clone(runnable))
	return p.pick(runnable)
}

// nestedParallel runs three branches of two steps each; the last branch
// has a block of two of its own.
var nestedParallel = loom.NewFlow("nested", func(c *loom.Context, _ struct{}) (int, error) {
	step := func(c *loom.Context, id string) error {
		_, err := c.Run(id, func(context.Context) (any, error) { return 1, nil })
		return err
	}
	twoSteps := func(name string) func(*loom.Context) error {
		return func(c *loom.Context) error {
			if err := step(c, name+"a"); err != nil {
				return err
			}
			return step(c, name+"b")
		}
	}
	err := c.Parallel(twoSteps("x"), twoSteps("y"), func(c *loom.Context) error {
		return c.Parallel(twoSteps("z0"), twoSteps("z1"))
	})
	if err != nil {
		return 0, err
	}
	return 1, step(c, "after")
})

// stepOrder is the order a log started its steps in.
func stepOrder(t *testing.T, h *harness, id string) string {
	t.Helper()
	var out []string
	for _, e := range h.log(id) {
		if e.Type == event.StepStarted {
			var p struct {
				StepID string `json:"stepId"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p.StepID)
		}
	}
	return strings.Join(out, " ")
}

func runInterleaved(t *testing.T, il loom.Interleaver) string {
	t.Helper()
	h := newHarnessWith(t, loom.Config{Interleaver: il, Features: loom.Features{Scopes: true}}, nestedParallel)
	id, err := h.rt.Start(h.ctx(), "nested", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	return stepOrder(t, h, id)
}

// An Interleaver decides the order branches run in, at every syscall:
// always the last runnable branch runs the blocks depth-first from the
// right, always the first from the left, whatever the Go scheduler does.
func TestAnInterleaverChoosesTheOrderOfParallelBranches(t *testing.T) {
	last := &pickBy{pick: func(r []string) int { return len(r) - 1 }}
	if got, want := runInterleaved(t, last), "z1a z1b z0a z0b ya yb xa xb after"; got != want {
		t.Fatalf("always the last: steps %q, want %q", got, want)
	}
	first := &pickBy{pick: func([]string) int { return 0 }}
	if got, want := runInterleaved(t, first), "xa xb ya yb z0a z0b z1a z1b after"; got != want {
		t.Fatalf("always the first: steps %q, want %q", got, want)
	}
	if want := []string{"0", "1", "2"}; !slices.Equal(first.offered[0], want) {
		t.Fatalf("the first choice offered %v, want %v", first.offered[0], want)
	}
}

// The same seeded choices give the same log, run after run; other seeds
// give other orders.
func TestASeededInterleaverReplaysItsOrder(t *testing.T) {
	seeded := func(seed uint64) loom.Interleaver {
		rnd := rand.New(rand.NewPCG(seed, 0))
		return &pickBy{pick: func(r []string) int { return rnd.IntN(len(r)) }}
	}
	orders := map[string]bool{}
	for seed := range uint64(8) {
		a, b := runInterleaved(t, seeded(seed)), runInterleaved(t, seeded(seed))
		if a != b {
			t.Fatalf("seed %d: %q, then %q", seed, a, b)
		}
		orders[a] = true
	}
	if len(orders) < 2 {
		t.Fatalf("8 seeds chose one order only: %v", orders)
	}
}
