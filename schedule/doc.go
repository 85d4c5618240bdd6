// Package schedule starts flow executions on cron schedules read on an IANA
// zone's wall clock (T1, ADR 0126), durably and once per tick however many
// nodes fire them.
//
// # The pure core
//
// Parse reads a 5-field (minute hour day-of-month month day-of-week) or
// 6-field (seconds first) cron expression, or an @hourly-style descriptor,
// with robfig/cron/v3's parser, and binds it to a zone loaded from the
// embedded tz database (time/tzdata), so zones work on any machine.
// Expr.Next, Expr.Prev and Expr.Ticks compute ticks from their arguments
// alone: no clock, no I/O.
//
// # The DST rule
//
// A tick is an instant. The tick of a wall time W that the expression
// matches is the first instant at which the zone's clock reads W or later:
//
//	tick(W) = min{ instant i : wall(i) >= W }
//
// Hence:
//   - a wall time that exists once ticks when the clock reads it;
//   - a wall time that does not exist (skipped by a spring-forward gap)
//     ticks once, at the first valid instant after the gap: "30 2 * * *" in
//     America/New_York ticks at 03:00 EDT on 2024-03-10 (07:00 UTC);
//   - a wall time that occurs twice (repeated by a fall-back overlap) ticks
//     once, at its first occurrence: "30 1 * * *" in America/New_York ticks
//     at 01:30 EDT on 2024-11-03 (05:30 UTC), not again at 01:30 EST;
//   - ticks are a set of instants: wall times that map to one instant (all
//     the minutes of a gap and the first minute after it) make one tick.
//
// So an every-minute expression loses no instant across a gap (01:59 EST is
// followed by 03:00 EDT, one real minute later) and fires nothing during the
// repeated pass of an overlap (01:59 EDT is followed by 02:00 EST, an hour
// and a minute later). robfig/cron's own Next skips a non-existent wall time
// instead; this package does not use it.
//
// # Execution ids
//
// Each tick starts its execution under the deterministic id
//
//	sched:<name>:<tick in UTC, RFC 3339, whole seconds>
//
// (TickID, e.g. "sched:nightly:2024-03-10T07:00:00Z"). Schedule names are
// ASCII letters, digits and "-_./" (ValidateName), never ':', so the id is
// unambiguous; ParseTickID inverts it. Two nodes that fire the same tick
// mint the same id, and the runtime refuses the second start with
// loom.ErrExecutionExists: the tick starts once.
//
// # The scheduler
//
// Scheduler keeps one timer per schedule under "schedule:<name>" in a
// store.TimerStore, whose WakeAt is the schedule's next tick: the timer is
// the durable cursor. Init creates missing timers; Fire, called by the
// runtime's timer poller for keys starting with Prefix, starts the due
// ticks under the schedule's MissedPolicy (Skip: the latest only; CatchUp:
// the Max latest, Max at most MaxCatchUp) and moves the timer to the next
// tick. A crash or a failure before the timer moves leaves it where it was,
// and the retry starts only the ticks whose ids do not exist yet.
package schedule
