package loom

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/internal/schema"
)

// ResumeEvent is what a caller hands Resume: the event type (the gate it
// answers), the answer, and credentials for the ResumeAuthenticator (never
// recorded).
type ResumeEvent struct {
	EventType   string          `json:"eventType"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Credentials json.RawMessage `json:"credentials,omitempty"`
}

// MaxResumePayloadBytes caps a resume payload at the edge.
const MaxResumePayloadBytes = 1 << 20

// checkEdge refuses malformed input before anything is looked up.
func checkEdge(id string, ev ResumeEvent) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := event.ValidateID("eventType", ev.EventType); err != nil {
		return err
	}
	if len(ev.Payload) > MaxResumePayloadBytes {
		return &event.PayloadTooLargeError{Field: "payload", Size: len(ev.Payload), Limit: MaxResumePayloadBytes}
	}
	if len(ev.Payload) > 0 {
		return event.Validate(event.Envelope{ID: "x", ExecutionID: id, Type: ev.EventType, Payload: ev.Payload}, event.Limits{MaxPayloadBytes: MaxResumePayloadBytes})
	}
	return nil
}

// kernelNamespace is the first rule of the ingress gate (spec §5): a resume
// may not carry a kernel event type, except TIMER_FIRED (checked against the
// recorded wakeAt later) and EXECUTION_RECOVERED (a re-drive).
func kernelNamespace(id string, ev ResumeEvent) error {
	t := ev.EventType
	if t == event.TimerFired || t == event.ExecutionRecovered || t == fold.GateDiverged {
		return nil
	}
	if event.IsKnown(t) || strings.HasPrefix(t, reservedPrefix) {
		return &ResumeRefusedError{ExecutionID: id, Reason: RefusedKernelEventType,
			Detail: "a resume cannot carry a kernel event type"}
	}
	return nil
}

// admission is what admit found a resume answers.
type admission struct {
	payload json.RawMessage // the answer to record (parsed by a resume schema)
	waitID  string          // the Wave 2 wait it answers, "" for a positional gate
	timer   *int64          // the wakeAt a timer answer fires
}

// admit applies the state rules of the ingress gate to a parked execution
// and returns what the resume answers. Nothing is appended by admit.
func (rt *Runtime) admit(id string, st fold.State, flow *Flow, ev ResumeEvent) (admission, error) {
	refuse := func(reason RefusalReason, detail string) (admission, error) {
		return admission{}, &ResumeRefusedError{ExecutionID: id, Reason: reason, Detail: detail}
	}
	switch {
	case st.Status.Terminal():
		return refuse(RefusedTerminal, "the execution has ended; use ResumeAs to re-open it")
	case st.Status != fold.StatusSuspended:
		return refuse(RefusedNotSuspended, "the execution is not parked yet; retry once it is")
	}
	park := st.Variables.SuspendedOn
	gate := ""
	if park != nil {
		gate = park.On
	}
	if gate == fold.GateInDoubt {
		return admission{}, &ResumePayloadValidationError{ExecutionID: id, Gate: gate,
			Detail: "an in-doubt park takes only an operator verdict for the parked step (ResolveInDoubt)"}
	}
	var a admission
	if ev.EventType == event.TimerFired {
		at, err := rt.admitTimer(id, st, ev)
		if err != nil {
			return admission{}, err
		}
		a = at
	} else {
		waitID, ok := gateWaitID(st, ev.EventType)
		if !ok {
			return refuse(RefusedGateMismatch, "the execution is parked on gate "+gate)
		}
		a.waitID = waitID
	}
	if isNullJSON(ev.Payload) && st.Variables.FailedWhileParked {
		return refuse(RefusedNullAfterFailure, "a step failed while the execution was parked; answer with a value")
	}
	a.payload = orNull(ev.Payload)
	if a.timer != nil {
		return a, nil
	}
	if s, ok := flow.resume[ev.EventType]; ok {
		parsed, err := s.Parse(a.payload)
		if err != nil {
			if errors.Is(err, schema.ErrInvalid) {
				return admission{}, &ResumePayloadValidationError{ExecutionID: id, Gate: ev.EventType, Detail: err.Error()}
			}
			return admission{}, err
		}
		a.payload = parsed
	}
	return a, nil
}

// gateWaitID says whether eventType answers the park: the parked gate
// itself, or one of a select's gate waits (then its wait id).
func gateWaitID(st fold.State, eventType string) (string, bool) {
	park := st.Variables.SuspendedOn
	if park == nil {
		return "", false
	}
	if park.On != gateSelect {
		return "", park.On == eventType
	}
	for _, w := range parkWaits(st) {
		if w.Kind == waitGate && w.On == eventType && !answered(st, w.WaitID) {
			return w.WaitID, true
		}
	}
	return "", false
}

// admitTimer checks a TIMER_FIRED resume against the recorded wakeAt: the
// park (or one of its timer waits) must carry exactly that instant, and it
// must be due. An untimed gate is never woken by a timer.
func (rt *Runtime) admitTimer(id string, st fold.State, ev ResumeEvent) (admission, error) {
	refuse := func(detail string) (admission, error) {
		return admission{}, &ResumeRefusedError{ExecutionID: id, Reason: RefusedTimerNotDue, Detail: detail}
	}
	fired, ok := decodeTimerFired(ev.Payload)
	if !ok {
		return refuse("a timer resume carries the wakeAt it fires")
	}
	if rt.cfg.Clock.Now().UnixMilli() < fired.WakeAt {
		return refuse("the recorded wakeAt is in the future")
	}
	park := st.Variables.SuspendedOn
	if park == nil {
		return refuse("the execution is not parked")
	}
	if park.On == gateSelect {
		for _, w := range parkWaits(st) {
			if w.Kind == waitTimer && w.WakeAt != nil && *w.WakeAt == fired.WakeAt && !answered(st, w.WaitID) {
				return admission{waitID: w.WaitID, timer: w.WakeAt}, nil
			}
		}
		return refuse("no timer wait of the park is due at that wakeAt")
	}
	if park.WakeAt == nil || *park.WakeAt != fired.WakeAt {
		return refuse("the gate has no recorded wakeAt at that instant")
	}
	return admission{timer: park.WakeAt}, nil
}

// answerEvents are what a gate answer appends: the authenticator's
// verdict, the timer fact for a timer's answer, then the resume itself —
// wait-addressed and kernel-stamped when it answers a Wave 2 wait.
func answerEvents(ev ResumeEvent, principal json.RawMessage, a admission) []pendingEvent {
	var out []pendingEvent
	if principal != nil {
		out = append(out, pendingEvent{typ: event.ApprovalGranted,
			payload: map[string]any{"principal": principal, "gate": ev.EventType}})
	}
	if a.timer != nil {
		out = append(out, pendingEvent{typ: event.TimerFired, payload: map[string]int64{"wakeAt": *a.timer}})
	}
	resumed := map[string]any{"eventType": ev.EventType, "payload": a.payload}
	var meta map[string]json.RawMessage
	if a.waitID != "" {
		resumed["waitId"] = a.waitID
		meta = kernelStamp()
	}
	return append(out, pendingEvent{typ: event.ExecutionResumed, payload: resumed, meta: meta})
}

// commitAll commits events in order through j.
func commitAll(j *journal.Journal, evs []pendingEvent) error {
	for _, e := range evs {
		if _, err := j.Commit(e.typ, e.payload, e.meta); err != nil {
			return err
		}
	}
	return nil
}

// kernelStamp is the metadata of a kernel-written Wave 2 fact.
func kernelStamp() map[string]json.RawMessage {
	return map[string]json.RawMessage{"kernel": json.RawMessage("true")}
}

// afterAnswer drops the park timer an answer other than a timer's made
// pointless.
func (rt *Runtime) afterAnswer(ctx context.Context, id string, st fold.State, ev ResumeEvent) {
	if ev.EventType == event.TimerFired || st.Variables.SuspendedOn == nil {
		return
	}
	rt.dropParkTimer(ctx, id, parkWakeAt(suspendPayload{WakeAt: st.Variables.SuspendedOn.WakeAt, Waits: parkWaits(st)}))
}

func isNullJSON(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// authenticate runs the ResumeAuthenticator, before the gate rules, so it
// sees exactly the event the caller signed.
func (rt *Runtime) authenticate(ctx context.Context, id string, ev ResumeEvent) (json.RawMessage, error) {
	if rt.cfg.ResumeAuthenticator == nil {
		return nil, nil
	}
	principal, err := rt.cfg.ResumeAuthenticator.Authenticate(ctx, id, ev)
	if err != nil {
		return nil, &ResumeRefusedError{ExecutionID: id, Reason: RefusedUnauthenticated, Detail: err.Error()}
	}
	return orNull(principal), nil
}
