package crashtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Property names a guarantee the matrix checks.
type Property string

// The properties of one case.
const (
	// PropRun: the case could be driven at all (an unexpected error from the
	// runtime, a park on the wrong gate, a wait that never ended).
	PropRun Property = "run"
	// PropCompletes: the recovered execution completes.
	PropCompletes Property = "completes"
	// PropSequence: the log's sequences are 0..len-1, no gap, no duplicate.
	PropSequence Property = "sequence"
	// PropHistory: recovery leaves the durable prefix of the crashed run
	// untouched.
	PropHistory Property = "history"
	// PropNoRerun: a step (or decision) whose outcome was durable before the
	// crash never runs again.
	PropNoRerun Property = "no-rerun"
	// PropExactlyOnce: every step has exactly one outcome in the log and a
	// completed frame; no effect ran more than once per process.
	PropExactlyOnce Property = "exactly-once"
	// PropState: the final state equals the uncrashed run's, modulo
	// Normalize.
	PropState Property = "state"
	// PropInDoubt: recovery parks a non-idempotent step in doubt (K9)
	// exactly when the crash left its STEP_STARTED durable without an
	// outcome — EFFECT_INDOUBT, then EXECUTION_SUSPENDED on the reserved
	// gate with the step and attempt — and does not run it while parked.
	PropInDoubt Property = "in-doubt"
	// PropEffectOnce: a non-idempotent effect acted exactly once in all,
	// across the crashed and the recovering process: never twice silently.
	PropEffectOnce Property = "effect-once"
	// PropSinkOnce: an idempotent step's deliveries to the counting sink
	// carry exactly one distinct idempotency key, so the receiver performs
	// it once however often a crash re-ran the attempt.
	PropSinkOnce Property = "sink-once"
)

// Violation is one broken property of one case.
type Violation struct {
	Case     string
	Property Property
	Detail   string
}

// Error says which case broke which property, and how.
func (v *Violation) Error() string {
	return fmt.Sprintf("crashtest: %s: %s: %s", v.Case, v.Property, v.Detail)
}

// Violated reports whether err (a Check result, possibly joined) holds a
// violation of p.
func Violated(err error, p Property) bool {
	var found bool
	walk(err, func(e error) {
		if v, ok := e.(*Violation); ok && v.Property == p {
			found = true
		}
	})
	return found
}

func walk(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, f)
		}
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), f)
	}
}

// report collects a case's violations.
type report struct {
	name string
	errs []error
}

func (r *report) add(p Property, format string, args ...any) {
	r.errs = append(r.errs, &Violation{Case: r.name, Property: p, Detail: fmt.Sprintf(format, args...)})
}

// err joins the violations, with the runtimes' log lines when there are any.
func (r *report) err(logs *logBuffer) error {
	if len(r.errs) == 0 {
		return nil
	}
	if lines := logs.lines(); len(lines) > 0 {
		r.errs = append(r.errs, fmt.Errorf("runtime log of %s:\n  %s", r.name, strings.Join(lines, "\n  ")))
	}
	return errors.Join(r.errs...)
}

// logBuffer is a slog.Handler that keeps the first maxLogLines records of
// the case's runtimes, to explain a violation. It never writes to a
// testing.T: a journal goroutine may log after the test has returned.
type logBuffer struct {
	mu  sync.Mutex
	buf []string
	cut int
}

const maxLogLines = 40

func (l *logBuffer) Enabled(context.Context, slog.Level) bool { return true }

func (l *logBuffer) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) < maxLogLines {
		l.buf = append(l.buf, b.String())
	} else {
		l.cut++
	}
	return nil
}

func (l *logBuffer) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logBuffer) WithGroup(string) slog.Handler      { return l }

func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.buf...)
	if l.cut > 0 {
		out = append(out, fmt.Sprintf("… %d more lines", l.cut))
	}
	return out
}
