package admission

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// Append is one event an admitted resume appends, in order. A nil Payload
// is an event without a payload; Kernel stamps metadata.kernel: true.
type Append struct {
	Type    string
	Payload json.RawMessage
	Kernel  bool
}

// Verdict choices recorded in VerdictChoice.Verdict.
const (
	VerdictDone  = "done"
	VerdictRerun = "rerun"
)

// VerdictChoice is the choice of an in-doubt verdict's DECISION_RECORDED:
// the effect happened (VerdictDone, with the step's Output) or it must run
// again as a new attempt (VerdictRerun).
type VerdictChoice struct {
	Verdict string          `json:"verdict"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// VerdictDecisionID is the reserved decision id of an operator's verdict on
// an in-doubt step attempt (K9.3): "__loom_verdict:<stepId>#<attempt>".
func VerdictDecisionID(stepID string, attempt int64) string {
	return ReservedPrefix + "verdict:" + stepID + "#" + strconv.FormatInt(attempt, 10)
}

// Events returns what the admitted resume appends, in order:
//
//   - ActionAnswer: APPROVAL_GRANTED {principal, gate} when principal is
//     non-nil (the ResumeAuthenticator's verdict), TIMER_FIRED {wakeAt} for a
//     timer's answer, then EXECUTION_RESUMED {eventType, payload, waitId?},
//     kernel-stamped when it addresses a Select's wait;
//   - ActionRedrive: EXECUTION_RECOVERED {reason};
//   - ActionReopen: EXECUTION_RESUMED without payload (status only);
//   - ActionVerdict: a kernel-stamped DECISION_RECORDED {decisionId, choice}
//     keyed by VerdictDecisionID, then EXECUTION_RESUMED without payload.
//
// Only a gate answer records a principal: the other actions have no gate
// and ignore it. Events is pure; it fails only on a principal that is not
// JSON, or on an Admission that no admission function returned.
func (a Admission) Events(principal json.RawMessage) ([]Append, error) {
	switch a.Action {
	case ActionAnswer:
		var out []Append
		if principal != nil {
			p, err := json.Marshal(map[string]any{"principal": principal, "gate": a.EventType})
			if err != nil {
				return nil, errors.New("admission: the principal is not JSON")
			}
			out = append(out, Append{Type: event.ApprovalGranted, Payload: p})
		}
		if a.WakeAt != nil {
			out = append(out, Append{Type: event.TimerFired, Payload: timerPayload(*a.WakeAt)})
		}
		resumed := map[string]any{"eventType": a.EventType, "payload": orNull(a.Payload)}
		if a.WaitID != "" {
			resumed["waitId"] = a.WaitID
		}
		p, err := json.Marshal(resumed)
		if err != nil {
			return nil, errors.New("admission: the answer is not JSON")
		}
		return append(out, Append{Type: event.ExecutionResumed, Payload: p, Kernel: a.WaitID != ""}), nil
	case ActionRedrive:
		p, err := json.Marshal(map[string]any{"reason": a.reason})
		if err != nil {
			return nil, err
		}
		return []Append{{Type: event.ExecutionRecovered, Payload: p}}, nil
	case ActionReopen:
		return []Append{{Type: event.ExecutionResumed}}, nil
	case ActionVerdict:
		choice := VerdictChoice{Verdict: VerdictRerun}
		if a.verdict.Done {
			choice = VerdictChoice{Verdict: VerdictDone, Output: orNull(a.verdict.Output)}
		}
		p, err := json.Marshal(map[string]any{"decisionId": VerdictDecisionID(a.verdict.StepID, a.verdict.Attempt), "choice": choice})
		if err != nil {
			return nil, errors.New("admission: the verdict's output is not JSON")
		}
		return []Append{{Type: event.DecisionRecorded, Payload: p, Kernel: true}, {Type: event.ExecutionResumed}}, nil
	}
	return nil, errors.New("admission: an Admission no admission function returned has no events")
}
