package loomtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/loomtest"
)

var (
	reserve = loom.NewStep("reserve", func(ctx context.Context, sku string) (string, error) {
		return "", errors.New("unmocked")
	}, loom.ToolID("stock.reserve"))
	pay = loom.NewStep("pay", func(ctx context.Context, sku string) (string, error) {
		return "", errors.New("unmocked")
	}, loom.ToolID("payments.charge"))
	ship = loom.NewStep("ship", func(ctx context.Context, sku string) (string, error) {
		return "", errors.New("unmocked")
	}, loom.ToolID("warehouse.ship"))
)

// order reserves, pays, waits for a go-ahead and ships.
var order = loom.NewFlow("order", func(ctx *loom.Context, sku string) (string, error) {
	r, err := loom.Run(ctx, reserve, sku)
	if err != nil {
		return "", err
	}
	p, err := loom.Run(ctx, pay, sku)
	if err != nil {
		return "", err
	}
	if _, err := loom.Suspend[bool](ctx, "go-ahead"); err != nil {
		return "", err
	}
	s, err := loom.Run(ctx, ship, sku)
	return r + "+" + p + "+" + s, err
})

// orderMocks are the mocks of order's three steps; pay runs first (if
// not nil) during its first call.
func orderMocks(first func()) (reserve, pay, ship *loomtest.Mock) {
	reserve = loomtest.NewMock("stock.reserve", func(ctx context.Context, sku string) (string, error) { return "r", nil })
	var once sync.Once
	pay = loomtest.NewMock("payments.charge", func(ctx context.Context, sku string) (string, error) {
		if first != nil {
			once.Do(first)
		}
		return "p", nil
	})
	ship = loomtest.NewMock("warehouse.ship", func(ctx context.Context, sku string) (string, error) { return "s", nil })
	return reserve, pay, ship
}

func TestCrash_RecoveryServesCompletedStepsWithoutRerunningThem(t *testing.T) {
	for _, backend := range []struct {
		name string
		opts []loomtest.Option
	}{{"memory", nil}, {"sqlite", []loomtest.Option{loomtest.WithSQLite()}}} {
		t.Run(backend.name, func(t *testing.T) {
			var env *loomtest.Env
			// The process dies while pay runs: its outcome is never written.
			reserved, paid, shipped := orderMocks(func() { env.CrashAtNextAppend() })
			env = loomtest.New(t, append(backend.opts, loomtest.WithFlows(order), loomtest.WithMocks(reserved, paid, shipped),
				// Every step outcome durable before the flow goes on: what
				// the crash may lose is pay's outcome alone.
				loomtest.WithConfig(func(c *loom.Config) { c.Durability = loom.StepDurable }))...)
			id := env.Start(t, "order", "sku-1")
			env.WaitForCrash(t)
			if fr := env.WaitForStep(t, id, "reserve"); fr.Status != fold.FrameCompleted {
				t.Fatalf("reserve is %s at the crash, want completed (StepDurable)", fr.Status)
			}

			if n := env.Restart(t); n != 1 {
				t.Fatalf("Restart recovered %d executions, want 1", n)
			}
			before := env.Log(t, id)
			env.WaitForGate(t, id, "go-ahead")
			env.Answer(t, id, "go-ahead", true)
			res := env.WaitForCompletion(t, id)

			if string(res.Output) != `"r+p+s"` {
				t.Errorf("output %s", res.Output)
			}
			if reserved.Count() != 1 {
				t.Errorf("reserve ran %d times: a completed step ran again after the crash", reserved.Count())
			}
			if paid.Count() != 2 {
				t.Errorf("pay ran %d times, want 2: its outcome was lost with the process", paid.Count())
			}
			if shipped.Count() != 1 {
				t.Errorf("ship ran %d times", shipped.Count())
			}
			after := env.Log(t, id)
			if len(after) < len(before) || !sameEvents(before, after[:len(before)]) {
				t.Errorf("recovery changed what the log held: %d events before, the new log does not start with them", len(before))
			}
			if !hasEvent(after, event.ExecutionRecovered) {
				t.Error("no EXECUTION_RECOVERED in the log")
			}
		})
	}
}

