package goldentest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// verdictPrefix starts the kernel decision id of an in-doubt verdict.
const verdictPrefix = "__loom_verdict:"

// ActionKind is what a caller (or the kernel's poller) did to the execution.
type ActionKind string

// The caller actions a history can hold.
const (
	ActStart   ActionKind = "start"   // Start(flow, input, WithExecutionID)
	ActResume  ActionKind = "resume"  // Resume(eventType, payload): a gate answer
	ActTimer   ActionKind = "timer"   // the due park timer fires (FireDueTimers at its wakeAt)
	ActRecover ActionKind = "recover" // a new process's Recover re-drives what a crash left running
	ActVerdict ActionKind = "verdict" // ResolveInDoubt: an operator's verdict on an in-doubt step
	// ActResumeAs is ResumeAs(eventType, payload, OntoFlow(Flow)): an
	// operator moves the parked execution onto another flow.
	ActResumeAs ActionKind = "resumeAs"
)

// Action is one external input of a scenario. Derived from a log (Load),
// every field that applies to its kind is filled; in a recording script
// (Record) At and WakeAt are computed.
type Action struct {
	Kind ActionKind
	// At is the clock during the action and its drive: its first event's
	// timestamp. Seq is the sequence of that event.
	At        int64
	Seq       int64
	Input     json.RawMessage
	EventType string
	Payload   json.RawMessage
	WakeAt    int64
	Verdict   loom.Verdict
	// Flow is the target flow of a resumeAs.
	Flow string
	// Crash names the step whose effect was running when the process died
	// during the drive this action began: the next action is a recover.
	Crash string
}

// StartWith is a script's start with input (marshalled as JSON).
func StartWith(input any) Action { return Action{Kind: ActStart, Input: mustJSON(input)} }

// Answer is a script's answer to gate with payload (marshalled as JSON).
func Answer(gate string, payload any) Action {
	return Action{Kind: ActResume, EventType: gate, Payload: mustJSON(payload)}
}

// AnswerOnto is a script's ResumeAs: the answer to gate with payload,
// moving the execution onto flow (which the case's config registers).
func AnswerOnto(flow, gate string, payload any) Action {
	return Action{Kind: ActResumeAs, EventType: gate, Payload: mustJSON(payload), Flow: flow}
}

// FireTimer is a script's firing of the timer the execution is parked on.
func FireTimer() Action { return Action{Kind: ActTimer} }

// RecoverRun is a script's recovery by a new process after a crash.
func RecoverRun() Action { return Action{Kind: ActRecover} }

// Crashing is a with the process dying while step's effect runs during the
// drive a begins; the script's next action is RecoverRun.
func (a Action) Crashing(step string) Action {
	a.Crash = step
	return a
}

// VerdictDone is an operator's verdict that attempt of the in-doubt step
// happened, with output.
func VerdictDone(step string, attempt int64, output any) Action {
	return Action{Kind: ActVerdict, Verdict: loom.Verdict{StepID: step, Attempt: attempt, Done: true, Output: mustJSON(output)}}
}

// VerdictRerun is an operator's verdict that attempt of the in-doubt step
// did not happen: it runs again.
func VerdictRerun(step string, attempt int64) Action {
	return Action{Kind: ActVerdict, Verdict: loom.Verdict{StepID: step, Attempt: attempt}}
}

// String describes a for a failure message.
func (a Action) String() string {
	s := string(a.Kind)
	switch a.Kind {
	case ActStart:
		s += " " + string(a.Input)
	case ActResume:
		s += " " + a.EventType + " " + string(a.Payload)
	case ActResumeAs:
		s += " " + a.EventType + " " + string(a.Payload) + " onto " + a.Flow
	case ActTimer:
		s += " wakeAt " + strconv.FormatInt(a.WakeAt, 10)
	case ActVerdict:
		s += fmt.Sprintf(" %s#%d done=%v %s", a.Verdict.StepID, a.Verdict.Attempt, a.Verdict.Done, a.Verdict.Output)
	}
	if a.Crash != "" {
		s += " (the process dies during step " + a.Crash + ")"
	}
	return s
}

