package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// The effect boundary (architecture §5.2): a step's effect — its Invoke,
// or the registered effect of its tool id — runs inside an effect.Context,
// through the authorizer (K2) and the middleware chain, under the step's
// deadline (K8).

// EffectContext returns the effect.Context of the step attempt running
// under ctx (nil outside an effect): the execution's metered resources, the
// idempotency key, and Emit for the facts an effect records.
func EffectContext(ctx context.Context) *effect.Context { return effect.FromContext(ctx) }

// effectOf resolves what a task runs: its own Invoke, or the registered
// effect of its tool id; in simulate mode its simulation.
func (r *drive) effectOf(t *Task) (effect.Func, error) {
	invoke := t.Invoke
	if r.simulate && !t.ReadOnly {
		if t.Simulate == nil {
			return nil, &SimulationRefusedError{StepID: t.ID}
		}
		invoke = t.Simulate
	}
	if invoke != nil {
		return func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			out, err := invoke(ec.Ctx(), in)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(out)
			if err != nil {
				return nil, fmt.Errorf("encoding output: %w", err)
			}
			return raw, nil
		}, nil
	}
	if r.simulate {
		return nil, &SimulationRefusedError{StepID: t.ID}
	}
	return r.rt.cfg.Effects.Lookup(t.ToolID)
}

// effectContext builds the attempt's effect.Context and its context: the
// scope's, carrying the context itself and the idempotency key, bounded by
// the step's timeout and Config.MaxEffectTime.
//
// With an Observer, each attempt runs under its StepAttempt bracket: the
// attempt's context carries its span, and finish ends the last attempt's
// bracket with the step's error (a retry ends the one before with its
// cause).
func (r *drive) effectContext(c *Context, t *Task, attempt int64) (ec *effect.Context, cancel context.CancelFunc, finish func(error)) {
	var (
		resources   fold.Resources
		deadline    int64
		hasDeadline bool
		who         identity
		approver    any
	)
	c.state(func(s *fold.State) {
		if s.Variables.Resources != nil {
			resources = *s.Variables.Resources
		}
		deadline, hasDeadline = deadlineOf(*s)
		who, approver = executionIdentity(s)
	})
	// Each attempt gets its own deadline: the step's timeout and the bound
	// on every effect apply per attempt, the execution's deadline to all.
	attemptCtx := func() (context.Context, context.CancelFunc) {
		d := effectTimeout(t.Timeout, r.rt.cfg.MaxEffectTime)
		if hasDeadline {
			left := time.Duration(deadline-r.rt.cfg.Clock.Now().UnixMilli()) * time.Millisecond
			d = effectTimeout(d, max(left, time.Millisecond))
		}
		if d > 0 {
			return context.WithTimeout(c.scope.ctx, d)
		}
		return c.scope.ctx, func() {}
	}
	kind := t.Kind
	if kind == "" {
		kind = "step"
	}
	end := func(error) {}
	observed := func(ctx context.Context, n int64) context.Context {
		o := r.rt.cfg.Observer
		if o == nil {
			return ctx
		}
		ctx, end = o.StepAttempt(ctx, StepAttempt{ExecutionID: r.x.id, StepID: t.ID, ToolID: t.ToolID, Kind: kind, Attempt: n})
		return ctx
	}
	ctx, first := attemptCtx()
	ctx = observed(ctx, attempt)
	cancels := []context.CancelFunc{first}
	cancel = func() {
		for _, c := range cancels {
			c()
		}
	}
	base := effect.Context{ExecutionID: r.x.id, StepID: t.ID, ToolID: t.ToolID, Kind: kind, Attempt: attempt,
		IdempotencyKey: effect.IdempotencyKey(r.x.id, t.ID, attempt), Resources: resources,
		Principal: who.principal, Tenant: who.tenant, Agent: who.agent, Approver: approver}
	ec = effect.NewContext(ctx, base, effect.Hooks{
		Now:  r.rt.cfg.Clock.Now,
		Emit: func(typ string, payload any) error { return r.effectEmit(c, ec, typ, payload) },
		Retrying: func(cause error, delay time.Duration) (int64, context.Context, error) {
			end(cause)
			end = func(error) {}
			next, err := r.retrying(t, ec.Attempt, cause, delay)
			if err != nil {
				return 0, nil, err
			}
			actx, acancel := attemptCtx()
			cancels = append(cancels, acancel)
			return next, observed(actx, next), nil
		},
	})
	return ec, cancel, func(err error) { end(err) }
}

