package eval

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// gateVisit is one park of an execution: the gate it reached and, once
// answered, the answer and the event type it was answered with (the gate's
// name, or TIMER_FIRED when its timer answered).
type gateVisit struct {
	Gate       string          `json:"gate"`
	Answered   bool            `json:"answered"`
	AnsweredBy string          `json:"answeredBy,omitempty"`
	Answer     json.RawMessage `json:"answer,omitempty"`
}

// recorded is what eval reads out of one log: its folded state and the
// gates it parked on, in order.
type recorded struct {
	state fold.State
	gates []gateVisit
}

// readLog folds log and lists its parks. It reads nothing but log.
func readLog(log []event.Envelope) recorded {
	r := recorded{state: fold.Fold(log)}
	for _, e := range log {
		switch e.Type {
		case event.ExecutionSuspended:
			var p struct {
				On string `json:"on"`
			}
			if event.UnmarshalExact(e.Payload, &p) == nil && p.On != "" {
				r.gates = append(r.gates, gateVisit{Gate: p.On})
			}
		case event.ExecutionResumed:
			n := len(r.gates)
			if n == 0 || r.gates[n-1].Answered {
				continue // a status-only resume (a recovery's re-drive) answers no park
			}
			var p struct {
				EventType string          `json:"eventType"`
				Payload   json.RawMessage `json:"payload"`
			}
			if event.UnmarshalExact(e.Payload, &p) != nil {
				p.Payload = e.Payload // a bare answer
			}
			g := &r.gates[n-1]
			g.Answered, g.AnsweredBy, g.Answer = true, p.EventType, canonical(p.Payload)
		}
	}
	return r
}

// ErrNotAFixture matches every refusal of CaseFromLog and SuiteFromLogs.
var ErrNotAFixture = errors.New("eval: the log cannot be a fixture")

// FixtureError says why a log cannot become a case. It matches
// ErrNotAFixture.
type FixtureError struct {
	ExecutionID string
	Reason      string
}

func (e *FixtureError) Error() string {
	return fmt.Sprintf("eval: execution %q cannot be a fixture: %s", e.ExecutionID, e.Reason)
}

// Is makes errors.Is(err, ErrNotAFixture) true.
func (e *FixtureError) Is(target error) bool { return target == ErrNotAFixture }

// CaseFromLog turns a recorded execution into a case: its name is the
// execution id, its input the recorded input, its answers the answers its
// gates were given, in order, and its expected value the recorded output.
// Running the case replays what the execution did against the code as it
// is now; grading it with Exact says whether the output is still the same.
//
// It refuses, with a *FixtureError, an empty log, an execution that has
// not completed (a failed, cancelled or parked one has no output to
// expect) and a gate answered by its timer (a case answers gates as a
// person does, with a resume; give that case's answer by hand).
func CaseFromLog(log []event.Envelope) (Case, error) {
	if len(log) == 0 {
		return Case{}, &FixtureError{Reason: "the log is empty"}
	}
	id := log[0].ExecutionID
	r := readLog(log)
	if r.state.Status != fold.StatusCompleted {
		return Case{}, &FixtureError{ExecutionID: id, Reason: fmt.Sprintf("it is %s, and only a completed execution has an output to expect", r.state.Status)}
	}
	c := Case{Name: id, Input: canonical(r.state.Variables.Input), Expected: canonical(r.state.Variables.Output)}
	for _, g := range r.gates {
		if !g.Answered {
			continue
		}
		if g.AnsweredBy == event.TimerFired {
			return Case{}, &FixtureError{ExecutionID: id, Reason: fmt.Sprintf("gate %q was answered by its timer; a case answers gates with a resume, so write this case's answers by hand", g.Gate)}
		}
		if g.Gate == fold.GateDiverged || g.Gate == fold.GateInDoubt {
			return Case{}, &FixtureError{ExecutionID: id, Reason: fmt.Sprintf("it parked on the kernel's %s gate; a fixture is a run the flow made on its own", g.Gate)}
		}
		c.Answers = append(c.Answers, Answer{Gate: g.Gate, Payload: g.Answer})
	}
	return c, nil
}

// SuiteFromLogs turns recorded executions of one flow into a suite named
// name, one case per log (CaseFromLog), graded by Exact on the whole
// output: the suite passes while the code reproduces every recorded
// output. Replace or add graders to judge less strictly. Logs of different
// flows, two logs of one execution, and every refusal of CaseFromLog are
// errors.
func SuiteFromLogs(name string, logs ...[]event.Envelope) (Suite, error) {
	s := Suite{Name: name, Graders: []Grader{Exact{}}}
	seen := map[string]bool{}
	for _, log := range logs {
		c, err := CaseFromLog(log)
		if err != nil {
			return Suite{}, err
		}
		flow := log[0].WorkflowID
		switch {
		case s.Flow == "":
			s.Flow = flow
		case flow != s.Flow:
			return Suite{}, &FixtureError{ExecutionID: c.Name, Reason: fmt.Sprintf("it ran flow %q, the suite's other logs %q", flow, s.Flow)}
		}
		if seen[c.Name] {
			return Suite{}, &FixtureError{ExecutionID: c.Name, Reason: "it is given twice"}
		}
		seen[c.Name] = true
		s.Cases = append(s.Cases, c)
	}
	if len(s.Cases) == 0 {
		return Suite{}, &FixtureError{Reason: "no logs were given"}
	}
	return s, nil
}