func TestCrash_LosesNothingAcknowledged(t *testing.T) {
	reserved, paid, shipped := orderMocks(nil)
	env := loomtest.New(t, loomtest.WithFlows(order), loomtest.WithMocks(reserved, paid, shipped))
	id := env.Start(t, "order", "sku-2")
	env.WaitForGate(t, id, "go-ahead") // the park is acknowledged: durable
	acknowledged := env.Log(t, id)

	env.CrashAtNextAppend()
	ctx, cancel := env.Context(t)
	defer cancel()
	err := env.Runtime().Resume(ctx, id, loom.ResumeEvent{EventType: "go-ahead", Payload: json.RawMessage("true")})
	if !errors.Is(err, loomtest.ErrCrashed) {
		t.Fatalf("the resume written at the crash: %v, want ErrCrashed", err)
	}
	if !env.Crashed() {
		t.Fatal("Crashed is false after the crash")
	}
	if got := env.Log(t, id); !sameEvents(got, acknowledged) {
		t.Fatalf("the crash changed the log: %d events, %d acknowledged", len(got), len(acknowledged))
	}

	env.Restart(t)
	if env.Crashed() {
		t.Fatal("the new process is crashed")
	}
	if st := env.WaitForGate(t, id, "go-ahead"); st.Sequence != acknowledged[len(acknowledged)-1].Sequence {
		t.Errorf("after the restart the execution is at sequence %d, want %d", st.Sequence, acknowledged[len(acknowledged)-1].Sequence)
	}
	env.Answer(t, id, "go-ahead", true)
	env.WaitForCompletion(t, id)
	if reserved.Count() != 1 || paid.Count() != 1 || shipped.Count() != 1 {
		t.Errorf("counts reserve %d pay %d ship %d, want 1 each", reserved.Count(), paid.Count(), shipped.Count())
	}
}

func TestCrash_AtStartWritesNothing(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(order))
	env.CrashAtNextAppend()
	ctx, cancel := env.Context(t)
	defer cancel()
	if _, err := env.Runtime().Start(ctx, "order", "sku", loom.WithExecutionID("o-1")); !errors.Is(err, loomtest.ErrCrashed) {
		t.Fatalf("start at the crash: %v, want ErrCrashed", err)
	}
	if n := env.Restart(t); n != 0 {
		t.Errorf("recovered %d executions from a log with none", n)
	}
	if log := env.Log(t, "o-1"); len(log) != 0 {
		t.Errorf("the crashed start left %d events", len(log))
	}
}

func TestRestart_ArmedCrashThatNeverComesFails(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(order), loomtest.WithWaitTimeout(50*time.Millisecond))
	env.CrashAtNextAppend()
	mustContain(t, failing(t, func(tb testing.TB) { env.Restart(tb) }),
		"the crash armed with CrashAtNextAppend never happened")
}

func TestRestart_WithoutACrashKillsTheProcessNow(t *testing.T) {
	reserved, paid, shipped := orderMocks(nil)
	env := loomtest.New(t, loomtest.WithFlows(order), loomtest.WithMocks(reserved, paid, shipped))
	id := env.Start(t, "order", "sku-3")
	env.WaitForGate(t, id, "go-ahead")
	old := env.Runtime()
	env.Restart(t)
	if env.Runtime() == old {
		t.Fatal("Restart kept the runtime")
	}
	env.Answer(t, id, "go-ahead", true)
	if st := env.WaitForCompletion(t, id).State; st.Status != fold.StatusCompleted {
		t.Fatal(st.Status)
	}
	if reserved.Count() != 1 || paid.Count() != 1 {
		t.Errorf("counts reserve %d pay %d: the new process re-ran recorded steps", reserved.Count(), paid.Count())
	}
}

func sameEvents(a, b []event.Envelope) bool {
	return slices.EqualFunc(a, b, func(x, y event.Envelope) bool {
		bx, errx := event.Encode(x)
		by, erry := event.Encode(y)
		return errx == nil && erry == nil && string(bx) == string(by)
	})
}

func hasEvent(log []event.Envelope, typ string) bool {
	return slices.ContainsFunc(log, func(e event.Envelope) bool { return e.Type == typ })
}
