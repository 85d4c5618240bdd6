// Package loom is a durable execution kernel: flows are plain Go functions
// whose every meaningful moment — a step's outcome, a decision, a gate's
// answer — is an event in an append-only log, and whose state is a pure fold
// of that log (package fold). A crash, a deploy or a human's week-long pause
// is just another resume: the flow re-runs from the top and every syscall
// that already happened is served from the log instead of running again.
//
// Build a Runtime with New over an EventStore (store/memstore for tests,
// plugins/sqlite embedded, plugins/postgres when you outgrow one machine),
// register flows built with NewFlow, and Start them. Inside a flow, the
// *Context syscalls are the only durability touch-points:
//
//   - Execute / Run (and the typed Run with a Step): a durable step, served
//     from the log by step id once it completed or failed on a typed channel
//     (loops give each iteration its own id with Step.Iter);
//   - Decide, Now, Random, NegotiateBudget: non-determinism, recorded once;
//   - Parallel: branches as goroutines under structured concurrency;
//   - Suspend: park on a gate until Resume answers it, through the ingress
//     gate of spec §5 (kernel types refused, exactly the parked gate, resume
//     schemas, authenticator, authorizer — every refusal appends nothing);
//   - Sleep / SleepUntil: durable timers (with Config.Timers);
//   - Receive / Select: the durable inbox (with Features.Inbox);
//   - ContinueAsNew: end this execution and start its successor (with
//     Features.ContinueAsNew);
//   - Emit / Stream: application events, appended once per execution.
//
// KernelSyscalls lists them as the wire ABI names them.
//
// Guarantees: EXECUTION_STARTED is durable before the body runs and a
// duplicate caller-chosen id is refused before any effect; a non-idempotent
// step's start is durable before its effect runs and a crash in between
// parks it in doubt; a suspend, a completion and a failure are durable
// before anyone hears of them; a store write failure aborts the run at the
// next barrier with *JournalError, leaving the execution to automatic
// recovery (and a waiter hears *DriveAbortedError). A resume, a re-drive or a timer wake
// of an execution recorded under another code fingerprint is refused with
// *FlowCodeMismatchError; a replay that issues other step ids than its log
// parks on the reserved diverged gate.
// Fork copies a prefix of a log into a new execution (optionally a
// simulation) and Promote moves a BranchRegistry ref: there is no merge.
package loom
