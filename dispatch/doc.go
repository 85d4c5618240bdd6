// Package dispatch is the placement seam of spec §6 and architecture §5.5
// (D8): an execution is dispatched through a Dispatcher onto a WorkerRuntime,
// in process (LocalWorker over a *loom.Runtime) or on another machine
// (plugins/workerhttp), without touching the kernel.
//
// # Coordinates, never code
//
// What travels is an ExecutionPackage: the execution id, the flow id, the
// start input or a resume hint — data only. Closures cannot be serialized,
// so every worker is built with the same statically wired flows (P5) and
// reconstructs the execution's state from the shared stores; that is why a
// stateless worker anywhere can resume any execution ("resume is
// migration"). The JSON shapes are stable:
//
//	{"executionId":"o-1","flowId":"orders","input":{"sku":"x"}}                            start
//	{"executionId":"o-1","flowId":"orders","resume":{"eventType":"approve","payload":true}}  answer a gate
//	{"executionId":"o-1","flowId":"orders","resume":{"recover":true}}                      re-drive a crashed execution
//
// and a worker answers each with an ExecutionResult, the execution at its next
// settle point (parked or ended):
//
//	{"executionId":"o-1","status":"suspended","suspendedOn":"approve","sequence":3}
//	{"executionId":"o-1","status":"completed","output":{"shipped":true},"sequence":7}
//	{"executionId":"o-1","status":"failed","error":"card declined","sequence":5}
//
// A flow that fails is a result, not a dispatch error: the error return of
// Dispatch and Execute is kept for packages that did not run (refused,
// invalid, unreachable worker).
//
// # Idempotence
//
// A dispatcher may deliver a package more than once (a retry after a lost
// response, a duplicate from a queue). A start of an execution that exists
// and a recover of one that is parked or ended report the execution's state
// instead of failing. A resume is not idempotent by itself: once its answer
// is recorded, a duplicate is refused by the runtime's ingress gate with a
// typed *loom.ResumeRefusedError, which no supervisor retries; read the
// execution's state to learn where it stands.
//
// # Pieces
//
//   - LocalWorker runs packages on a *loom.Runtime in this process.
//   - LocalDispatcher hands packages to a WorkerRuntime with bounded
//     concurrency.
//   - SupervisingDispatcher (K4) restarts a failed dispatch with exponential
//     backoff and keeps a circuit breaker per target, on an injected clock.
//   - Pool is a Dispatcher over many WorkerRuntimes (several
//     workerhttp.RemoteWorkers): least-loaded placement, optional capacity
//     per worker, and failover off a worker that cannot be reached, which
//     stays out of the rotation until CheckHealth brings it back.
//   - dispatchtest.RunDispatcher is the conformance kit every Dispatcher runs
//     (spec §7, DispatcherSPIVersion).
//
// # Queued starts
//
// Queue puts a durable start queue (store.QueueStore) in front of a
// Dispatcher: Enqueue stores a start, idempotent by execution id; Run
// claims ready starts under store.QueueLimits (concurrency across nodes,
// per node, per partition, a rate) and dispatches each as a start package,
// renewing the claim while it runs. A result completes the claim; a
// refusal of the start itself (a duplicate, an unknown flow, an invalid
// package, a denial) completes it and is reported; any other failure
// releases it to be claimed again, up to MaxAttempts. A node that dies
// holds its claims only until they expire. Which tenant is claimed next is
// the Scheduler's choice: FIFOScheduler takes the store's priority order;
// NewFairScheduler's weighted round-robin keeps a tenant with a backlog
// from delaying the others by more than their own turns.
//
// Errors say what was refused and never echo a payload or credentials.
// IsRetryable tells a transient failure (a store write, an unreachable or
// overloaded worker) from a refusal that would fail again.
package dispatch
