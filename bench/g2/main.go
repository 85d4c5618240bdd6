// Command g2 is the zero-overhead gate of guardrail G2 (spec §1, §10):
// every additive capability is opt-in, and unwired it costs nothing. It
// runs one 10-step flow on memory stores in pairs — the kernel with a
// capability unwired, and the same kernel with it wired as lightly as it
// can be (an empty middleware chain, feature flags on that the flow does
// not use) — and judges the median over the pairs of unwired time ÷ wired
// time: the unwired path may not cost more than -max times the lightest
// wiring of it. Unwired does strictly less work, so its ratio sits at or
// under 1; a ratio over -max means the kernel pays for a capability nobody
// wired.
//
//	go run ./bench/g2 [-pairs 21] [-flows 100] [-max 1.25]
//
// Each pair runs the two variants back to back, alternating which goes
// first, on runtimes built once, and times each by the CPU the process
// spent (getrusage), not the wall clock; the median of the per-pair ratios
// tolerates a machine whose load drifts during the run. It prints one line
// per capability and exits 1 when one is over -max. The README test
// command runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store/memstore"
)

// steps is the length of the measured flow.
const steps = 10

// pairing is one capability: its unwired and its lightest wired config.
type pairing struct {
	name           string
	unwired, wired func(*loom.Config)
}

func pairings() []pairing {
	return []pairing{
		{"effect rings (Config.Middleware nil vs an empty chain)",
			func(c *loom.Config) { c.Middleware = nil },
			func(c *loom.Config) { c.Middleware = []effect.Middleware{} }},
		{"kernel features (flags off vs on and unused)",
			func(c *loom.Config) { c.Features = loom.Features{} },
			func(c *loom.Config) { c.Features = loom.Features{Inbox: true, ContinueAsNew: true, Children: true} }},
		{"event hooks (nil vs a no-op OnDurableEvent)",
			func(c *loom.Config) { c.OnDurableEvent = nil },
			func(c *loom.Config) { c.OnDurableEvent = func(event.Envelope) {} }},
	}
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "g2:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("g2", flag.ContinueOnError)
	pairs := fs.Int("pairs", 21, "measured pairs per capability (the median ratio is judged)")
	flows := fs.Int("flows", 100, "flows each variant runs per pair")
	limit := fs.Float64("max", 1.25, "the most unwired time ÷ wired time may be")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pairs < 1 || *flows < 1 || *limit < 1 {
		return fmt.Errorf("-pairs and -flows must be at least 1 and -max at least 1")
	}
	var over []string
	for _, p := range pairings() {
		ratio, err := measure(p, *pairs, *flows)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		verdict := "ok"
		if ratio > *limit {
			verdict = "OVER"
			over = append(over, p.name)
		}
		fmt.Fprintf(out, "G2 %-55s unwired/wired %.3f (median of %d pairs of %d flows; max %.2f) %s\n", p.name, ratio, *pairs, *flows, *limit, verdict)
	}
	if len(over) > 0 {
		return fmt.Errorf("unwired costs more than %.2f× its lightest wiring for %v: the kernel pays for a capability nobody wired (G2)", *limit, over)
	}
	return nil
}

// measure returns the median over pairs of the unwired variant's time ÷
// the wired one's, after one warm-up pair.
func measure(p pairing, pairs, flows int) (float64, error) {
	unwired, err := newRuntime(p.unwired)
	if err != nil {
		return 0, err
	}
	defer unwired.Close()
	wired, err := newRuntime(p.wired)
	if err != nil {
		return 0, err
	}
	defer wired.Close()
	ratios := make([]float64, 0, pairs)
	for i := -1; i < pairs; i++ {
		var tu, tw time.Duration
		first, second := unwired, wired
		if i%2 != 0 {
			first, second = wired, unwired
		}
		for _, rt := range []*loom.Runtime{first, second} {
			d, err := batch(rt, flows)
			if err != nil {
				return 0, err
			}
			if rt == unwired {
				tu = d
			} else {
				tw = d
			}
		}
		if i >= 0 { // the first pair warms both up
			ratios = append(ratios, tu.Seconds()/tw.Seconds())
		}
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2], nil
}

// batch runs flows flows to completion, one at a time, and returns the
// CPU time the process spent meanwhile (user and system): unlike the wall
// clock, it does not count the time other processes of a loaded machine
// held the CPUs.
func batch(rt *loom.Runtime, flows int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := cpuTime()
	for range flows {
		id, err := rt.Start(ctx, "ten", nil)
		if err != nil {
			return 0, err
		}
		if _, err := rt.WaitForCompletion(ctx, id); err != nil {
			return 0, err
		}
	}
	return cpuTime() - start, nil
}

// cpuTime is the CPU time the process has spent so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // RUSAGE_SELF with a valid pointer cannot fail
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// newRuntime is a runtime over memory stores with the 10-step flow "ten",
// every step the registered effect "work", configured by tweak.
func newRuntime(tweak func(*loom.Config)) (*loom.Runtime, error) {
	reg, err := effect.NewRegistry(map[string]effect.Func{
		"work": func(_ *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true,"in":` + string(in) + `}`), nil
		},
	})
	if err != nil {
		return nil, err
	}
	tasks := make([]*loom.Task, steps)
	for i := range tasks {
		tasks[i] = &loom.Task{ID: "step#" + strconv.Itoa(i), Kind: "tool", ToolID: "work"}
	}
	flow := loom.NewFlow("ten", func(ctx *loom.Context, _ struct{}) (int, error) {
		for i, t := range tasks {
			if _, err := ctx.Execute(t, map[string]int{"i": i}); err != nil {
				return 0, err
			}
		}
		return len(tasks), nil
	})
	cfg := loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}, Effects: reg,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	tweak(&cfg)
	return loom.New(cfg)
}
