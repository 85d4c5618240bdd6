package loom

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Decide records a non-deterministic choice (P9): the first run calls choose
// and records DECISION_RECORDED under id; every replay returns the recorded
// choice without calling choose. An error from choose is returned and
// nothing is recorded. Ids starting with "__loom_" are reserved. Each id is
// decided once per run: deciding it again fails with *StepReusedError
// (give each decision of a loop its own id).
func (c *Context) Decide(id string, choose func() (any, error)) (json.RawMessage, error) {
	c.checkpoint()
	if strings.HasPrefix(id, reservedPrefix) {
		return nil, ErrReservedDecisionID
	}
	if err := event.ValidateID("decision id", id); err != nil {
		return nil, err
	}
	return c.decide(id, choose, nil)
}

func (c *Context) decide(id string, choose func() (any, error), meta map[string]json.RawMessage) (json.RawMessage, error) {
	if err := c.drive.reissue(id, true, nil); err != nil {
		return nil, err
	}
	var d fold.Decision
	var found bool
	c.state(func(s *fold.State) { d, found = s.Variables.Decisions[id] })
	if found {
		return d.Choice, nil
	}
	r := c.drive
	if r.verifying() {
		r.reach(frontier{kind: frontierDecision, id: id})
	}
	r.beginLive(c)
	v, err := choose()
	var raw []byte
	if err == nil {
		raw, err = json.Marshal(v)
	}
	r.endLive(c, err != nil)
	if err != nil {
		return nil, fmt.Errorf("loom: decision %q: %w", id, err)
	}
	r.commit(event.DecisionRecorded, map[string]any{"decisionId": id, "choice": json.RawMessage(raw)}, meta)
	return raw, nil
}

// Decide is the typed form of Context.Decide.
func Decide[T any](ctx *Context, id string, choose func() (T, error)) (T, error) {
	var v T
	raw, err := ctx.Decide(id, func() (any, error) { return choose() })
	if err != nil {
		return v, err
	}
	if err := decodeInto(raw, &v); err != nil {
		return v, fmt.Errorf("loom: decision %q: decoding choice: %w", id, err)
	}
	return v, nil
}

// Now returns the wall-clock time as a recorded decision: the first run
// reads the runtime's clock, every replay returns the same instant (to the
// millisecond).
func Now(ctx *Context) time.Time {
	ctx.checkpoint()
	raw, err := ctx.decide(ctx.implicitID("now"), func() (any, error) {
		return ctx.drive.rt.cfg.Clock.Now().UnixMilli(), nil
	}, nil)
	var ms int64
	if err != nil || unmarshalRecorded(raw, &ms) != nil {
		panic(fmt.Sprintf("loom: recorded time is unreadable: %v", err))
	}
	return time.UnixMilli(ms)
}

// Random returns a generator seeded from a recorded random seed: the draws
// of a replay equal the first run's.
func Random(ctx *Context) *mrand.Rand {
	ctx.checkpoint()
	raw, err := ctx.decide(ctx.implicitID("random"), func() (any, error) {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		return []uint64{binary.LittleEndian.Uint64(b[:8]) >> 11, binary.LittleEndian.Uint64(b[8:]) >> 11}, nil
	}, nil)
	var seed []uint64
	if err != nil || unmarshalRecorded(raw, &seed) != nil || len(seed) != 2 {
		panic(fmt.Sprintf("loom: recorded seed is unreadable: %v", err))
	}
	return mrand.New(mrand.NewPCG(seed[0], seed[1]))
}

// BudgetRequest asks NegotiateBudget for an amount of one dimension.
type BudgetRequest struct {
	Dimension string  // tokens, costUsd, ms…
	Request   float64 // what the flow would like
	Max       float64 // the most the policy grants (0: no ceiling)
}

// NegotiateBudget resolves a bounded grant through the decision seam (spec
// §8): recorded once, replayed forever. It is advisory: it enforces nothing.
func (c *Context) NegotiateBudget(req BudgetRequest) (float64, error) {
	c.checkpoint()
	if err := event.ValidateID("dimension", req.Dimension); err != nil {
		return 0, err
	}
	raw, err := c.decide(c.implicitID("budget:"+req.Dimension), func() (any, error) {
		grant := max(req.Request, 0)
		if req.Max > 0 {
			grant = min(grant, req.Max)
		}
		return grant, nil
	}, nil)
	if err != nil {
		return 0, err
	}
	var grant float64
	if err := unmarshalRecorded(raw, &grant); err != nil {
		return 0, fmt.Errorf("loom: budget grant unreadable: %w", err)
	}
	return grant, nil
}