func effectTimeout(step, bound time.Duration) time.Duration {
	switch {
	case step > 0 && bound > 0:
		return min(step, bound)
	case step > 0:
		return step
	}
	return bound
}

// effectEmit appends a fact from an effect (spec §5): validated like a
// flow's emit, never stamped, and a DECISION_RECORDED id moved into the
// step attempt's namespace so it can never answer the flow's ctx.Decide.
func (r *drive) effectEmit(c *Context, ec *effect.Context, typ string, payload any) error {
	raw, err := marshalPayload(payload)
	if err != nil {
		return &EmitRefusedError{EventType: typ, Reason: "payload has no JSON form: " + err.Error()}
	}
	raw = orNull(raw)
	if err := event.ValidateExact("payload", raw); err != nil {
		return &EmitRefusedError{EventType: typ, Reason: err.Error()}
	}
	if typ == event.DecisionRecorded {
		if raw, err = namespacedDecision(ec, raw); err != nil {
			return err
		}
	}
	var verr error
	c.state(func(s *fold.State) { verr = validateUserspaceEmit(typ, raw, s) })
	if verr != nil {
		return verr
	}
	_, err = r.j.Commit(typ, raw, nil)
	return err
}

// namespacedDecision rewrites an effect-written decision id to
// effect:<stepId>#<attempt>:<id>.
func namespacedDecision(ec *effect.Context, raw json.RawMessage) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	var id string
	if unmarshalRecorded(raw, &p) != nil || unmarshalRecorded(p["decisionId"], &id) != nil || id == "" {
		return nil, &EmitRefusedError{EventType: event.DecisionRecorded, Reason: "payload must be an object with a decisionId"}
	}
	if strings.HasPrefix(id, reservedPrefix) {
		return nil, &EmitRefusedError{EventType: event.DecisionRecorded, Reason: "decision ids starting with __loom_ are reserved"}
	}
	p["decisionId"] = marshalJSON(fmt.Sprintf("effect:%s#%d:%s", ec.StepID, ec.Attempt, id))
	return json.Marshal(p)
}

// retrying records STEP_RETRYING for a failed attempt and returns the next
// attempt's number. For a non-idempotent task the record is durable before
// the next attempt runs, so a crash during it parks that attempt in doubt
// (K9) under its own number and idempotency key.
func (r *drive) retrying(t *Task, attempt int64, cause error, delay time.Duration) (int64, error) {
	next := attempt + 1
	payload := map[string]any{"stepId": t.ID, "attempt": next, "error": map[string]any{"message": cause.Error()},
		"delayMs": delay.Milliseconds()}
	if _, err := r.j.Commit(event.StepRetrying, payload, nil); err != nil {
		return 0, err
	}
	if t.NonIdempotent {
		if err := r.j.Barrier(context.Background()); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// authorizeEffect asks the K2 authorizer; a denial is recorded as
// EFFECT_DENIED and returned as the step's failure.
func (r *drive) authorizeEffect(c *Context, ec *effect.Context, t *Task) error {
	az := r.rt.cfg.EffectAuthorizer
	if az == nil {
		return nil
	}
	err := az.Authorize(ec.Ctx(), effect.Request{ToolID: toolOf(t), ExecutionID: r.x.id, FlowID: r.flow.ID,
		StepID: t.ID, Principal: ec.Principal, Tenant: ec.Tenant, Agent: ec.Agent, Approver: ec.Approver})
	if err == nil {
		return nil
	}
	var denied *effect.CapabilityDeniedError
	if !errors.As(err, &denied) {
		denied = &effect.CapabilityDeniedError{ToolID: toolOf(t), StepID: t.ID, Reason: err.Error()}
	}
	r.commit(event.EffectDenied, map[string]any{"stepId": t.ID, "toolId": toolOf(t), "reason": bounded(denied.Reason)}, nil)
	return denied
}

// toolOf is the id an effect is authorized as: its tool id, or its step id
// for a step with its own Invoke.
func toolOf(t *Task) string {
	if t.ToolID != "" {
		return t.ToolID
	}
	return t.ID
}
