package loom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
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

// lastFirst runs the runnable branch with the highest path.
type lastFirst struct{}

func (lastFirst) Next(_ string, runnable []string) int { return len(runnable) - 1 }

// An Interleaver decides the order Parallel branches run in, one at a
// time: here always the last, so the log records branch 2's decision
// first. Simulation tests (package dst) draw the choice from a seed.
func ExampleInterleaver() {
	flow := loom.NewFlow("fan-out", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		square := func(n int) func(*loom.Context) (int, error) {
			return func(c *loom.Context) (int, error) {
				return loom.Decide(c, fmt.Sprintf("square#%d", n), func() (int, error) { return n * n, nil })
			}
		}
		return loom.Parallel(ctx, square(2), square(3), square(4))
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}, Interleaver: lastFirst{}})
	defer rt.Close()
	id, _ := rt.Start(context.Background(), "fan-out", nil)
	res, _ := rt.WaitForCompletion(context.Background(), id)
	evs, _ := store.Read(context.Background(), events, id)
	for _, e := range evs {
		if e.Type == event.DecisionRecorded {
			fmt.Println(string(e.Payload))
		}
	}
	fmt.Println(string(res.Output))
	// Output:
	// {"choice":16,"decisionId":"square#4"}
	// {"choice":9,"decisionId":"square#3"}
	// {"choice":4,"decisionId":"square#2"}
	// [4,9,16]
}
