package dst

import (
	"cmp"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
)

// Rates are the fault probabilities of a run, VOPR-style: each is the
// chance that one opportunity for the fault takes it. The decision for an
// opportunity is a pure function of (seed, fault kind, execution,
// position), drawn from a *rand.Rand seeded with both, so it does not
// depend on the order goroutines reach their opportunities in.
type Rates struct {
	// Crash is the chance that an appended event kills the process there.
	Crash float64
	// Reject is the chance that an appended event is refused by a
	// transient store error.
	Reject float64
	// SnapshotFail is the chance that a snapshot save fails.
	SnapshotFail float64
	// NotifyDrop and NotifyDup are the chances that an acknowledged
	// append's subscription wake-up is withheld (delivered late) or
	// delivered twice.
	NotifyDrop float64
	NotifyDup  float64
	// EffectCrash is the chance that the process dies inside a
	// non-idempotent step's effect, before it acts.
	EffectCrash float64
	// LeaseExpiry is the chance that a dead process's live lease reads as
	// expired when the next process looks at it.
	LeaseExpiry float64
}

// DefaultRates are the rates a Simulation with no Faults uses: a crash
// every 40 events or so, a rejected append every 80, a failed snapshot in
// five, a wake-up in twenty withheld or doubled, a crash inside one
// non-idempotent effect in ten, and half the dead processes' leases read
// as expired.
func DefaultRates() Rates {
	return Rates{Crash: 0.025, Reject: 0.0125, SnapshotFail: 0.2, NotifyDrop: 0.05, NotifyDup: 0.05, EffectCrash: 0.1, LeaseExpiry: 0.5}
}

func (r Rates) of(k FaultKind) float64 {
	switch k {
	case FaultCrash:
		return r.Crash
	case FaultReject:
		return r.Reject
	case FaultSnapshot:
		return r.SnapshotFail
	case FaultNotifyDrop:
		return r.NotifyDrop
	case FaultNotifyDup:
		return r.NotifyDup
	case FaultEffectCrash:
		return r.EffectCrash
	case FaultLeaseExpiry:
		return r.LeaseExpiry
	}
	return 0
}

// MaxCrashes bounds the crashes one run explores: past it the run injects
// no more, so a run whose every recovery crashes again still ends.
const MaxCrashes = 12

// plan decides which faults fire. Exploring, it draws each decision from
// the seed; replaying, it fires exactly the faults of a schedule. Either
// way a fault fires at most once per run, so the recovery after a crash at
// an event gets past that event.
type plan struct {
	mu      sync.Mutex
	seed    uint64
	rates   Rates
	replay  map[faultKey]bool // nil when exploring
	fired   map[faultKey]bool
	log     []Fault
	ambient []Fault
	op      int
	off     bool
	crashes int
}

func newPlan(seed uint64, rates Rates, replay []Fault) *plan {
	p := &plan{seed: seed, rates: rates, fired: map[faultKey]bool{}}
	if replay != nil {
		p.replay = map[faultKey]bool{}
		for _, f := range replay {
			if !ambient(f.Kind) {
				p.replay[f.key()] = true
			}
		}
	}
	return p
}

// fire reports whether the fault kind hits exec at position at, recording
// it when it does.
func (p *plan) fire(kind FaultKind, exec string, at int64) bool {
	return p.fireIn(p.current(), faultKey{kind: kind, exec: exec, at: at})
}

// fire2 is fire for an effect: step and attempt.
func (p *plan) fire2(kind FaultKind, exec, step string, attempt int64) bool {
	return p.fireIn(p.current(), faultKey{kind: kind, exec: exec, step: step, at: attempt})
}

// current is the index of the operation running now.
func (p *plan) current() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.op
}

// fireIn is fire for an opportunity that arose during operation op (a
// write that began then may reach its wake-up after the next operation
// began).
func (p *plan) fireIn(op int, k faultKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	kind := k.kind
	if p.off || p.fired[k] {
		return false
	}
	if ambient(kind) {
		// Drawn from the seed in a replay too, and never listed: see
		// ambient.
		if !decide(p.seed, p.rates.of(kind), k) {
			return false
		}
		p.fired[k] = true
		p.ambient = append(p.ambient, Fault{Kind: kind, Exec: k.exec, Step: k.step, At: k.at, Op: -1})
		return true
	}
	yes := p.replay[k]
	if p.replay == nil {
		crash := kind == FaultCrash || kind == FaultEffectCrash
		yes = (!crash || p.crashes < MaxCrashes) && decide(p.seed, p.rates.of(kind), k)
	}
	if !yes {
		return false
	}
	if kind == FaultCrash || kind == FaultEffectCrash {
		p.crashes++
	}
	p.fired[k] = true
	p.log = append(p.log, Fault{Kind: kind, Exec: k.exec, Step: k.step, At: k.at, Op: op})
	return true
}

// ambient reports whether a fault kind is drawn from the seed in every run
// and kept out of the schedule. A snapshot is saved after its park is
// durable, on the drive's goroutine, where the simulator cannot wait for
// it without a kernel hook: whether a save comes before or after the next
// operation (or before a crash) is the scheduler's. So its faults are
// decided by the seed alone, in a replay too, and a shrink never removes
// them; they change how much a resume replays, never a log.
func ambient(k FaultKind) bool { return k == FaultSnapshot }

// decide draws one fault decision from a generator seeded with the run's
// seed and the opportunity, so it is the same whenever it is asked.
func decide(seed uint64, rate float64, k faultKey) bool {
	if rate <= 0 {
		return false
	}
	return streamOf(seed, string(k.kind), k.exec, k.step, strconv.FormatInt(k.at, 10)).Float64() < rate
}

// streamOf is a generator of its own for one named purpose of a run.
func streamOf(seed uint64, names ...string) *rand.Rand {
	h := fnv.New64a()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// setOp names the operation the faults that fire next belong to.
func (p *plan) setOp(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.op = i
}

// stop injects nothing from now on (the final phase).
func (p *plan) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = true
}

// ambientFaults returns how many ambient faults fired.
func (p *plan) ambientFaults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ambient)
}

// faults returns the faults that fired, in a deterministic order: by
// operation, then execution, position and kind (goroutines of one
// operation may reach theirs in any order).
func (p *plan) faults() []Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.log)
	slices.SortFunc(out, func(a, b Fault) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.Exec, b.Exec), cmp.Compare(a.At, b.At), cmp.Compare(a.Step, b.Step),
			cmp.Compare(slices.Index(faultKinds, a.Kind), slices.Index(faultKinds, b.Kind)))
	})
	return out
}
