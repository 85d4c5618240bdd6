package fold

import (
	"encoding/json"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// Step handlers fold into their frame only: no STEP_* event moves the
// execution status (ADR 0105).

type stepPayload struct {
	StepID  string          `json:"stepId"`
	Attempt *int64          `json:"attempt"`
	Kind    string          `json:"kind"`
	ToolID  string          `json:"toolId"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output"`
	Error   json.RawMessage `json:"error"`
	Channel string          `json:"channel"`
	Payload json.RawMessage `json:"payload"`
}

// stepFrame decodes a step payload and returns the frame to update (a zero
// frame seeded with the id when none exists yet). ok is false when the event
// is inert: a malformed payload, an empty step id or the refused __proto__.
func (f *Folder) stepFrame(e event.Envelope) (p stepPayload, fr Frame, ok bool) {
	if !decode(e, &p) || p.StepID == "" || p.StepID == ProtoKey {
		return p, fr, false
	}
	fr, exists := f.s.Frames[p.StepID]
	if !exists {
		fr = Frame{StepID: p.StepID, Seq: e.Sequence}
	}
	return p, fr, true
}

// settle records a frame outcome and drops its input (EVENT_SCHEMA 1.26.0).
func settle(fr *Frame, status FrameStatus, e event.Envelope) {
	fr.Status = status
	fr.Input = nil
	fr.EndedAt = e.Timestamp
}

// STEP_STARTED { stepId, input?, attempt?, kind?, toolId? } opens (or
// re-opens, for an untyped failure's re-execution) a frame.
func onStepStarted(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	fr.Status = FrameRunning
	fr.Input = orNull(p.Input)
	fr.Output, fr.Error, fr.ErrorChannel, fr.ErrorPayload = nil, nil, "", nil
	if p.Attempt != nil && *p.Attempt > 0 {
		fr.Attempt = *p.Attempt
	} else {
		fr.Attempt++
	}
	if p.Kind != "" {
		fr.Kind = p.Kind
	}
	if p.ToolID != "" {
		fr.ToolID = p.ToolID
	}
	fr.StartedAt = e.Timestamp
	fr.EndedAt = 0
	f.frames()[p.StepID] = fr
}

// STEP_COMPLETED { stepId, output }.
func onStepCompleted(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	settle(&fr, FrameCompleted, e)
	fr.Output = orNull(p.Output)
	fr.Error, fr.ErrorChannel, fr.ErrorPayload = nil, "", nil
	f.frames()[p.StepID] = fr
}

// STEP_FAILED { stepId, error, channel?, payload? }. A channel makes it a
// typed failure (errorChannel/errorPayload, 1.17.0). It never fails the
// execution; landing while the execution is parked, it sets
// _failedWhileParked (1.21.0).
func onStepFailed(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	settle(&fr, FrameFailed, e)
	fr.Output = nil
	fr.Error = orNull(p.Error)
	fr.ErrorChannel, fr.ErrorPayload = "", nil
	if p.Channel != "" {
		fr.ErrorChannel = p.Channel
		fr.ErrorPayload = orNull(p.Payload)
	}
	f.frames()[p.StepID] = fr
	if f.s.Status == StatusSuspended {
		f.s.Variables.FailedWhileParked = true
	}
}

// STEP_RETRYING { stepId, attempt?, error? } keeps the frame's input: the
// step is not settled.
func onStepRetrying(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	fr.Status = FrameRetrying
	if p.Attempt != nil && *p.Attempt > 0 {
		fr.Attempt = *p.Attempt
	}
	if !isNull(p.Error) {
		fr.Error = p.Error
	}
	f.frames()[p.StepID] = fr
}

// STEP_CANCELLED { stepId, reason? }.
func onStepCancelled(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	settle(&fr, FrameCancelled, e)
	f.frames()[p.StepID] = fr
}

// EFFECT_INDOUBT { stepId, attempt }: a non-idempotent effect's outcome is
// unknown after a crash. The frame is marked and the fact kept, since an
// operator verdict is honoured only beside it (K9.3).
func onEffectInDoubt(f *Folder, e event.Envelope) {
	p, fr, ok := f.stepFrame(e)
	if !ok {
		return
	}
	attempt := fr.Attempt
	if p.Attempt != nil {
		attempt = *p.Attempt
	}
	fr.Status = FrameInDoubt
	fr.Attempt = attempt
	f.frames()[p.StepID] = fr
	f.inDoubt()[InDoubtKey(p.StepID, attempt)] = InDoubt{StepID: p.StepID, Attempt: attempt, Seq: e.Sequence}
}

// InDoubtKey is the _inDoubt key of a step attempt: "<stepId>#<attempt>".
func InDoubtKey(stepID string, attempt int64) string {
	return stepID + "#" + strconv.FormatInt(attempt, 10)
}
