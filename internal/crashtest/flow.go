package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/loom-kernel/loom"
)

// The flow every case runs, under a fixed execution id.
const (
	FlowID      = "crashtest.order"
	ExecutionID = "crash-matrix-1"
	// Gate is the flow's human gate; ApprovalSchema its resume schema.
	Gate           = "approve"
	ApprovalSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},` +
		`"approver":{"type":"string","minLength":1}},"required":["approved","approver"],"additionalProperties":false}`
	// DecisionID is the flow's one recorded decision.
	DecisionID = "route"
)

// StepIDs are the flow's ten durable steps, in the order the flow issues
// them; branch-a1, branch-a2, branch-b and branch-c run in a Parallel block
// of three branches.
var StepIDs = []string{"fetch", "score", "enrich", "branch-a1", "branch-a2", "branch-b", "branch-c", "merge", "apply", "notify"}

// ApprovalPayload is the answer the matrix gives the gate.
var ApprovalPayload = json.RawMessage(`{"approved":true,"approver":"ops"}`)

// Input is the flow's input; FlowInput the value every case starts with.
type Input struct {
	Order string `json:"order"`
	Qty   int    `json:"qty"`
}

// FlowInput is the input of every run of the matrix.
var FlowInput = Input{Order: "A-17", Qty: 3}

// Approval is the gate's answer.
type Approval struct {
	Approved bool   `json:"approved"`
	Approver string `json:"approver"`
}

// Result is the flow's output: it depends on every step's output, the
// decision and the gate's answer, so a wrong replay shows in the state.
type Result struct {
	Route    string `json:"route"`
	Merged   int    `json:"merged"`
	Applied  int    `json:"applied"`
	Notified int    `json:"notified"`
	Approver string `json:"approver"`
}

// Counters count the invocations of each step effect and of the decision's
// chooser, across every runtime that shares them (one "world" whose side
// effects outlive a crashed process). The set of ids is fixed at creation,
// so the map is read-only and each counter atomic.
type Counters struct {
	n map[string]*atomic.Int64
}

// NewCounters returns zeroed counters for the order flow: StepIDs and
// DecisionID.
func NewCounters() *Counters {
	return newCounters(append(append([]string(nil), StepIDs...), DecisionID)...)
}

// newCounters returns zeroed counters for ids.
func newCounters(ids ...string) *Counters {
	c := &Counters{n: make(map[string]*atomic.Int64, len(ids))}
	for _, id := range ids {
		c.n[id] = &atomic.Int64{}
	}
	return c
}

// hit counts one invocation of id; an id outside the fixed set is a bug of
// the flow and panics.
func (c *Counters) hit(id string) {
	n, ok := c.n[id]
	if !ok {
		panic(fmt.Sprintf("crashtest: no counter for %q", id))
	}
	n.Add(1)
}

// Snapshot returns the current counts by id.
func (c *Counters) Snapshot() map[string]int64 {
	out := make(map[string]int64, len(c.n))
	for id, n := range c.n { //loom:order-independent map into map
		out[id] = n.Load()
	}
	return out
}

// counted defines a step that counts its invocation and computes f. Its
// effect is fast and ignores cancellation, so a runtime's Close (which
// cancels drives) only waits for it.
func counted(c *Counters, id string, f func(int) int) *loom.Step[int, int] {
	return loom.NewStep(id, func(_ context.Context, in int) (int, error) {
		c.hit(id)
		return f(in), nil
	})
}

// NewFlow builds the matrix flow over counters c: fetch, score, a decision
// on the route, enrich, a Parallel block of three branches (two steps, one,
// one), merge, the gate, apply and notify. Build one per runtime; runtimes
// that stand for the same world share c.
func NewFlow(c *Counters) *loom.Flow {
	fetch := counted(c, "fetch", func(q int) int { return q*7 + 1 })
	score := counted(c, "score", func(v int) int { return v % 11 })
	enrich := counted(c, "enrich", func(v int) int { return v + 40 })
	a1 := counted(c, "branch-a1", func(v int) int { return v + 1 })
	a2 := counted(c, "branch-a2", func(v int) int { return v * 2 })
	b := counted(c, "branch-b", func(v int) int { return v * 3 })
	cc := counted(c, "branch-c", func(v int) int { return v - 5 })
	merge := counted(c, "merge", func(v int) int { return v + 1000 })
	apply := counted(c, "apply", func(v int) int { return v * 10 })
	notify := counted(c, "notify", func(v int) int { return v + 7 })

	body := func(ctx *loom.Context, in Input) (Result, error) {
		var res Result
		fetched, err := loom.Run(ctx, fetch, in.Qty)
		if err != nil {
			return res, err
		}
		scored, err := loom.Run(ctx, score, fetched)
		if err != nil {
			return res, err
		}
		route, err := loom.Decide(ctx, DecisionID, func() (string, error) {
			c.hit(DecisionID)
			if scored%2 == 0 {
				return "express", nil
			}
			return "standard", nil
		})
		if err != nil {
			return res, err
		}
		bonus := map[string]int{"express": 100, "standard": 200}[route]
		enriched, err := loom.Run(ctx, enrich, fetched+bonus)
		if err != nil {
			return res, err
		}
		parts, err := loom.Parallel(ctx,
			func(bc *loom.Context) (int, error) {
				v, err := loom.Run(bc, a1, enriched)
				if err != nil {
					return 0, err
				}
				return loom.Run(bc, a2, v)
			},
			func(bc *loom.Context) (int, error) { return loom.Run(bc, b, enriched) },
			func(bc *loom.Context) (int, error) { return loom.Run(bc, cc, enriched) },
		)
		if err != nil {
			return res, err
		}
		merged, err := loom.Run(ctx, merge, parts[0]+parts[1]+parts[2])
		if err != nil {
			return res, err
		}
		ok, err := loom.Suspend[Approval](ctx, Gate)
		if err != nil {
			return res, err
		}
		factor := 0
		if ok.Approved {
			factor = 1
		}
		applied, err := loom.Run(ctx, apply, merged*factor)
		if err != nil {
			return res, err
		}
		notified, err := loom.Run(ctx, notify, applied)
		if err != nil {
			return res, err
		}
		return Result{Route: route, Merged: merged, Applied: applied, Notified: notified, Approver: ok.Approver}, nil
	}
	return loom.NewFlow(FlowID, body, loom.WithResumeSchema(Gate, ApprovalSchema))
}
