// Package effect is the boundary every side effect crosses (architecture
// §5.2): effects are registered by tool id, invoked through a middleware
// chain, and authorized by an optional Authorizer (K2). The runtime records
// what crosses it — the step's start and outcome, and the verdicts the rings
// emit (RESOURCE_METERED, QUOTA_EXCEEDED, SAFETY_BLOCKED, EFFECT_DENIED) —
// so on replay a completed effect is served from the log and never invoked.
//
// Every ring is opt-in: with no middleware and no authorizer wired, the log
// is byte-identical to the kernel without the boundary (G2).
package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Context is what an effect and its middleware see of the step invoking it.
// It is built by the runtime for one attempt.
type Context struct {
	ctx            context.Context
	ExecutionID    string
	StepID         string
	ToolID         string
	Kind           string
	Attempt        int64
	IdempotencyKey string
	// Resources is the execution's metered consumption when the attempt
	// started (spec §8): what admission control compares with a budget.
	Resources fold.Resources
	// Tenant, Principal and Agent identify on whose behalf the effect
	// runs: the runtime fills them from the principal recorded when the
	// execution started (see loom.Principal). Approver is the principal a
	// ResumeAuthenticator verified for the latest gate answer before this
	// attempt (nil when none).
	Tenant    string
	Principal any
	Agent     string
	Approver  any

	hooks Hooks
}

// Hooks are the kernel services an effect context reaches; the runtime
// provides them.
type Hooks struct {
	// Emit appends a userspace-allowed fact from the effect (validated,
	// never stamped).
	Emit func(eventType string, payload any) error
	// Retrying records STEP_RETRYING for the attempt that failed and
	// returns the next attempt number and that attempt's context (its own
	// deadline); a nil context keeps the current one.
	Retrying func(cause error, delay time.Duration) (int64, context.Context, error)
	// Now reads the runtime's clock (loom.Config.Clock).
	Now func() time.Time
}

// Now reads the runtime's clock: what a ring measures an effect with
// (Metering's elapsed ms), so a test's injected clock governs it too. It is
// the wall clock when the runtime gave none.
func (c *Context) Now() time.Time {
	if c != nil && c.hooks.Now != nil {
		return c.hooks.Now()
	}
	return time.Now()
}

type contextKey struct{}

// NewContext builds an effect context; the runtime calls it once per
// attempt. The context it carries (Ctx) leads back to it (FromContext).
func NewContext(ctx context.Context, base Context, hooks Hooks) *Context {
	c := &base
	c.ctx = context.WithValue(ctx, contextKey{}, c)
	c.hooks = hooks
	return c
}

// FromContext returns the effect context running under ctx, or nil.
func FromContext(ctx context.Context) *Context {
	c, _ := ctx.Value(contextKey{}).(*Context)
	return c
}

// Ctx is the attempt's context: cancelled when the execution is cancelled,
// its deadline passes, or the step's deadline does.
func (c *Context) Ctx() context.Context { return c.ctx }

// WithContext returns a copy of c whose Ctx is ctx, for a middleware that
// hands the middleware and the effect inside it a context with a value
// added (FromContext of the new Ctx returns the copy). ctx must derive
// from c.Ctx(), so cancellation and deadlines still reach the effect.
func (c *Context) WithContext(ctx context.Context) *Context {
	cc := *c
	cc.ctx = context.WithValue(ctx, contextKey{}, &cc)
	return &cc
}

// Emit appends a fact from the effect to the execution's log. Kernel event
// types are refused except the ones userspace may emit (spec §5), which are
// validated; an effect-written DECISION_RECORDED id is rewritten into the
// step's namespace (effect:<stepId>#<attempt>:<id>).
func (c *Context) Emit(eventType string, payload any) error {
	if c.hooks.Emit == nil {
		return errors.New("effect: emit is not wired")
	}
	return c.hooks.Emit(eventType, payload)
}

// Retrying records that this attempt failed and another follows after
// delay; it moves the context to the next attempt (a new idempotency key and
// the attempt's own deadline).
func (c *Context) Retrying(cause error, delay time.Duration) error {
	if c.hooks.Retrying == nil {
		return errors.New("effect: retries are not wired")
	}
	next, ctx, err := c.hooks.Retrying(cause, delay)
	if err != nil {
		return err
	}
	if ctx != nil {
		c.ctx = context.WithValue(ctx, contextKey{}, c)
	}
	c.Attempt = next
	c.IdempotencyKey = IdempotencyKey(c.ExecutionID, c.StepID, next)
	return nil
}

// IdempotencyKey is the deterministic key of a step attempt (K9):
// "<executionId>/<stepId>/<attempt>". A crash re-run of the same attempt
// gets the same key; a retry gets a new one.
func IdempotencyKey(executionID, stepID string, attempt int64) string {
	return fmt.Sprintf("%s/%s/%d", executionID, stepID, attempt)
}

// Func is an effect: it receives the step's input and returns its output.
type Func func(ec *Context, input json.RawMessage) (json.RawMessage, error)

// Middleware wraps an effect: it may act before and after next, replace
// the input or the output, or fail without calling next.
type Middleware func(ec *Context, input json.RawMessage, next Func) (json.RawMessage, error)

// Chain composes middleware around f, the first middleware outermost. An
// empty chain returns f itself.
func Chain(f Func, mws ...Middleware) Func {
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], f
		f = func(ec *Context, in json.RawMessage) (json.RawMessage, error) { return mw(ec, in, next) }
	}
	return f
}

// Registry maps tool ids to effects. Build it once, statically (P5).
type Registry struct {
	effects map[string]Func
}

// NewRegistry builds a registry from tool id → effect. It refuses an
// invalid tool id.
func NewRegistry(effects map[string]Func) (*Registry, error) {
	r := &Registry{effects: make(map[string]Func, len(effects))}
	for id, f := range effects { //loom:order-independent map into map
		if err := event.ValidateID("tool id", id); err != nil {
			return nil, err
		}
		if f == nil {
			return nil, fmt.Errorf("effect: tool %q has no effect", id)
		}
		r.effects[id] = f
	}
	return r, nil
}

// ErrUnknownTool is returned for a tool id with no registered effect.
var ErrUnknownTool = errors.New("effect: unknown tool id")

// Lookup returns the effect of toolID. A qualified tool id
// "<effect>:<qualifier>" with no effect of its own runs the effect
// registered as "<effect>": one effect serves a family of tools whose
// identity is data (mcp.invoke:<server>/<tool>), while the authority ring
// still sees, and a grant can name, each one.
func (r *Registry) Lookup(toolID string) (Func, error) {
	if r != nil {
		if f, ok := r.effects[toolID]; ok {
			return f, nil
		}
		if base, _, qualified := strings.Cut(toolID, ":"); qualified {
			if f, ok := r.effects[base]; ok {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownTool, toolID)
}
