package middleware

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Meter configures how Metering measures. Its zero value is the default:
// the runtime's clock (loom.Config.Clock, through effect.Context.Now).
type Meter struct {
	// Now is the clock an effect's elapsed ms is read from (default the
	// runtime's clock, so a test's injected clock governs it too).
	Now func() time.Time
}

// Budget caps the execution's metered consumption per dimension (spec §8).
// A cap of 0 (or less, or NaN) is no cap; the zero Budget caps nothing.
type Budget struct {
	Tokens   float64
	CostUSD  float64
	Ms       float64
	MemBytes float64
	WallMs   float64
	NetBytes float64
	// Custom caps custom dimensions by name.
	Custom map[string]float64
}

// Metering returns the resource ring (K3). Around every attempt that
// reaches it, it
//
//  1. admits or denies: when, at the attempt's start, the execution has
//     already used at least a Budget cap of some dimension (ec.Resources,
//     plus what this ring recorded for earlier attempts of the same step),
//     it records QUOTA_EXCEEDED {stepId, dimension, limit, used, reason} and
//     fails the step with *QuotaExceededError without running the rest of
//     the chain. So the effect that crosses a budget runs and is metered;
//     the next one is denied (admission control, not preemption);
//  2. runs the rest of the chain, timing it on Meter.Now;
//  3. records one RESOURCE_METERED {stepId, attempt, ms, tokens?, costUsd?,
//     memBytes?, wallMs?, netBytes?, custom?} — ms always (it is measured
//     here), every other dimension only when the effect reported it with
//     Report (no false zeros) — whether the chain succeeded or failed, since
//     a failed call still spent. The fold sums it into _resources.
//
// Failure modes: a denial is *QuotaExceededError (never retried by Retry).
// If RESOURCE_METERED cannot be recorded (the journal failed or the
// execution ended) the step fails with that error even when the effect
// succeeded: an unrecorded spend would let the budget be overrun. Concurrent
// effects (Parallel branches) are admitted on the state at their own start,
// so together they may overshoot a cap by what they spend at once. On
// replay a completed step is served from the log: nothing is measured, denied
// or recorded again. An untyped failure — a denial included — is re-run on
// replay and so re-admitted against the budget then in force.
//
// Wire one Metering per chain: a second one meters the same time twice
// (reported usage goes to the innermost one).
func Metering(m Meter, budget Budget) effect.Middleware {
	b := budget
	b.Custom = cloneAmounts(budget.Custom)
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		if err := admit(ec, &b); err != nil {
			return nil, err
		}
		now := m.Now
		if now == nil {
			now = ec.Now
		}
		t := track(ec)
		start := now()
		out, err := func() (json.RawMessage, error) {
			defer untrack(ec, t)
			return next(ec, in)
		}()
		ms := max(float64(now().Sub(start).Microseconds())/1000, 0)
		fact := t.fact(ec, ms)
		if merr := ec.Emit(event.ResourceMetered, fact); merr != nil {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("middleware: recording RESOURCE_METERED of step %q: %w", ec.StepID, merr)
		}
		ec.Resources = addResources(ec.Resources, fact)
		return out, err
	}
}

// dimension is one capped dimension: its name and where to read the used
// amount and the cap.
type dimension struct {
	name string
	used func(fold.Resources) *float64
	cap  func(*Budget) float64
}

// dimensions are checked in this order; the first exhausted one is denied.
var dimensions = []dimension{
	{"tokens", func(r fold.Resources) *float64 { return r.Tokens }, func(b *Budget) float64 { return b.Tokens }},
	{"costUsd", func(r fold.Resources) *float64 { return r.CostUSD }, func(b *Budget) float64 { return b.CostUSD }},
	{"ms", func(r fold.Resources) *float64 { return r.Ms }, func(b *Budget) float64 { return b.Ms }},
	{"memBytes", func(r fold.Resources) *float64 { return r.MemBytes }, func(b *Budget) float64 { return b.MemBytes }},
	{"wallMs", func(r fold.Resources) *float64 { return r.WallMs }, func(b *Budget) float64 { return b.WallMs }},
	{"netBytes", func(r fold.Resources) *float64 { return r.NetBytes }, func(b *Budget) float64 { return b.NetBytes }},
}

// admit denies the attempt when a capped dimension is already used up.
func admit(ec *effect.Context, b *Budget) error {
	for _, d := range dimensions {
		if limit := d.cap(b); limit > 0 {
			if used := d.used(ec.Resources); used != nil && *used >= limit {
				return deny(ec, d.name, limit, *used)
			}
		}
	}
	names := make([]string, 0, len(b.Custom))
	for name := range b.Custom { //loom:sorted sorted below
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		limit := b.Custom[name]
		if used, ok := ec.Resources.Custom[name]; ok && limit > 0 && used >= limit {
			return deny(ec, "custom:"+name, limit, used)
		}
	}
	return nil
}

type quotaFact struct {
	StepID    string  `json:"stepId"`
	Dimension string  `json:"dimension"`
	Limit     float64 `json:"limit"`
	Used      float64 `json:"used"`
	Reason    string  `json:"reason"`
}

// deny records QUOTA_EXCEEDED and returns the refusal; a failure to record
// it still denies.
func deny(ec *effect.Context, dim string, limit, used float64) error {
	qerr := &QuotaExceededError{StepID: ec.StepID, Dimension: dim, Limit: limit, Used: used}
	fact := quotaFact{StepID: ec.StepID, Dimension: dim, Limit: limit, Used: used, Reason: bounded(quotaReason(dim, limit, used))}
	if err := ec.Emit(event.QuotaExceeded, fact); err != nil {
		return fmt.Errorf("%w (recording QUOTA_EXCEEDED failed: %w)", qerr, err)
	}
	return qerr
}

// addResources returns r plus one recorded fact, as the fold would add it,
// without touching the amounts r points at (they may be the folded state's).
func addResources(r fold.Resources, f meteredFact) fold.Resources {
	add := func(cur, v *float64) *float64 {
		if v == nil {
			return cur
		}
		sum := *v
		if cur != nil {
			sum += *cur
		}
		return &sum
	}
	r.Tokens, r.CostUSD, r.Ms = add(r.Tokens, f.Tokens), add(r.CostUSD, f.CostUSD), add(r.Ms, &f.Ms)
	r.MemBytes, r.WallMs, r.NetBytes = add(r.MemBytes, f.MemBytes), add(r.WallMs, f.WallMs), add(r.NetBytes, f.NetBytes)
	if len(f.Custom) > 0 {
		custom := cloneAmounts(r.Custom)
		if custom == nil {
			custom = make(map[string]float64, len(f.Custom))
		}
		for name, v := range f.Custom { //loom:order-independent each key summed on its own
			custom[name] += v
		}
		r.Custom = custom
	}
	return r
}

func cloneAmounts(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m { //loom:order-independent map into map
		out[k] = v
	}
	return out
}
