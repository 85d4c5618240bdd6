package dst_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dst"
	"github.com/loom-kernel/loom/saga"
)

// The flows under simulation: the kernel's own shapes, one flow each.
// Every effect is a pure function of its input, so the simulator's
// ledger, not the effect, is what counts its runs.

var (
	double = loom.NewStep("double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	inc    = loom.NewStep("inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	square = loom.NewStep("square", func(_ context.Context, n int) (int, error) { return n * n, nil })
)

// sequential: three steps, each fed by the one before.
var sequential = loom.NewFlow("sequential", func(c *loom.Context, n int) (int, error) {
	a, err := loom.Run(c, double, n)
	if err == nil {
		a, err = loom.Run(c, inc, a)
	}
	if err == nil {
		a, err = loom.Run(c, square, a)
	}
	return a, err
})

// gated: a step, a human gate, a step that depends on the answer.
var gated = loom.NewFlow("gated", func(c *loom.Context, n int) (string, error) {
	v, err := loom.Run(c, double, n)
	if err != nil {
		return "", err
	}
	ok, err := loom.Suspend[bool](c, "approve")
	if err != nil || !ok {
		return "rejected", err
	}
	v, err = loom.Run(c, inc, v)
	if err != nil {
		return "", err
	}
	return "approved " + itoa(v), nil
})

// GoAhead answers the timed gate; a timeout's {"wakeAt": …} reads as false.
type GoAhead struct {
	OK bool `json:"ok"`
}

// timed: a durable sleep, then a gate with a timeout.
var timed = loom.NewFlow("timed", func(c *loom.Context, n int) (string, error) {
	v, err := loom.Run(c, double, n)
	if err != nil {
		return "", err
	}
	if err := c.Sleep(time.Hour); err != nil {
		return "", err
	}
	g, err := loom.Suspend[GoAhead](c, "go-ahead", loom.Timeout(30*time.Minute))
	if err != nil {
		return "", err
	}
	v, err = loom.Run(c, inc, v)
	if err != nil {
		return "", err
	}
	if !g.OK {
		return "held " + itoa(v), nil
	}
	return "shipped " + itoa(v), nil
})

// inbox: two messages received in order, then a select between a message,
// a gate and a timer.
var inbox = loom.NewFlow("inbox", func(c *loom.Context, n int) (int, error) {
	total := n
	for i := range 2 {
		m, err := loom.Receive[int](c, "orders")
		if err != nil {
			return 0, err
		}
		if total, err = loom.Run(c, inc.Iter(i), total+m); err != nil {
			return 0, err
		}
	}
	sel, err := c.Select(loom.OnMessage("orders"), loom.OnGate("stop"), loom.OnTimer(45*time.Minute))
	if err != nil {
		return 0, err
	}
	return total + sel.Index, nil
})

// chain: continue-as-new until the count reaches 3.
var chain = loom.NewFlow("chain", func(c *loom.Context, n int) (int, error) {
	v, err := loom.Run(c, inc, n)
	if err != nil {
		return 0, err
	}
	if v < 3 {
		return 0, c.ContinueAsNew(v)
	}
	return v, nil
})

// parallel: three branches, then a step over their results.
var parallel = loom.NewFlow("parallel", func(c *loom.Context, n int) (int, error) {
	branch := func(i int) func(*loom.Context) (int, error) {
		return func(c *loom.Context) (int, error) { return loom.Run(c, square.Iter(i), n+i) }
	}
	vs, err := loom.Parallel(c, branch(0), branch(1), branch(2))
	if err != nil {
		return 0, err
	}
	return loom.Run(c, inc, vs[0]+vs[1]+vs[2])
})

var (
	reserve = loom.NewStep("reserve", func(_ context.Context, n int) (string, error) { return "hold-" + itoa(n), nil })
	charge  = loom.NewStep("charge", func(_ context.Context, n int) (string, error) { return "rcpt-" + itoa(n), nil },
		loom.NonIdempotent())
	ship = loom.NewStep("ship", func(_ context.Context, s string) (string, error) { return "shipped " + s, nil },
		loom.NonIdempotent())
)

// payment: non-idempotent steps around a gate (in-doubt parking, K9).
var payment = loom.NewFlow("payment", func(c *loom.Context, n int) (string, error) {
	hold, err := loom.Run(c, reserve, n)
	if err != nil {
		return "", err
	}
	rcpt, err := loom.Run(c, charge, n)
	if err != nil {
		return "", err
	}
	if ok, err := loom.Suspend[bool](c, "confirm"); err != nil || !ok {
		return hold + " released", err
	}
	return loom.Run(c, ship, hold+" "+rcpt)
})

// child: a step and a short sleep; started by parent only.
var child = loom.NewFlow("child", func(c *loom.Context, n int) (int, error) {
	v, err := loom.Run(c, square, n)
	if err != nil {
		return 0, err
	}
	if err := c.Sleep(10 * time.Minute); err != nil {
		return 0, err
	}
	return v, nil
})

// parent: two children awaited together.
var parent = loom.NewFlow("parent", func(c *loom.Context, n int) (int, error) {
	a, err := loom.SpawnChild(c, "child", "a", n)
	if err != nil {
		return 0, err
	}
	b, err := loom.SpawnChild(c, "child", "b", n+1)
	if err != nil {
		return 0, err
	}
	res, err := loom.AwaitChildren(c, []loom.Child{a, b})
	if err != nil {
		return 0, err
	}
	return len(res), nil
})

var (
	bookFlight   = loom.NewStep("flight", func(_ context.Context, n int) (string, error) { return "LH-" + itoa(n), nil })
	bookHotel    = loom.NewStep("hotel", bookHotelFn, loom.ErrorChannel("full", `{"type":"object"}`))
	cancelFlight = loom.NewStep("cancel-flight", func(_ context.Context, u saga.Undo[int, string]) (string, error) {
		return "cancelled " + u.Output, nil
	})
	cancelHotel = loom.NewStep("cancel-hotel", func(_ context.Context, u saga.Undo[int, string]) (string, error) {
		return "cancelled " + u.Output, nil
	})
)

// bookHotelFn refuses odd trips for good (a typed failure: durable).
func bookHotelFn(_ context.Context, n int) (string, error) {
	if n%2 == 1 {
		return "", loom.Fail("full", map[string]int{"trip": n})
	}
	return "ritz-" + itoa(n), nil
}

// trip: a saga; an odd trip's hotel refuses and the flight is cancelled.
var trip = loom.NewFlow("trip", func(c *loom.Context, n int) (string, error) {
	s := saga.New(c)
	if _, err := saga.Run(s, bookFlight, n, cancelFlight); err != nil {
		return "", s.Compensate(err)
	}
	if _, err := saga.Run(s, bookHotel, n, cancelHotel); err != nil {
		var tf *loom.TypedFailure
		if errors.As(err, &tf) {
			return "", s.Compensate(err)
		}
		return "", err
	}
	return "booked", nil
})

func itoa(n int) string { return strconv.Itoa(n) }

func smallInput(r *rand.Rand) any { return r.IntN(10) }

// sequentialFlows are the flows whose runs do not depend on the Go
// scheduler: a run of them is byte-for-byte deterministic.
func sequentialFlows() []dst.Flow {
	return []dst.Flow{
		{Flow: sequential, Input: smallInput},
		{Flow: gated, Input: smallInput, Answer: func(r *rand.Rand, _ string) any { return r.IntN(4) != 0 }},
		{Flow: timed, Input: smallInput, Answer: func(r *rand.Rand, _ string) any { return GoAhead{OK: r.IntN(2) == 0} }},
		{Flow: chain, Input: func(r *rand.Rand) any { return r.IntN(2) }},
		{Flow: payment, Input: smallInput, NonIdempotent: []string{"charge", "ship"}},
		{Flow: trip, Input: smallInput},
		{Flow: parallel, Input: smallInput},
	}
}

// allFlows adds the flows whose runs the Go scheduler still has a say in:
// a parent and its children run side by side, and a message sent right
// after a select parks races the park's own look at its inbox (see
// docs/dst.md). Parallel branches are the seed's (loom.Interleaver).
func allFlows() []dst.Flow {
	return append(sequentialFlows(),
		dst.Flow{Flow: inbox, Input: smallInput, Topics: []string{"orders"}, Answer: func(*rand.Rand, string) any { return "stop" }},
		dst.Flow{Flow: parent, Input: smallInput},
		dst.Flow{Flow: child},
	)
}
