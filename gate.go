package loom

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
	"github.com/loom-kernel/loom/internal/journal"
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
		if err := event.Validate(event.Envelope{ID: "x", ExecutionID: id, Type: ev.EventType, Payload: ev.Payload}, event.Limits{MaxPayloadBytes: MaxResumePayloadBytes}); err != nil {
			return err
		}
		return event.ValidateExact("payload", ev.Payload)
	}
	return nil
}

// kernelNamespace is the first rule of the ingress gate (spec §5), run
// before identity so no authenticator is asked about a forged kernel event:
// a resume may not carry a kernel event type, except TIMER_FIRED (checked
// against the recorded wakeAt later) and EXECUTION_RECOVERED (a re-drive).
// The reserved __loom_ names are judged by admit, against the park.
func kernelNamespace(id string, ev ResumeEvent) error {
	return refusalError(id, admission.KernelNamespace(ev.EventType))
}

// admit applies the ingress gate (internal/admission) to a resume of an
// execution in st, under flow's resume schemas, and returns what it
// answers. Nothing is appended by admit.
func (rt *Runtime) admit(id string, st fold.State, flow *Flow, ev ResumeEvent) (admission.Admission, error) {
	a, err := admission.Admit(st, rt.schemas[flow.ID], admission.Event{Type: ev.EventType, Payload: ev.Payload}, rt.cfg.Clock.Now().UnixMilli())
	return a, refusalError(id, err)
}

// refusalError turns the gate's refusal into the public error it is.
func refusalError(id string, err error) error {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return err
	}
	if r.Kind == admission.PayloadInvalid {
		e := &ResumePayloadValidationError{ExecutionID: id, Gate: r.Gate, Detail: r.Detail}
		for _, v := range r.Violations {
			e.Violations = append(e.Violations, SchemaViolation(v))
		}
		return e
	}
	return &ResumeRefusedError{ExecutionID: id, Reason: RefusalReason(r.Reason), Detail: r.Detail}
}

// admittedEvents are what an admitted resume appends (Admission.Events),
// as journal commits.
func admittedEvents(a admission.Admission, principal json.RawMessage) ([]pendingEvent, error) {
	evs, err := a.Events(principal)
	if err != nil {
		return nil, err
	}
	out := make([]pendingEvent, len(evs))
	for i, e := range evs {
		out[i] = pendingEvent{typ: e.Type}
		if e.Payload != nil {
			out[i].payload = e.Payload
		}
		if e.Kernel {
			out[i].meta = kernelStamp()
		}
	}
	return out, nil
}

// commitAdmitted commits what an admitted resume appends.
func commitAdmitted(j *journal.Journal, a admission.Admission, principal json.RawMessage) error {
	evs, err := admittedEvents(a, principal)
	if err != nil {
		return err
	}
	return commitAll(j, evs)
}

// commitAll commits events through j as one unit: the log holds all of
// them or none, so an answer is never durable without the resume it wakes
// (a timer's TIMER_FIRED alone would have the timer fire again).
func commitAll(j *journal.Journal, evs []pendingEvent) error {
	group := make([]journal.Event, len(evs))
	for i, e := range evs {
		group[i] = journal.Event{Type: e.typ, Payload: e.payload, Meta: e.meta}
	}
	_, err := j.CommitAll(group)
	return err
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
	rt.dropParkTimer(ctx, id, parkWakeAt(suspendPayload{WakeAt: st.Variables.SuspendedOn.WakeAt, Waits: admission.ParkWaits(st)}))
}

func isNullJSON(raw json.RawMessage) bool { return admission.IsNullJSON(raw) }

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
