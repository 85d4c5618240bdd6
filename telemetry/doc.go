// Package telemetry traces and measures a loom runtime with OpenTelemetry:
// it implements loom.Observer (the kernel's telemetry seam) and a durable
// event hook, and serves the metrics to Prometheus if asked.
//
//	tel, err := telemetry.New(telemetry.Options{TracerProvider: tp, MeterProvider: mp})
//	cfg := loom.Config{Storage: st, Flows: flows}
//	tel.Wire(&cfg) // sets cfg.Observer, chains cfg.OnDurableEvent
//	rt, err := loom.New(cfg)
//
// Unwired, the kernel calls none of this (Config.Observer is nil). Wired,
// every method returns without blocking, holds no lock across a call into
// OpenTelemetry, builds its metric attribute sets once per value, and sets
// span attributes only on spans that record. Given the no-op providers of
// otel/trace/noop and otel/metric/noop, it starts no span, reads no clock
// and chains no durable hook; with a real SDK, the cost is the SDK's per
// span and per measurement.
//
// # Traces
//
//	loom.operation <name>  start, resume, cancel, send, fork, resume-as, resolve, deny, redrive:
//	                       from the call to its durable commit or refusal; a child of the
//	                       caller's span (HTTPMiddleware puts an HTTP caller's there)
//	loom.drive             one drive of an execution, launch to park or end; events
//	                       "resumed" (a drive a resume launched) and "parked"
//	loom.step              one live attempt of a step; a retry is a second span
//	loom.append            one durable journal append batch
//
// The kernel records the operation's trace carrier (Options.Propagator, W3C
// by default) in the metadata of the execution's first event, member
// "trace". A drive's parent is the operation's span when the operation's
// caller carried a trace; otherwise it is that recorded trace, so a resume
// or a recovery on another node, its caller carrying no trace, continues the
// trace the execution started in (the drive then links to its operation's
// own span). A resume carrying a trace of its own is parented there and
// links to the recorded one. Reading the recorded carrier costs one read of
// the log's first event per such drive; a start's drive never reads it.
//
// Append is called by the journal's tail with the runtime's own context: its
// span is parented in the execution's live drive (or operation) on this
// Telemetry, else it is a root span naming the execution.
//
// A parked flow that the runtime keeps in memory (Config.StickyParks) does
// not end its drive: its drive span lasts until it is resumed in place or
// evicted, and has no "parked" event.
//
// # Attributes and payloads
//
// Spans carry loom.execution.id, loom.flow.id, loom.operation,
// loom.step.id, loom.tool.id, loom.step.kind, loom.step.attempt,
// loom.append.events and loom.status (a drive's end). A failed span has
// status error, error.type (the error's Go type; for a step, the type its
// effect returned) and, for a typed failure, loom.error.channel. Nothing
// else: no step input or output (the seam never passes them) and no error
// message, which may quote inputs or secrets, unless Options.Payloads is
// set — then the message is the status description and an "exception"
// event.
//
// # Metrics
//
//	name                          kind              unit         attributes                 from
//	loom.executions.started       counter           {execution}  loom.flow.id               EXECUTION_STARTED
//	loom.executions.completed     counter           {execution}  loom.flow.id               EXECUTION_COMPLETED
//	loom.executions.failed        counter           {execution}  loom.flow.id               EXECUTION_FAILED
//	loom.executions.cancelled     counter           {execution}  loom.flow.id               EXECUTION_CANCELLED
//	loom.executions.continued     counter           {execution}  loom.flow.id               EXECUTION_CONTINUED
//	loom.executions.suspended     counter           {execution}  loom.flow.id               EXECUTION_SUSPENDED
//	loom.executions.resumed       counter           {execution}  loom.flow.id               EXECUTION_RESUMED
//	loom.executions.parked        up-down counter   {execution}  loom.flow.id               see below
//	loom.step.retries             counter           {retry}      loom.flow.id               STEP_RETRYING
//	loom.step.attempts            counter           {attempt}    loom.step.kind, loom.outcome  Observer.StepAttempt
//	loom.step.duration            histogram         s            loom.step.kind, loom.outcome  Observer.StepAttempt
//	loom.journal.append.duration  histogram         s            loom.outcome               Observer.Append
//	loom.journal.append.events    histogram         {event}      loom.outcome               Observer.Append
//	loom.timer.lag                histogram         s            loom.timer.kind            Observer.TimerFired
//	loom.lease.takeovers          counter           {takeover}                              Observer.LeaseTakenOver
//	loom.drives                   counter           {drive}      loom.outcome               Observer.Drive's end
//	loom.queue.depth              gauge             {item}       loom.queue, loom.queue.state  ObserveQueue
//	loom.executions.by_status     gauge             {execution}  loom.status                ObserveStatuses
//
// loom.outcome is ok or error for steps and appends, and for drives the
// status a drive ended in (suspended, completed, failed, cancelled,
// continued) or aborted. loom.timer.kind is a timer key's prefix ("park" for
// the runtime's park timers). Each of loom.flow.id, loom.step.kind and
// loom.timer.kind takes at most MaxAttributeValues values; later ones are
// reported as "other".
//
// The execution counters come from Config.OnDurableEvent, so they count
// what the log holds, once, on the node that made it durable: sum them
// across nodes. They miss what the kernel drops when the hook falls more
// than Config.EventHookBuffer events behind (Runtime.DroppedDurableEvents).
// loom.executions.parked is the sum of per-node transitions: +1 a park, -1 a
// resume, and -1 the end (a cancel) of an execution this node saw park and
// not resume (it remembers at most MaxTrackedParks of them). Summed across
// nodes it is the number parked, except for a parked execution cancelled on
// a node that did not see it park; for the store's exact count, use
// ObserveStatuses.
//
// NewPrometheus makes a MeterProvider backed by the OpenTelemetry
// Prometheus exporter on a registry of its own, and the handler to serve at
// /metrics (names translated: loom_executions_started_total,
// loom_step_duration_seconds…).
package telemetry
