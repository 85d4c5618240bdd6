// Package planted holds the kernel's planted faults: bugs built into the
// kernel only under the loom_planted build tag, so the dst package's tests
// can show that a seeded simulation finds each of them and shrinks it to a
// short schedule (docs/dst.md). In every other build Active is a function
// that returns false, inlined, and the compiler drops the faulty branches:
// no planted fault can be switched on in a release.
package planted

// Fault is one planted kernel bug.
type Fault int

const (
	// BarrierEarly: the journal's Barrier returns before what was
	// committed is durable, so an effect or a caller acts on events a
	// crash may still lose.
	BarrierEarly Fault = iota + 1
	// UnitSplit: the journal hands each event of a CommitAll unit to its
	// store in its own append, so a crash can leave an answer durable
	// without the resume it wakes.
	UnitSplit
	// InDoubtRerun: a non-idempotent step whose start is durable but whose
	// outcome is not (a crash hid whether it ran) is run again under the
	// same idempotency key instead of parking in doubt.
	InDoubtRerun
)
