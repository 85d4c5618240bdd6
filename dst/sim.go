package dst

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store/memstore"
)

// Flow is one flow under simulation, with what the simulator needs to
// drive it: how to draw an input, answer its gates and write its
// messages, and which of its steps are declared loom.NonIdempotent.
type Flow struct {
	Flow *loom.Flow
	// Input draws the input of a new execution. A flow without one is
	// never started by the simulator (a child flow, started by its parent).
	Input func(r *rand.Rand) any
	// Answer draws the answer to gate (default: true). It must pass the
	// flow's resume schema for the gate.
	Answer func(r *rand.Rand, gate string) any
	// Topics are the inbox topics the flow receives on; the simulator sends
	// to them while the execution lives, not only while it waits.
	Topics []string
	// Message draws a message for topic (default: a number below 100).
	Message func(r *rand.Rand, topic string) any
	// NonIdempotent lists the ids of the flow's steps declared
	// loom.NonIdempotent: each runs at most once per idempotency key.
	NonIdempotent []string
}

// Simulation is a deterministic simulation test of a set of flows: each
// run is a function of (the flows, a seed, the fault rates). Its zero
// value needs only Flows.
type Simulation struct {
	Flows []Flow
	// Faults are the fault rates (nil: DefaultRates; &Rates{}: none).
	Faults *Rates
	// Ops bounds the operations of one run (default 16).
	Ops int
	// Executions bounds the executions one run starts itself (default 3;
	// children and continue-as-new successors come on top).
	Executions int
	// WaitTimeout is the wall-clock bound of any one wait or call: a safety
	// net that turns a hang into a "settles" violation, never a
	// measurement (default 10s).
	WaitTimeout time.Duration
	// Events opens the durable event log of a run (default
	// memstore.NewEventStore). A store that loses or invents events fails
	// the invariants; the simulator never closes it.
	Events func() DurableEvents
	// Middleware is put around every effect, outermost first, inside the
	// kernel and outside the simulator's own ledger ring (the app's rings).
	Middleware []effect.Middleware
	// Configure, when set, is given each process's runtime configuration
	// after the simulator has set its own fields, to add what the flows
	// need (Effects, an Authorizer, a ResumeAuthenticator). It must leave
	// the stores, clock, ids, flows, features, recovery, durability,
	// middleware, observer and interleaver as they are: the simulation is
	// theirs.
	Configure func(cfg *loom.Config)
	// Attempts is how many replays Shrink gives a candidate schedule
	// before it counts it as passing (default 1). A failure that depends
	// on how the Go scheduler interleaved the code under test (a race in
	// it) comes back on most replays, not all; more attempts keep the
	// shrink from holding on to what it could drop.
	Attempts int
}

// Defaults of a Simulation.
const (
	DefaultOps         = 16
	DefaultExecutions  = 3
	DefaultWaitTimeout = 10 * time.Second
)

func (s *Simulation) ops() int        { return cmpOr(s.Ops, DefaultOps) }
func (s *Simulation) executions() int { return cmpOr(s.Executions, DefaultExecutions) }
func (s *Simulation) waitTimeout() time.Duration {
	if s.WaitTimeout > 0 {
		return s.WaitTimeout
	}
	return DefaultWaitTimeout
}

