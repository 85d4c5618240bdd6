// Package dst is deterministic simulation testing of flows: one seed
// drives everything. A run is a function of (the flows, a seed, the fault
// rates): the seed draws the runtime configuration, which executions start
// with which inputs, a sequence of operations against them and the faults
// the store layer injects; the run then checks a set of invariants, and a
// failing seed is reported with a one-line reproduction, replays exactly,
// and is shrunk to a short schedule a test can pin.
//
//	sim := &dst.Simulation{Flows: []dst.Flow{{Flow: checkout, Input: func(r *rand.Rand) any { return r.IntN(100) }}}}
//	dst.Check(t, sim, dst.CheckOptions{}) // 1,000 seeds; -dst.seeds=N, -dst.seed=N
//
// It is built on the public API only: loom.New over memstore stores
// wrapped in a fault layer, a virtual clock (loom.Config.Clock), a
// loom.Observer that hears drives and operations, and an effect.Middleware
// ring that counts effects. It is for tests: nothing in the kernel knows
// about it.
//
// # Faults
//
// The fault layer is one process's view of the durable stores. Append
// faults are keyed by the event they hit (execution, sequence), never by
// how the journal batched its events, and each fires at most once per
// run:
//
//   - FaultCrash: the events of the batch before the one hit are durable,
//     that event and the rest are not, the append fails with ErrCrashed,
//     and so does every later call about that execution; the rest of the
//     process dies at its next rest point, and the next process starts on
//     the surviving stores and recovers.
//   - FaultReject: the same cut, as a transient store error
//     (ErrRejected); the process lives on.
//   - FaultEffectCrash: the process dies inside the effect of a step the
//     flow declares non-idempotent, before the effect acts; its start is
//     durable, so the next process must park it in doubt.
//   - FaultSnapshot: a snapshot save fails (ambient: see below).
//   - FaultNotifyDrop, FaultNotifyDup: a subscription wake-up is
//     withheld (delivered late, as after a reconnect) or doubled.
//   - FaultLeaseExpiry: a dead process's live lease reads as expired, so
//     the next process takes its execution over at once.
//
// Every fault that fires, but the ambient snapshot faults, is recorded in
// the run's Schedule with the operation it fired in.
//
// # Operations
//
// A run starts executions of the flows that have an Input (OpStart) and
// then, drawn from what the world looks like after each one: answers a
// gate (OpAnswer), sends an inbox message (OpSend), moves the virtual
// clock, firing every timer due on the way one at a time (OpAdvance),
// kills the process at rest and starts the next one (OpCrash), runs a
// recovery pass (OpRecover), cancels (OpCancel), and answers an in-doubt
// park from what the world saw the effect do (OpResolve). After every
// operation the run settles: it waits, through Runtime.WaitForSettled, for
// every drive to park, end or stop, so no operation ever races a drive.
// Waits have a wall-clock bound (Simulation.WaitTimeout) as a safety net
// only; the one wall-clock delay is a withheld wake-up's, a few
// milliseconds, which costs a waiter latency and never an outcome.
//
// # Invariants
//
// After the operations, with faults off, a final phase lets a lease TTL
// pass (when leases are wired), recovers, checks that nothing is left
// running with no driver,
// then answers every park the way it asks to be answered, checking that
// each moves. Then it checks the final logs: every acknowledged event is
// there byte for byte, sequences are contiguous, every timer fired at most
// once per park, and the runtime's LoadState equals fold.Fold of the
// stored log (fold.Encode bytes). Throughout, the effect ring checks that
// no step with a recorded outcome runs again and that a non-idempotent
// step runs at most once per idempotency key, and every call into the
// runtime must return to its caller. Invariants lists them by name.
//
// # Determinism
//
// Everything the run chooses comes from the seed: no time.Now, no map
// order, no unseeded randomness; event ids are stamped by position as
// they enter the log; the branches of Parallel blocks run one at a time in
// an order each execution's stream of the seed chooses (loom.Interleaver).
// What the Go scheduler still owns, without a kernel hook to take it over,
// is the order of goroutines across executions inside one operation: a
// parent and its children, a message sent right after a select parks (the
// park's own look at its inbox), and whether a snapshot save after a park
// comes before the next operation. Runs of
// flows without those are byte-for-byte deterministic (a test runs seeds
// twice and compares schedules, traces and logs); runs with them check
// the same invariants, and a failure there may need its seed run again.
// Snapshot faults are ambient for that reason: drawn from the seed in
// every run, replays included, and never listed in a schedule.
//
// # Shrinking
//
// Simulation.Shrink replays a failing schedule with faults dropped one at
// a time and runs of operations dropped, halving down to single ones, for
// as long as the same invariant still breaks. Schedule.String is the text
// form MustParseSchedule reads back, so the minimal schedule pins into a
// test as a Simulation.Replay. docs/dst.md is the guide.
package dst
