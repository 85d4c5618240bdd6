package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
	"github.com/loom-kernel/loom/internal/planted"
	"github.com/loom-kernel/loom/middleware"
)

// MaxTypedFailureBytes caps a typed failure's payload (spec §4.1): a bigger
// one degrades loudly to an untyped failure.
const MaxTypedFailureBytes = 16 << 10

// Execute is the durable primitive (spec §2): served from the log when the
// task's id completed — or failed on a declared channel, rethrown as the
// recorded *TypedFailure — and otherwise run through its effect and
// recorded. A completed or typed-failed effect never runs again once its
// outcome is in the log; an untyped failure is not an outcome replay
// serves, so a later run (or a later call in this run) runs it again as a
// new attempt. Calling an id this run already issued with another input
// fails with *StepReusedError (use Step.Iter in loops).
func (c *Context) Execute(t *Task, input any) (json.RawMessage, error) {
	c.checkpoint()
	if t == nil || t.Invoke == nil && t.ToolID == "" {
		return nil, errors.New("loom: execute: a task needs Invoke or a ToolID registered in Config.Effects")
	}
	if err := event.ValidateID("step id", t.ID); err != nil {
		return nil, err
	}
	in, err := marshalPayload(input)
	if err == nil {
		err = event.ValidateCarried("input", in)
	}
	if err != nil {
		return nil, fmt.Errorf("loom: step %q: encoding input: %w", t.ID, err)
	}
	r := c.drive
	if err := r.reissue(t.ID, false, in); err != nil {
		return nil, err
	}
	var fr fold.Frame
	var exists bool
	var verdict *fold.Decision
	c.state(func(s *fold.State) {
		fr, exists = s.Frames[t.ID]
		if exists && fr.Status == fold.FrameInDoubt {
			if d, ok := s.Variables.Decisions[admission.VerdictDecisionID(t.ID, fr.Attempt)]; ok {
				verdict = &d
			}
		}
	})
	if exists {
		switch {
		case fr.Status == fold.FrameCompleted:
			r.observeStep(c, t.ID, false)
			return fr.Output, nil
		case fr.Status == fold.FrameFailed && fr.ErrorChannel != "":
			r.observeStep(c, t.ID, false)
			return nil, &TypedFailure{Channel: fr.ErrorChannel, Payload: fr.ErrorPayload}
		case fr.Status == fold.FrameInDoubt:
			return r.serveInDoubt(c, t, in, fr, verdict)
		case (fr.Status == fold.FrameRunning || fr.Status == fold.FrameRetrying) && t.NonIdempotent &&
			!planted.Active(planted.InDoubtRerun):
			// Started (or retrying) durably, no outcome: a crash hid whether
			// the attempt ran (K9).
			r.observeStep(c, t.ID, true)
			r.parkInDoubt(c, t.ID, fr.Attempt)
		}
	}
	r.observeStep(c, t.ID, true)
	return r.runLive(c, t, in, nextAttempt(fr, exists))
}

// nextAttempt keeps the attempt of a start a crash interrupted (so its
// idempotency key is the same) and counts a new one after an outcome.
func nextAttempt(fr fold.Frame, exists bool) int64 {
	switch {
	case !exists:
		return 1
	case fr.Status == fold.FrameRunning || fr.Status == fold.FrameRetrying:
		return fr.Attempt
	default:
		return fr.Attempt + 1
	}
}

// runLive records STEP_STARTED, runs the effect through the boundary and
// records its outcome.
func (r *drive) runLive(c *Context, t *Task, in json.RawMessage, attempt int64) (json.RawMessage, error) {
	if r.verifying() {
		r.reach(frontier{kind: frontierStep, id: t.ID})
	}
	fn, err := r.effectOf(t)
	if err != nil {
		return nil, err
	}
	kind := t.Kind
	if kind == "" {
		kind = "step"
	}
	start := map[string]any{"stepId": t.ID, "input": orNull(in), "attempt": attempt, "kind": kind}
	if t.ToolID != "" {
		start["toolId"] = t.ToolID
	}
	if c.branch != "" {
		start["branch"] = c.branch
	}
	r.beginLive(c)
	r.commit(event.StepStarted, start, nil)
	if t.NonIdempotent {
		r.barrier() // the in-doubt marker is durable before the effect runs (ADR 0021)
	}
	ec, cancel, finish := r.effectContext(c, t, attempt)
	defer cancel()
	out, err := []byte(nil), r.authorizeEffect(c, ec, t)
	if err == nil {
		out, err = r.runEffect(ec, t, fn, in)
	}
	finish(err)
	if err == nil && !json.Valid(out) {
		err = fmt.Errorf("effect %q returned invalid JSON", t.ID)
	}
	if err == nil {
		if xerr := event.ValidateCarried("output", out); xerr != nil {
			err = fmt.Errorf("effect %q returned JSON the log cannot hold: %w", t.ID, xerr)
		}
	}
	if err == nil {
		r.endLive(c, false)
		r.commit(event.StepCompleted, map[string]any{"stepId": t.ID, "output": orNull(out)}, nil)
		r.stepDurability()
		return orNull(out), nil
	}
	typed, failure := r.failurePayload(t, err)
	r.endLive(c, typed == nil)
	r.commit(event.StepFailed, failure, nil)
	r.stepDurability()
	if typed != nil {
		return nil, typed
	}
	return nil, &StepError{StepID: t.ID, Message: err.Error(), Err: err}
}

