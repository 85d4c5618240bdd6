package loom

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
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
	if event.IsKnown(t) || strings.HasPrefix(t, "__loom_") {
		return &ResumeRefusedError{ExecutionID: id, Reason: RefusedKernelEventType,
			Detail: "a resume cannot carry a kernel event type"}
	}
	return nil
}

// admit applies the state rules of the ingress gate to a parked execution
// and returns the payload to record (parsed by the gate's resume schema when
// the flow declares one). Nothing is appended by admit.
func (rt *Runtime) admit(id string, st fold.State, flow *Flow, ev ResumeEvent) (json.RawMessage, error) {
	refuse := func(reason RefusalReason, detail string) error {
		return &ResumeRefusedError{ExecutionID: id, Reason: reason, Detail: detail}
	}
	switch {
	case st.Status.Terminal():
		return nil, refuse(RefusedTerminal, "the execution has ended; use ResumeAs to re-open it")
	case st.Status != fold.StatusSuspended:
		return nil, refuse(RefusedNotSuspended, "the execution is not parked yet; retry once it is")
	}
	park := st.Variables.SuspendedOn
	gate := ""
	if park != nil {
		gate = park.On
	}
	if gate == fold.GateInDoubt {
		return nil, &ResumePayloadValidationError{ExecutionID: id, Gate: gate,
			Detail: "an in-doubt park takes only an operator verdict for the parked step (ResolveInDoubt)"}
	}
	switch {
	case ev.EventType == event.TimerFired:
		if park == nil || park.WakeAt == nil {
			return nil, refuse(RefusedTimerNotDue, "the gate has no recorded wakeAt")
		}
		if rt.cfg.Clock.Now().UnixMilli() < *park.WakeAt {
			return nil, refuse(RefusedTimerNotDue, "the recorded wakeAt is in the future")
		}
	case ev.EventType != gate:
		return nil, refuse(RefusedGateMismatch, "the execution is parked on gate "+gate)
	}
	null := isNullJSON(ev.Payload)
	if null && st.Variables.FailedWhileParked {
		return nil, refuse(RefusedNullAfterFailure, "a step failed while the execution was parked; answer with a value")
	}
	payload := orNull(ev.Payload)
	if s, ok := flow.resume[ev.EventType]; ok {
		parsed, err := s.Parse(payload)
		if err != nil {
			if errors.Is(err, schema.ErrInvalid) {
				return nil, &ResumePayloadValidationError{ExecutionID: id, Gate: ev.EventType, Detail: err.Error()}
			}
			return nil, err
		}
		payload = parsed
	}
	return payload, nil
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
