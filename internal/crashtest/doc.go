// Package crashtest is the crash matrix: it kills a flow at every append
// point of its log and checks that recovery in a fresh runtime finishes it
// with every durably completed effect run exactly once (DESIGN "Testing").
//
// The pieces:
//
//   - FaultStore wraps a store.EventStore and "kills the process" once a
//     chosen number of events are durable: the batch that crosses the
//     limit leaves only its prefix up to the limit, and every later write
//     fails with ErrKilled; Kill kills it at any other moment (inside an
//     effect). It forwards the optional capabilities the
//     runtime uses (store.Subscriber, store.RangeReader,
//     store.PrefixCopier).
//   - Two flows run under the matrix, its Variants. NewFlow, the order
//     flow: ten counted steps, a recorded decision, a Parallel block of
//     three branches and a gate with a resume schema, whose output depends
//     on all of them. NewPaymentFlow, for K9: two steps declared
//     loom.NonIdempotent (charge, ship), whose effects act on the World
//     under their idempotency key, and two idempotent steps (receipt,
//     notice) delivering to a counting Sink under loom.IdempotencyKey,
//     around the same gate.
//   - RunReference runs a flow once without a fault; Check runs one case
//     (crash, recover, compare) and returns every violated property as an
//     error, so the kit itself can be tested; Run is the whole matrix for
//     a store, for memory and SQLite alike.
//
// A store's test calls Run with a function that opens fresh stores:
//
//	crashtest.Run(t, func(t *testing.T) crashtest.Stores {
//		return crashtest.Stores{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore()}
//	})
//
// A case has two runtimes over the same stores, standing for two processes.
// Runtime A drives the flow through a FaultStore — answering the gate if it
// gets there — until the flow completes or the store dies, and is closed,
// which waits for its drives to stop. Runtime B recovers the execution,
// answers the gate if it is parked there, and waits for completion. Their
// steps share one World: invocation counters, the non-idempotent steps'
// provider and the sink — the outside world, whose effects outlive a
// crash. Every wait follows the log (a subscription) or a Close; nothing
// sleeps. Clocks are fixed, and the matrix is exhaustive and deterministic
// in its cases: it has no seed.
//
// The payment flow adds the in-doubt rule (K9). A crash that leaves a
// non-idempotent step's STEP_STARTED durable without its outcome must make
// B park it in doubt — EFFECT_INDOUBT, then EXECUTION_SUSPENDED on the
// reserved gate with the step and attempt — without running it; the kit
// then answers as an operator would, after looking at the world: done,
// with the output the effect produced, when it acted before the crash,
// re-run when it never did (Runtime.ResolveInDoubt). Append points only
// ever crash after such an effect acted (its start is durable before it
// runs, and the store dies on a write), so each non-idempotent step also
// gets a case that kills the process inside its effect, before it acts.
// Whatever the crash, each non-idempotent effect acts exactly once in all,
// and each sink step's deliveries carry one distinct key.
//
// Nothing outside the module's tests should import this package.
package crashtest
