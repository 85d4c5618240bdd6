package dst

import (
	"errors"
	"fmt"
	"strings"
)

// Violation is one invariant a run broke: its name (the Inv constants),
// the execution it concerns ("" for the run) and what was seen.
type Violation struct {
	Invariant string
	Execution string
	Detail    string
}

func (v Violation) String() string {
	if v.Execution == "" {
		return v.Invariant + ": " + v.Detail
	}
	return v.Invariant + ": " + v.Execution + ": " + v.Detail
}

// Result is one run: its schedule, what each operation did, the
// invariants it broke and the final logs.
type Result struct {
	Schedule Schedule
	// Trace has one line per operation (and per restart): what it did.
	Trace []string
	// Violations are the broken invariants, in a deterministic order.
	Violations []Violation
	// SnapshotFaults counts the ambient FaultSnapshot faults that fired.
	SnapshotFaults int
	// Logs is every final log, inbox streams included, one canonical event
	// per line, by execution id: two runs of one seed compare byte for byte.
	Logs []byte
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Err returns nil for a passing run and a *FailureError for a failing one.
func (r *Result) Err() error {
	if !r.Failed() {
		return nil
	}
	return &FailureError{Seed: r.Schedule.Seed, Violations: r.Violations}
}

// ErrFailed matches every *FailureError.
var ErrFailed = errors.New("dst: invariant violated")

// FailureError is a run that broke invariants.
type FailureError struct {
	Seed       uint64
	Violations []Violation
}

func (e *FailureError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dst: seed %d broke %d invariant(s):", e.Seed, len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrFailed) true.
func (e *FailureError) Is(target error) bool { return target == ErrFailed }
