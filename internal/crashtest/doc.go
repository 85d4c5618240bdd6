// Package crashtest is the crash matrix: it kills a flow at every append
// point of its log and checks that recovery in a fresh runtime finishes it
// with every durably completed effect run exactly once (DESIGN "Testing").
//
// The pieces:
//
//   - FaultStore wraps a store.EventStore and "kills the process" once a
//     chosen number of events are durable: the batch that crosses the
//     limit leaves only its prefix up to the limit, and every later write
//     fails with ErrKilled. It forwards the optional capabilities the
//     runtime uses (store.Subscriber, store.RangeReader,
//     store.PrefixCopier).
//   - NewFlow is the flow under test: ten counted steps, a recorded
//     decision, a Parallel block of three branches and a gate with a resume
//     schema, whose output depends on all of them.
//   - RunReference runs it once without a fault; Check runs one case
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
// steps share one set of invocation counters: the outside world, whose
// effects outlive a crash. Every wait follows the log (a subscription) or a
// Close; nothing sleeps. Clocks are fixed, and the matrix is exhaustive and
// deterministic in its cases: it has no seed.
//
// Nothing outside the module's tests should import this package.
package crashtest
