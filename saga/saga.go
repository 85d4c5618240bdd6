// Package saga undoes the completed steps of a flow that fails part way: a
// saga registers a compensation for each step it runs, and on failure runs
// them in reverse order, each as a recorded step.
//
//	s := saga.New(ctx)
//	flight, err := saga.Run(s, bookFlight, trip, cancelFlight)
//	if err != nil {
//		return nil, s.Compensate(err)
//	}
//
// Everything is derived from flow code and the log, so it is replay-safe:
// a step that completed is served from the log on replay and its
// compensation registered again in the same order; a compensation is the
// step "compensate:<step id>", so a crashed and recovered execution
// neither runs one twice (it is served from the log once it completed) nor
// skips one (the flow reaches Compensate again and runs what is left).
// There are no new syscalls.
//
// Fail a forward step with a typed failure (loom.Fail on a channel the
// step declares with loom.ErrorChannel) when it refuses for good: a typed
// failure is recorded and served from the log, so a recovery reaches
// Compensate exactly as the first run did. An untyped failure is re-run on
// recovery (the kernel's rule for errors it cannot tell are final): if the
// re-run then succeeds, the flow goes on past compensations that already
// ran — and Runtime.CheckReplay reports such a log as diverged.
//
// A compensation receives the compensated step's input and recorded
// output (Undo). A step that failed is not compensated: it did not
// complete. A compensation that fails is retried by its step's policy
// (loom.WithRetry, Config.DefaultRetry); if it still fails, Compensate
// stops there and returns a *CompensationError naming it and the ones not
// run — compensations depend on the later ones having run, so skipping
// ahead would undo in the wrong order, and an operator fixes the cause and
// resumes (ResumeAs onto a fixed flow re-runs the failed compensation).
package saga

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom"
)

// Undo is what a compensation receives: the compensated step's input and
// its recorded output.
type Undo[In, Out any] struct {
	Input  In  `json:"input"`
	Output Out `json:"output"`
}

// Saga collects the compensations of one flow run. Use one per flow run,
// from the flow's root goroutine or one Parallel branch (its order is the
// order of the Run calls that returned).
type Saga struct {
	c     *loom.Context
	undo  []compensation
	ended bool
}

type compensation struct {
	stepID string
	run    func() error
}

// ErrEnded refuses a Run or Compensate on a saga that already compensated.
var ErrEnded = errors.New("saga: the saga already compensated; start a new one")

// New returns an empty saga for the flow run c.
func New(c *loom.Context) *Saga { return &Saga{c: c} }

// Run runs step with in and, once it completed, registers compensate to
// undo it; it returns the step's output and error as loom.Run does. A nil
// step or compensation is refused before anything runs.
func Run[In, Out, U any](s *Saga, step *loom.Step[In, Out], in In, compensate *loom.Step[Undo[In, Out], U]) (Out, error) {
	var zero Out
	switch {
	case s == nil || s.c == nil:
		return zero, errors.New("saga: Run on a nil saga; use saga.New(ctx)")
	case s.ended:
		return zero, ErrEnded
	case step == nil || compensate == nil:
		return zero, errors.New("saga: Run needs a step and its compensation")
	}
	out, err := loom.Run(s.c, step, in)
	if err != nil {
		return out, err
	}
	stepID := step.ID()
	undo := Undo[In, Out]{Input: in, Output: out}
	s.undo = append(s.undo, compensation{stepID: stepID, run: func() error {
		t := *compensate.Task()
		t.ID = CompensationID(stepID)
		_, err := s.c.Execute(&t, undo)
		return err
	}})
	return out, nil
}

// CompensationID is the step id of the compensation of stepID.
func CompensationID(stepID string) string { return "compensate:" + stepID }

// Compensate runs the registered compensations, the last registered first,
// and returns an error wrapping cause (errors.Is and errors.As see it):
// cause itself when every compensation ran, else a *CompensationError. Call
// it once; later Runs and Compensates are refused with ErrEnded.
func (s *Saga) Compensate(cause error) error {
	if s == nil || s.c == nil {
		return errors.New("saga: Compensate on a nil saga")
	}
	if s.ended {
		return ErrEnded
	}
	s.ended = true
	for i := len(s.undo) - 1; i >= 0; i-- {
		if err := s.undo[i].run(); err != nil {
			var left []string
			for j := i - 1; j >= 0; j-- {
				left = append(left, s.undo[j].stepID)
			}
			return &CompensationError{Cause: cause, StepID: s.undo[i].stepID, Err: err, NotRun: left}
		}
	}
	return &CompensatedError{Cause: cause, Steps: s.compensated()}
}

// Registered returns the step ids whose compensations are registered, in
// the order they would run.
func (s *Saga) Registered() []string { return s.compensated() }

func (s *Saga) compensated() []string {
	out := make([]string, 0, len(s.undo))
	for i := len(s.undo) - 1; i >= 0; i-- {
		out = append(out, s.undo[i].stepID)
	}
	return out
}

// CompensatedError is what Compensate returns when every compensation ran:
// the cause, and the steps undone in the order they were. It unwraps to
// the cause.
type CompensatedError struct {
	Cause error
	Steps []string
}

func (e *CompensatedError) Error() string {
	return fmt.Sprintf("saga: %v (compensated %s)", e.Cause, strings.Join(e.Steps, ", "))
}

func (e *CompensatedError) Unwrap() error { return e.Cause }

// MarshalJSON lets the recorded failure carry the undone steps.
func (e *CompensatedError) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"cause": e.Cause.Error(), "compensated": e.Steps})
}

// CompensationError is a compensation that failed for good: the saga
// stopped there. NotRun lists the compensations after it, in run order.
type CompensationError struct {
	Cause  error
	StepID string
	Err    error
	NotRun []string
}

func (e *CompensationError) Error() string {
	return fmt.Sprintf("saga: compensating %q failed after %v: %v (not run: %s)", e.StepID, e.Cause, e.Err, strings.Join(e.NotRun, ", "))
}

// Unwrap returns the cause and the compensation's error.
func (e *CompensationError) Unwrap() []error { return []error{e.Cause, e.Err} }
