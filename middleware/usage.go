package middleware

import (
	"math"
	"sync"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// MaxCustomDimensions bounds the custom dimensions one effect may report
// (and so the size of one RESOURCE_METERED).
const MaxCustomDimensions = 32

// MaxCustomNameBytes bounds a custom dimension's name.
const MaxCustomNameBytes = 64

// Usage is what an effect measured of itself. A nil dimension was not
// measured and is left out of RESOURCE_METERED (no false zeros, spec §8);
// a non-nil one is recorded, a measured zero included. Build the pointers
// with Amount.
type Usage struct {
	Tokens   *float64
	CostUSD  *float64
	MemBytes *float64
	WallMs   *float64
	NetBytes *float64
	// Custom holds named dimensions of the effect's own (folded into
	// _resources.custom).
	Custom map[string]float64
}

// Amount returns a pointer to v, for a Usage field.
func Amount(v float64) *float64 { return &v }

// Report adds u to what the effect running under ec has measured; Metering
// records the sum, with the elapsed ms, as one RESOURCE_METERED when the
// effect returns. An effect may report several times (an agent calling a
// model in a loop): amounts add up. Inside a Task's Invoke, reach ec with
// loom.EffectContext(ctx) (or effect.FromContext).
//
// Without a Metering ring around the effect, Report records nothing and
// returns nil: effects report unconditionally, and the ring stays opt-in.
// So does a Report made after the effect returned (from a goroutine it left
// behind): the attempt's RESOURCE_METERED is already written.
// An amount that is negative, not finite or over fold.MaxMeteredValue, a
// custom name that is empty, over MaxCustomNameBytes or not a valid id, or
// more than MaxCustomDimensions custom names, is refused with *UsageError
// and nothing of u is added. Report is safe for concurrent use.
func Report(ec *effect.Context, u Usage) error {
	if err := u.validate(); err != nil {
		return err
	}
	if ec == nil {
		return nil
	}
	v, ok := tallies.Load(ec)
	if !ok {
		return nil
	}
	return v.(*tally).add(u)
}

// Metered reports whether a Metering ring is timing the effect running
// under ec, so that Report will be recorded. An effect that must be metered
// whatever the app wired (a model call) wraps itself in Metering when it is
// not.
func Metered(ec *effect.Context) bool {
	if ec == nil {
		return false
	}
	_, ok := tallies.Load(ec)
	return ok
}

func (u Usage) validate() error {
	for _, d := range []struct {
		name string
		v    *float64
	}{{"tokens", u.Tokens}, {"costUsd", u.CostUSD}, {"memBytes", u.MemBytes}, {"wallMs", u.WallMs}, {"netBytes", u.NetBytes}} {
		if d.v != nil && !validAmount(*d.v) {
			return &UsageError{Dimension: d.name, Reason: "amounts must be finite, non-negative and at most 1e15"}
		}
	}
	if len(u.Custom) > MaxCustomDimensions {
		return &UsageError{Dimension: "custom", Reason: "too many custom dimensions"}
	}
	for name, v := range u.Custom { //loom:order-independent validation only
		if err := validCustomName(name); err != nil {
			return err
		}
		if !validAmount(v) {
			return &UsageError{Dimension: name, Reason: "amounts must be finite, non-negative and at most 1e15"}
		}
	}
	return nil
}

func validCustomName(name string) error {
	if name == "" || name == fold.ProtoKey || len(name) > MaxCustomNameBytes || event.ValidateID("dimension", name) != nil {
		return &UsageError{Dimension: "custom", Reason: "a custom dimension needs a valid name of at most 64 bytes"}
	}
	return nil
}

func validAmount(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= fold.MaxMeteredValue
}

// tallies maps the effect context of every attempt Metering is timing to
// its tally; Report finds it there. An entry lives only while the chain
// inside Metering runs.
var tallies sync.Map // *effect.Context -> *tally

// tally is what one attempt reported. outer is the tally this one hides
// when Metering is (mis)wired twice, restored when it ends.
type tally struct {
	mu     sync.Mutex
	u      Usage
	outer  *tally
	hasOut bool
}

func track(ec *effect.Context) *tally {
	t := &tally{}
	if prev, ok := tallies.Load(ec); ok {
		t.outer, t.hasOut = prev.(*tally), true
	}
	tallies.Store(ec, t)
	return t
}

func untrack(ec *effect.Context, t *tally) {
	if t.hasOut {
		tallies.Store(ec, t.outer)
		return
	}
	tallies.CompareAndDelete(ec, t)
}

func (t *tally) add(u Usage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := func(cur **float64, v *float64) {
		if v != nil {
			*cur = Amount(*v + deref(*cur))
		}
	}
	custom := len(t.u.Custom)
	for name := range u.Custom { //loom:order-independent counting only
		if _, ok := t.u.Custom[name]; !ok {
			custom++
		}
	}
	if custom > MaxCustomDimensions {
		return &UsageError{Dimension: "custom", Reason: "too many custom dimensions"}
	}
	sum(&t.u.Tokens, u.Tokens)
	sum(&t.u.CostUSD, u.CostUSD)
	sum(&t.u.MemBytes, u.MemBytes)
	sum(&t.u.WallMs, u.WallMs)
	sum(&t.u.NetBytes, u.NetBytes)
	if len(u.Custom) > 0 && t.u.Custom == nil {
		t.u.Custom = make(map[string]float64, len(u.Custom))
	}
	for name, v := range u.Custom { //loom:order-independent each key summed on its own
		t.u.Custom[name] += v
	}
	return nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// meteredFact is RESOURCE_METERED as Metering writes it: the step and
// attempt it meters, ms, and the reported dimensions only. The field order
// is the byte order of the recorded payload.
type meteredFact struct {
	StepID   string             `json:"stepId"`
	Attempt  int64              `json:"attempt"`
	Ms       float64            `json:"ms"`
	Tokens   *float64           `json:"tokens,omitempty"`
	CostUSD  *float64           `json:"costUsd,omitempty"`
	MemBytes *float64           `json:"memBytes,omitempty"`
	WallMs   *float64           `json:"wallMs,omitempty"`
	NetBytes *float64           `json:"netBytes,omitempty"`
	Custom   map[string]float64 `json:"custom,omitempty"`
}

// fact is the RESOURCE_METERED of the attempt. A sum pushed past the
// ceiling by many reports is clamped to it, so the fact still validates.
func (t *tally) fact(ec *effect.Context, ms float64) meteredFact {
	t.mu.Lock()
	defer t.mu.Unlock()
	clamp := func(p *float64) *float64 {
		if p == nil {
			return nil
		}
		return Amount(min(*p, fold.MaxMeteredValue))
	}
	f := meteredFact{StepID: ec.StepID, Attempt: ec.Attempt, Ms: min(ms, fold.MaxMeteredValue),
		Tokens: clamp(t.u.Tokens), CostUSD: clamp(t.u.CostUSD), MemBytes: clamp(t.u.MemBytes),
		WallMs: clamp(t.u.WallMs), NetBytes: clamp(t.u.NetBytes)}
	if len(t.u.Custom) > 0 {
		f.Custom = make(map[string]float64, len(t.u.Custom))
		for name, v := range t.u.Custom { //loom:order-independent map into map
			f.Custom[name] = min(v, fold.MaxMeteredValue)
		}
	}
	return f
}
