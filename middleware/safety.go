package middleware

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
)

// Validator is one behavioural check of the safety ring (K6). Either
// function may be nil (the phase is not checked by this validator). A
// non-nil error is a violation — the validator's verdict, and also its own
// failure (a moderation service that cannot be reached): the ring fails
// closed.
//
// The error's message becomes the recorded reason, cut to
// fold.MaxReasonBytes: say why ("contains a card number"), never quote the
// payload — the log outlives the payload's retention. Validators must be
// safe for concurrent use; they run only live, never on replay.
type Validator struct {
	// Name identifies the validator in SAFETY_BLOCKED; empty, it is
	// "validator#<i>", i its position in Safety's arguments.
	Name string
	// Input checks the effect's input before the effect runs.
	Input func(ec *effect.Context, input json.RawMessage) error
	// Output checks the effect's output before it is returned (and so
	// before the step records it).
	Output func(ec *effect.Context, output json.RawMessage) error
}

// Safety returns the behaviour ring (K6): every validator's Input check
// runs, in order, before the rest of the chain, and every Output check on a
// successful result after it. The first violation records
//
//	SAFETY_BLOCKED {stepId, toolId?, validator, phase, reason}
//
// (phase "input" or "output"; reason the validator's message, bounded; the
// payload itself is never recorded) and fails the step with
// *SafetyBlockedError. An input violation never runs the effect; an output
// violation discards the output, which the step therefore never records. A
// failed effect's error passes through unchecked.
//
// Failure modes: a violation is permanent (Retry does not retry it). If
// SAFETY_BLOCKED cannot be recorded the step still fails, with the
// *SafetyBlockedError wrapping the recording error. On replay a completed
// step is served from the log and no validator runs; a blocked step failed
// untyped, so a replay re-runs it and its validators decide afresh.
func Safety(validators ...Validator) effect.Middleware {
	vs := make([]Validator, len(validators))
	copy(vs, validators)
	for i := range vs {
		if vs[i].Name == "" {
			vs[i].Name = "validator#" + strconv.Itoa(i)
		}
		vs[i].Name = bounded(vs[i].Name)
	}
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		for _, v := range vs {
			if v.Input != nil {
				if verr := v.Input(ec, in); verr != nil {
					return nil, block(ec, v.Name, PhaseInput, verr)
				}
			}
		}
		out, err := next(ec, in)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v.Output != nil {
				if verr := v.Output(ec, out); verr != nil {
					return nil, block(ec, v.Name, PhaseOutput, verr)
				}
			}
		}
		return out, nil
	}
}

type safetyFact struct {
	StepID    string `json:"stepId"`
	ToolID    string `json:"toolId,omitempty"`
	Validator string `json:"validator"`
	Phase     string `json:"phase"`
	Reason    string `json:"reason"`
}

// block records SAFETY_BLOCKED and returns the step's failure.
func block(ec *effect.Context, validator, phase string, verr error) error {
	reason := bounded(verr.Error())
	blocked := &SafetyBlockedError{StepID: ec.StepID, Validator: validator, Phase: phase, Reason: reason, Err: verr}
	fact := safetyFact{StepID: ec.StepID, ToolID: ec.ToolID, Validator: validator, Phase: phase, Reason: reason}
	if err := ec.Emit(event.SafetyBlocked, fact); err != nil {
		return fmt.Errorf("%w (recording SAFETY_BLOCKED failed: %w)", blocked, err)
	}
	return blocked
}