// runEffect runs the step's effect through Config.Middleware and, innermost,
// the step's retry policy. A panic in the effect (or a ring) is the
// attempt's failure, *PanicError with the value and a bounded stack: it
// goes through the retry policy like any error, is recorded as STEP_FAILED,
// and never takes the process down.
func (r *drive) runEffect(ec *effect.Context, t *Task, fn effect.Func, in json.RawMessage) (out json.RawMessage, err error) {
	chain := r.rt.cfg.Middleware
	if policy := t.Retry; policy != nil || r.rt.cfg.DefaultRetry != nil {
		if policy == nil {
			policy = r.rt.cfg.DefaultRetry
		}
		chain = append(append([]effect.Middleware(nil), chain...), middleware.Retry(*policy))
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, newPanicError(p)
		}
	}()
	return effect.Chain(recoverPanics(fn), chain...)(ec, in)
}

// recoverPanics turns a panic of fn into its *PanicError, so a ring outside
// it (a retry) sees an error.
func recoverPanics(fn effect.Func) effect.Func {
	return func(ec *effect.Context, in json.RawMessage) (out json.RawMessage, err error) {
		defer func() {
			if p := recover(); p != nil {
				out, err = nil, newPanicError(p)
			}
		}()
		return fn(ec, in)
	}
}

// stepDurability waits for the step's outcome in StepDurable mode.
func (r *drive) stepDurability() {
	if r.rt.cfg.Durability == StepDurable {
		r.barrier()
	}
}

// failurePayload builds STEP_FAILED. A TypedFailure on a declared channel
// whose payload validates and fits the cap is recorded typed; anything else
// degrades loudly (a warning and a "degraded" note) to untyped.
func (r *drive) failurePayload(t *Task, err error) (*TypedFailure, map[string]any) {
	p := map[string]any{"stepId": t.ID, "error": stepErrorPayload(err)}
	tf, ok := asTypedFailure(err)
	if !ok {
		return nil, p
	}
	degrade := func(why string) (*TypedFailure, map[string]any) {
		r.rt.cfg.Logger.Warn("loom: typed failure degraded to untyped", "execution", r.x.id,
			"step", t.ID, "channel", tf.Channel, "reason", why)
		e := stepErrorPayload(err)
		e["degraded"] = why
		p["error"] = e
		return nil, p
	}
	schemas, cerr := t.channels()
	if cerr != nil {
		return degrade(cerr.Error())
	}
	sch, declared := schemas[tf.Channel]
	if !declared {
		return degrade("channel not declared")
	}
	if len(tf.Payload) > MaxTypedFailureBytes {
		return degrade("payload over " + strconv.Itoa(MaxTypedFailureBytes) + " bytes")
	}
	parsed, perr := sch.Parse(tf.Payload)
	if perr != nil {
		return degrade(perr.Error())
	}
	p["channel"] = tf.Channel
	p["payload"] = json.RawMessage(parsed)
	return &TypedFailure{Channel: tf.Channel, Payload: parsed}, p
}

func asTypedFailure(err error) (*TypedFailure, bool) {
	var tf *TypedFailure
	ok := errors.As(err, &tf)
	return tf, ok
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// Run is the step-shaped alias of Execute for a closure: a step with id and
// no input, run once and then served from the log.
func (c *Context) Run(id string, fn func(ctx context.Context) (any, error)) (json.RawMessage, error) {
	return c.Execute(&Task{ID: id, Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) {
		return fn(ctx)
	}}, nil)
}

// stepErrorPayload is STEP_FAILED's error: the message, and the stack of a
// panic.
func stepErrorPayload(err error) map[string]any {
	p := map[string]any{"message": err.Error()}
	var pe *PanicError
	if errors.As(err, &pe) {
		p["stack"] = pe.Stack
	}
	return p
}