// deriveActions reads a log's external inputs back from it:
//   - EXECUTION_STARTED (sequence 0) is the start: input, execution id, time;
//   - TIMER_FIRED with its EXECUTION_RESUMED is a timer firing at wakeAt;
//   - a kernel DECISION_RECORDED __loom_verdict:<step>#<attempt> with its
//     null EXECUTION_RESUMED is an operator's verdict;
//   - EXECUTION_RECOVERED is a recovery after a crash, and the step started
//     without an outcome before it is where the previous drive died;
//   - EXECUTION_MIGRATED with its EXECUTION_RESUMED is a ResumeAs onto the
//     flow the migration's envelope names;
//   - any other EXECUTION_RESUMED is a gate answer.
//
// Every other event is the flow's or the kernel's own doing; caller inputs
// the harness cannot replay (an authenticator's approval, a migration
// without its resume, a cancel, a fork) are refused.
func deriveActions(evs []event.Envelope) ([]Action, error) {
	if len(evs) == 0 || evs[0].Type != event.ExecutionStarted {
		return nil, errors.New("the log does not begin with EXECUTION_STARTED")
	}
	var started struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(evs[0].Payload, &started); err != nil {
		return nil, err
	}
	acts := []Action{{Kind: ActStart, At: evs[0].Timestamp, Input: started.Input}}
	open := map[string]bool{} // steps started without an outcome yet
	for i := 1; i < len(evs); i++ {
		e := evs[i]
		var p struct {
			StepID     string          `json:"stepId"`
			EventType  string          `json:"eventType"`
			Payload    json.RawMessage `json:"payload"`
			WakeAt     int64           `json:"wakeAt"`
			DecisionID string          `json:"decisionId"`
			Choice     json.RawMessage `json:"choice"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p) // an application event's payload may be anything
		resumedBy := func(eventType string) error {
			if i+1 >= len(evs) || evs[i+1].Type != event.ExecutionResumed {
				return fmt.Errorf("event %d (%s) is not followed by its EXECUTION_RESUMED", i, e.Type)
			}
			var r struct {
				EventType string `json:"eventType"`
			}
			_ = json.Unmarshal(evs[i+1].PayloadOrNull(), &r)
			if r.EventType != eventType {
				return fmt.Errorf("event %d resumes %q, want %q", i+1, r.EventType, eventType)
			}
			i++
			return nil
		}
		a := Action{At: e.Timestamp, Seq: e.Sequence}
		switch e.Type {
		case event.StepStarted:
			open[p.StepID] = true
			continue
		case event.StepCompleted, event.StepFailed:
			delete(open, p.StepID)
			continue
		case event.ExecutionRecovered:
			if len(open) != 1 {
				return nil, fmt.Errorf("event %d: a recovery with %d steps open; the harness replays a crash inside one step's effect", i, len(open))
			}
			for step := range open { //loom:order-independent exactly one
				acts[len(acts)-1].Crash = step
			}
			a.Kind = ActRecover
		case event.TimerFired:
			if err := resumedBy(event.TimerFired); err != nil {
				return nil, err
			}
			a.Kind, a.WakeAt = ActTimer, p.WakeAt
		case event.DecisionRecorded:
			if !e.Kernel() {
				continue // the flow's: ctx.Decide, loom.Now and the like
			}
			if !strings.HasPrefix(p.DecisionID, verdictPrefix) {
				return nil, fmt.Errorf("event %d: kernel decision %q is a caller input the harness does not replay", i, p.DecisionID)
			}
			step, n, ok := strings.Cut(strings.TrimPrefix(p.DecisionID, verdictPrefix), "#")
			attempt, err := strconv.ParseInt(n, 10, 64)
			var v struct {
				Verdict string          `json:"verdict"`
				Output  json.RawMessage `json:"output"`
			}
			if !ok || err != nil || json.Unmarshal(p.Choice, &v) != nil {
				return nil, fmt.Errorf("event %d: unreadable verdict %q", i, p.DecisionID)
			}
			if err := resumedBy(""); err != nil {
				return nil, err
			}
			a.Kind = ActVerdict
			a.Verdict = loom.Verdict{StepID: step, Attempt: attempt, Done: v.Verdict == "done", Output: v.Output}
		case event.ExecutionMigrated:
			if i+1 >= len(evs) || evs[i+1].Type != event.ExecutionResumed {
				return nil, fmt.Errorf("event %d: a migration the harness replays is a ResumeAs, followed by its EXECUTION_RESUMED", i)
			}
			var r struct {
				EventType string          `json:"eventType"`
				Payload   json.RawMessage `json:"payload"`
			}
			_ = json.Unmarshal(evs[i+1].PayloadOrNull(), &r)
			a.Kind, a.EventType, a.Payload, a.Flow = ActResumeAs, r.EventType, r.Payload, e.WorkflowID
			i++
		case event.ExecutionResumed:
			a.Kind, a.EventType, a.Payload = ActResume, p.EventType, p.Payload
		case event.ApprovalGranted, event.ExecutionCancelled, event.ExecutionDenied, loom.ForkMarker:
			return nil, fmt.Errorf("event %d: %s is a caller input the harness does not replay", i, e.Type)
		default:
			continue
		}
		acts = append(acts, a)
	}
	return acts, nil
}

// SameActions says (nil) whether a log's derived actions are a script's:
// the same kinds, crash points, inputs, answers and verdicts, payloads
// compared in canonical JSON (times are the recording's, not the script's).
func SameActions(derived, script []Action) error {
	canon := func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return "null"
		}
		return string(event.MustCanonical(raw))
	}
	if len(derived) != len(script) {
		return fmt.Errorf("the log holds %d caller actions, the script %d", len(derived), len(script))
	}
	for i, d := range derived {
		s := script[i]
		if d.Kind != s.Kind || d.Crash != s.Crash || d.EventType != s.EventType || d.Flow != s.Flow ||
			canon(d.Input) != canon(s.Input) || canon(d.Payload) != canon(s.Payload) ||
			d.Verdict.StepID != s.Verdict.StepID || d.Verdict.Attempt != s.Verdict.Attempt ||
			d.Verdict.Done != s.Verdict.Done || canon(d.Verdict.Output) != canon(s.Verdict.Output) {
			return fmt.Errorf("action %d: the log has %v, the script %v", i, d, s)
		}
	}
	return nil
}