func (s *Simulation) rates() Rates {
	if s.Faults == nil {
		return DefaultRates()
	}
	return *s.Faults
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Run explores one seed: the seed draws the runtime configuration, the
// executions and inputs, every operation and every fault. The same seed
// gives the same schedule and outcome (see the package docs for the
// interleavings the Go scheduler still owns).
func (s *Simulation) Run(seed uint64) *Result {
	r := newRun(s, seed, nil)
	r.cfg = drawConfig(r.rnd)
	r.open()
	r.explore()
	return r.finish()
}

// Replay runs a recorded (or shrunk, or pinned) schedule: its operations
// in order and exactly its faults, wherever their executions reach them.
func (s *Simulation) Replay(sch Schedule) *Result {
	r := newRun(s, sch.Seed, sch.Faults)
	r.cfg = sch.Config
	r.open()
	for _, op := range sch.Ops {
		r.apply(op)
	}
	return r.finish()
}

// run is one run's world: the durable stores, the virtual clock, the
// ledgers that outlive processes, and the process running now.
type run struct {
	sim   *Simulation
	seed  uint64
	cfg   RunConfig
	plan  *plan
	rnd   *rand.Rand // draws operations (exploring only)
	clock *clock
	flows map[string]*Flow

	events     DurableEvents
	snapshots  *memstore.SnapshotStore
	timers     *memstore.TimerStore
	leases     *memstore.LeaseStore
	acked      ackLedger
	ledger     *effectLedger
	ids        atomic.Int64
	interleave *interleaver

	proc            *process
	rt              *loom.Runtime
	procs           int
	wedged          bool // a call did not return: the process is restarted
	pendingRecovery bool // a restart's recovery may wait out leases
	started         int

	ops   []Op
	trace []string

	mu         sync.Mutex
	violations []Violation
	seen       map[string]bool
}

func newRun(s *Simulation, seed uint64, replay []Fault) *run {
	r := &run{sim: s, seed: seed, plan: newPlan(seed, s.rates(), replay), rnd: streamOf(seed, "ops"),
		clock: newClock(), flows: map[string]*Flow{}, seen: map[string]bool{}, interleave: newInterleaver(seed)}
	for i := range s.Flows {
		if s.Flows[i].Flow == nil {
			panic(fmt.Sprintf("dst: Simulation.Flows[%d] has no Flow", i))
		}
		r.flows[s.Flows[i].Flow.ID] = &s.Flows[i]
	}
	r.ledger = newEffectLedger(r)
	return r
}

// drawConfig draws the runtime configuration from the seed's stream.
func drawConfig(rnd *rand.Rand) RunConfig {
	c := RunConfig{SnapshotEvery: []int{-1, 2, 5}[rnd.IntN(3)], Leases: rnd.IntN(2) == 0, StickyParks: rnd.IntN(2) == 0}
	if rnd.IntN(2) == 0 {
		c.Durability = loom.StepDurable
	}
	return c
}

// open opens the durable stores and the first process.
func (r *run) open() {
	if r.sim.Events != nil {
		r.events = r.sim.Events()
	} else {
		r.events = memstore.NewEventStore()
	}
	r.snapshots, r.timers, r.leases = memstore.NewSnapshotStore(), memstore.NewTimerStore(), memstore.NewLeaseStore()
	r.startProcess()
}

// note adds a line to the trace.
func (r *run) note(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

// violate records a broken invariant, once per (invariant, execution,
// detail).
func (r *run) violate(inv, exec, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := inv + "\x00" + exec + "\x00" + detail
	if r.seen[k] {
		return
	}
	r.seen[k] = true
	r.violations = append(r.violations, Violation{Invariant: inv, Execution: exec, Detail: detail})
}

// nonIdempotent reports whether flow declares step non-idempotent.
func (r *run) nonIdempotent(flow, step string) bool {
	f := r.flows[flow]
	return f != nil && slices.Contains(f.NonIdempotent, step)
}

// finish is the final phase: no more faults; a last recovery; the checks.
func (r *run) finish() *Result {
	r.plan.stop()
	r.plan.setOp(len(r.ops))
	r.settle()
	if r.cfg.Leases {
		// Let a lease TTL pass: no dead process's lease holds anything now.
		r.clock.advanceTo(r.clock.Now().Add(leaseTTL + time.Millisecond))
		r.note("final: waited out every lease (%s)", leaseTTL)
	}
	r.recoverPass()
	r.pendingRecovery = true
	r.settle()
	r.checkStuck()
	r.drain()
	r.settle()
	r.checkLogs()
	_ = r.rt.Close()
	res := &Result{Schedule: Schedule{Seed: r.seed, Config: r.cfg, Ops: slices.Clone(r.ops), Faults: r.plan.faults()},
		Trace: r.trace, Logs: r.renderLogs(), SnapshotFaults: r.plan.ambientFaults()}
	r.mu.Lock()
	res.Violations = slices.Clone(r.violations)
	r.mu.Unlock()
	slices.SortStableFunc(res.Violations, func(a, b Violation) int {
		return strings.Compare(a.Invariant+"\x00"+a.Execution+"\x00"+a.Detail, b.Invariant+"\x00"+b.Execution+"\x00"+b.Detail)
	})
	return res
}

// renderLogs renders every final log as canonical JSON lines.
func (r *run) renderLogs() []byte {
	ids, logs, err := r.logs()
	if err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	var b bytes.Buffer
	for _, id := range ids {
		for _, e := range logs[id] {
			b.Write(event.EncodeValid(e))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// raw encodes v as JSON for an operation's payload.
func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("dst: a flow's Input, Answer or Message gave a value with no JSON form: " + err.Error())
	}
	return b
}

// interleaver is a run's loom.Interleaver: each execution's choices come
// from its own stream of the seed, so they do not depend on how the
// drives of several executions interleave, and a replay of the run makes
// them again. An execution's drives follow one another, across processes
// too, so its stream goes on where the last drive left it.
type interleaver struct {
	seed uint64
	mu   sync.Mutex
	rnds map[string]*rand.Rand
}

func newInterleaver(seed uint64) *interleaver {
	return &interleaver{seed: seed, rnds: map[string]*rand.Rand{}}
}

// Next implements loom.Interleaver.
func (il *interleaver) Next(executionID string, runnable []string) int {
	il.mu.Lock()
	defer il.mu.Unlock()
	rnd := il.rnds[executionID]
	if rnd == nil {
		rnd = streamOf(il.seed, "interleave", executionID)
		il.rnds[executionID] = rnd
	}
	return rnd.IntN(len(runnable))
}
