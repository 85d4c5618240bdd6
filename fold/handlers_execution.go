package fold

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/loom-kernel/loom/event"
)

// Execution-level handlers: the only ones that move State.Status.

// fields decodes an object payload field by field, so one malformed optional
// field does not make a lifecycle event inert. Names are exact: a member
// spelled another way is not the field. A payload that is not an object, or
// is malformed (a member name given twice, invalid UTF-8, a lone surrogate
// escape), has no fields.
func fields(e event.Envelope) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(e.Payload) == 0 || event.UnmarshalExact(e.Payload, &m) != nil {
		return nil
	}
	return m
}

func str(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || event.UnmarshalExact(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// int64At decodes an optional integer field: nil when absent, null or not an
// integer.
func int64At(raw json.RawMessage) *int64 {
	var n *int64
	if len(raw) == 0 || event.UnmarshalExact(raw, &n) != nil {
		return nil
	}
	return n
}

// present returns raw unless it is absent or null.
func present(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return nil
	}
	return raw
}

// EXECUTION_STARTED { input, flowHash?, codeHash?, principal?, parent?,
// chain?, carry? } opens a pending execution; a second start is inert.
func onExecutionStarted(f *Folder, e event.Envelope) {
	if f.s.Status != StatusPending {
		return
	}
	f.s.Status = StatusRunning
	f.s.StartedAt = e.Timestamp
	m := fields(e)
	v := &f.s.Variables
	v.Input = orNull(m["input"])
	if s, ok := str(m["flowHash"]); ok {
		v.FlowHash = s
	}
	if s, ok := str(m["codeHash"]); ok {
		v.CodeHash = s
	}
	v.Principal = present(m["principal"])
	v.Parent = present(m["parent"])
	v.Chain = present(m["chain"])
	if c := present(m["carry"]); c != nil {
		f.applyCarry(c)
	}
}

// carry seeds a continued execution's accumulators (Wave 2). It is
// validated as a whole: one bad value and the carry is ignored.
type carry struct {
	Resources *Resources             `json:"resources"`
	Inbox     map[string]InboxCursor `json:"inbox"`
}

func (f *Folder) applyCarry(raw json.RawMessage) {
	var c carry
	if event.UnmarshalExact(raw, &c) != nil {
		return
	}
	if c.Resources != nil && !validResources(c.Resources) {
		return
	}
	for topic, cur := range c.Inbox { //loom:order-independent validation only
		if topic == "" || topic == ProtoKey || cur.Consumed < 0 {
			return
		}
	}
	if c.Resources != nil {
		r := *c.Resources
		r.Custom = cloneMap(r.Custom)
		f.s.Variables.Resources = &r
	}
	if len(c.Inbox) > 0 {
		m := f.inbox()
		for topic, cur := range c.Inbox { //loom:order-independent map into map
			m[topic] = cur
		}
	}
}

func validResources(r *Resources) bool {
	for _, p := range []*float64{r.Tokens, r.CostUSD, r.Ms, r.MemBytes, r.WallMs, r.NetBytes} {
		if p != nil && !validAmount(*p) {
			return false
		}
	}
	for k, v := range r.Custom { //loom:order-independent validation only
		if k == "" || k == ProtoKey || !validAmount(v) {
			return false
		}
	}
	return true
}

func validAmount(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= MaxMeteredValue
}

// EXECUTION_SUSPENDED { on, wakeAt?, timeoutMs?, correlationKey?, stepId?,
// attempt?, waits? } parks the execution and ends a parked failure's mark.
// Its fields are read one by one: a field of the wrong type is absent, a
// malformed payload parks with none.
func onExecutionSuspended(f *Folder, e event.Envelope) {
	m := fields(e)
	on, _ := str(m["on"])
	key, _ := str(m["correlationKey"])
	step, _ := str(m["stepId"])
	f.endPark()
	f.s.Status = StatusSuspended
	f.s.Variables.SuspendedOn = &Suspension{On: on, WakeAt: int64At(m["wakeAt"]), TimeoutMs: int64At(m["timeoutMs"]),
		CorrelationKey: key, StepID: step, Attempt: int64At(m["attempt"]), Seq: e.Sequence}
	if w := m["waits"]; len(w) > 0 && w[0] == '[' {
		f.s.Variables.Waits = w
	}
}

type resumedPayload struct {
	EventType string          `json:"eventType"`
	Payload   json.RawMessage `json:"payload"`
	WaitID    string          `json:"waitId"`
}

// EXECUTION_RESUMED { eventType, payload, waitId? } re-opens the execution.
// Well-formed JSON that is not that wrapper (not an object, or a wrapper
// member of the wrong type) is a bare answer; a malformed payload (a
// repeated member name, invalid UTF-8, a lone surrogate escape) has all its
// fields absent, like any execution-level event's, and answers null.
// It adds a gate passthrough unless its answer is null and it answers no
// suspend point: the execution was not parked (1.20.0), was parked on a
// reserved gate (in doubt, diverged), or a step failed while it was parked
// (_failedWhileParked, 1.21.0) — then it is status-only. A kernel-stamped
// resume with a waitId answers that Wave 2 wait instead, unless the wait
// already has its answer.
func onExecutionResumed(f *Folder, e event.Envelope) {
	var p resumedPayload
	if !isNull(e.Payload) {
		var ie *event.InexactJSONError
		if err := event.UnmarshalExact(e.Payload, &p); errors.As(err, &ie) && ie.Reason == event.ReasonWrongType {
			p.Payload = e.Payload // a bare, non-wrapper answer
		}
	}
	waitAddressed := p.WaitID != "" && e.Kernel()
	if waitAddressed && p.WaitID == ProtoKey {
		return
	}
	v := &f.s.Variables
	parked := f.s.Status == StatusSuspended
	reserved := v.SuspendedOn != nil && (v.SuspendedOn.On == GateInDoubt || v.SuspendedOn.On == GateDiverged)
	statusOnly := isNull(p.Payload) && (!parked || reserved || v.FailedWhileParked)
	switch {
	case statusOnly:
	case waitAddressed:
		// A wait is answered once: the first answer stays (a message's
		// MESSAGE_CONSUMED precedes the resume that wakes the execution).
		if _, done := f.s.Variables.WaitAnswers[p.WaitID]; !done {
			f.waitAnswers()[p.WaitID] = WaitAnswer{EventType: p.EventType, Payload: orNull(p.Payload), Seq: e.Sequence}
		}
	default:
		v.ResumePayloads = appendOwned(v.ResumePayloads, &f.own.resume,
			ResumeEntry{EventType: p.EventType, Payload: orNull(p.Payload), Seq: e.Sequence})
	}
	f.endPark()
	f.s.Status = StatusRunning
}

// endPark clears what only lives while the execution is parked.
func (f *Folder) endPark() {
	v := &f.s.Variables
	v.SuspendedOn = nil
	v.Waits = nil
	v.FailedWhileParked = false
}

// EXECUTION_COMPLETED { output }.
func onExecutionCompleted(f *Folder, e event.Envelope) {
	m := fields(e)
	f.endPark()
	f.s.Status = StatusCompleted
	f.s.Variables.Output = orNull(m["output"])
}

// EXECUTION_FAILED { error }. A resumeAs that re-opens the execution keeps
// the stale _error (spec §4).
func onExecutionFailed(f *Folder, e event.Envelope) {
	m := fields(e)
	f.endPark()
	f.s.Status = StatusFailed
	if errv := present(m["error"]); errv != nil {
		f.s.Variables.Error = errv
	}
}

// EXECUTION_CANCELLED { reason? }.
func onExecutionCancelled(f *Folder, e event.Envelope) {
	f.endPark()
	f.s.Status = StatusCancelled
}

// EXECUTION_CONTINUED { nextExecutionId } (kernel-stamped only) ends the
// execution in status continued, chained to its successor.
func onExecutionContinued(f *Folder, e event.Envelope) {
	if !e.Kernel() {
		return
	}
	next, _ := str(fields(e)["nextExecutionId"])
	f.endPark()
	f.s.Status = StatusContinued
	f.s.Variables.ContinuedTo = next
}

// EXECUTION_RECOVERED: a dispatcher re-drove a crashed execution. It is the
// one non-gate resume and moves no status.
func onExecutionRecovered(f *Folder, e event.Envelope) {
	f.s.Variables.Recoveries++
}

// EXECUTION_MIGRATED { toFlowHash?, toCodeHash?, migratedInput? } moves the
// K11 code pin; a recorded migratedInput replaces _input (ADR 0056).
func onExecutionMigrated(f *Folder, e event.Envelope) {
	m := fields(e)
	if m == nil {
		return
	}
	v := &f.s.Variables
	if s, ok := str(m["toFlowHash"]); ok {
		v.FlowHash = s
	}
	if s, ok := str(m["toCodeHash"]); ok {
		v.CodeHash = s
	}
	if in, ok := m["migratedInput"]; ok {
		v.Input = orNull(in)
	}
}
