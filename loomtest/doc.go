// Package loomtest is the testing kit for Loom flows: import it from your
// own _test.go files to run a flow durably, deterministically and fast.
//
//   - New builds an Env: a loom.Runtime over memory stores (or a SQLite
//     file in t.TempDir() with WithSQLite), the flows of WithFlows, closed
//     by the test's cleanup.
//   - Clock is the runtime's fake clock; the runtime has no timer poller,
//     and SkipTime, FireNextTimer and AdvanceTime move the clock to each
//     stored timer in wake order and fire it through
//     loom.Runtime.FireDueTimers, with every execution at rest (parked or
//     ended) before and after each move, so a 30-day Sleep ends at once.
//   - WaitForGate, WaitForStep, WaitForCompletion, WaitForFailure and
//     WaitForSettled follow the durable log; each is bounded (the test's
//     deadline, or DefaultWaitTimeout) and fails the test with the
//     execution's status and last events, never a hang.
//   - NewMock replaces the effect of a tool id and counts its calls, so a
//     test can assert that a recorded step was served from the log.
//   - CrashAtNextAppend kills the process at its next write to the log, and
//     Restart opens the next process on the same stores and recovers.
//   - Cassette replays a recorded llm cassette (records it with
//     -loomtest.record), so agent flows never touch the network.
//   - Golden compares an execution's log with testdata/<name>.golden.jsonl,
//     ignoring what differs between runs, and records it with
//     -loomtest.update.
//
// Every helper that can fail takes the testing.TB to fail, and calls
// t.Helper, so a failure names the line of the test; a subtest passes its
// own t. Failures stop the test (t.Fatal), except Golden's mismatch, which
// is reported and lets the test go on.
//
// Determinism: the clock starts at Epoch and moves only when the test moves
// it, and ids come from a counter, so a test that starts its executions
// in one order writes the same log on every run. What the kernel draws at
// random (loom.Random's seed) is not injected; Golden masks it.
package loomtest
