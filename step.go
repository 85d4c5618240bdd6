package loom

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/internal/schema"
	"github.com/loom-kernel/loom/middleware"
)

// Task is the untyped core of a durable step (spec §2 ctx.execute): what
// runs, under which id, and the contract its failures follow. Steps built
// with NewStep wrap one; a Task may also be written by hand.
type Task struct {
	// ID is the step id replay serves the outcome by. Loops mint id#i
	// (Iter), deliberate retries id#retry:n (ADR 0061).
	ID string
	// Kind is the task kind recorded on STEP_STARTED: step (default), llm,
	// agent, tool or human.
	Kind string
	// ToolID names the effect for the record and the effect registry.
	ToolID string
	// NonIdempotent steps have their STEP_STARTED durable before they run,
	// and a crash between start and outcome parks them in doubt instead of
	// running them again (K9).
	NonIdempotent bool
	// ReadOnly steps have no side effect and run for real in simulate mode.
	ReadOnly bool
	// Errors declares typed failure channels: channel name to JSON Schema
	// of its payload (spec §4.1).
	Errors map[string]string
	// Invoke runs the effect. Without it, the effect registered under
	// ToolID in Config.Effects runs.
	Invoke func(ctx context.Context, input json.RawMessage) (any, error)
	// Simulate, when set, replaces Invoke in simulate mode.
	Simulate func(ctx context.Context, input json.RawMessage) (any, error)
	// Timeout bounds each attempt of the effect (K8); Config.MaxEffectTime
	// bounds every effect.
	Timeout time.Duration
	// Retry, when set, retries a failed attempt of this step under the
	// policy (STEP_RETRYING per retry, within the same step id); nil takes
	// Config.DefaultRetry, and without that a failure is final.
	Retry *middleware.RetryPolicy

	compiled *channelSchemas
}

// channelSchemas compiles a task's error channels once, on first failure.
type channelSchemas struct {
	once    sync.Once
	schemas map[string]*schema.Schema
	err     error
}

func (t *Task) channels() (map[string]*schema.Schema, error) {
	c := t.compiled
	if c == nil {
		c = &channelSchemas{}
	}
	c.once.Do(func() {
		c.schemas = map[string]*schema.Schema{}
		for ch, src := range t.Errors { //loom:order-independent map into map
			s, err := compileChannel(src)
			if err != nil {
				c.err = fmt.Errorf("loom: step %q: error channel %q: %w", t.ID, ch, err)
				return
			}
			c.schemas[ch] = s
		}
	})
	return c.schemas, c.err
}

// compiledChannels caches channel schemas by source: a Task built per call
// (a model call, an agent's tool call) declares the same few schemas every
// time, and would otherwise compile them on every failure. Channel schemas
// are written in code, so the cache stays as small as the program.
var compiledChannels sync.Map // string -> *schema.Schema

func compileChannel(src string) (*schema.Schema, error) {
	if s, ok := compiledChannels.Load(src); ok {
		return s.(*schema.Schema), nil
	}
	s, err := schema.Compile(src)
	if err != nil {
		return nil, err
	}
	compiledChannels.Store(src, s)
	return s, nil
}

// Step is a typed step definition. Define steps once (package level) and
// run them with Run; Iter mints per-iteration ids for loops.
type Step[In, Out any] struct {
	task Task
}

// StepOption configures NewStep.
type StepOption func(*Task)

// NonIdempotent marks a step whose effect must not silently run twice.
func NonIdempotent() StepOption { return func(t *Task) { t.NonIdempotent = true } }

// ReadOnly marks a step without side effects (it runs in simulate mode).
func ReadOnly() StepOption { return func(t *Task) { t.ReadOnly = true } }

// Kind sets the recorded task kind (llm, agent, tool, human…).
func Kind(kind string) StepOption { return func(t *Task) { t.Kind = kind } }

// ToolID sets the recorded effect id.
func ToolID(id string) StepOption { return func(t *Task) { t.ToolID = id } }

// StepTimeout bounds each attempt of the step's effect: past d the
// attempt's context is cancelled, and the attempt fails (and is retried
// when a retry policy allows it).
func StepTimeout(d time.Duration) StepOption { return func(t *Task) { t.Timeout = d } }

// WithRetry retries a failed attempt of the step under policy: attempts,
// backoff, and which failures are retryable (middleware.RetryPolicy; its
// zero value is 3 attempts with exponential backoff, never retrying a typed
// failure, a denial or a cancellation). Each retry is a durable
// STEP_RETRYING {attempt, error, delayMs}, and the new attempt has its own
// idempotency key. It overrides Config.DefaultRetry for this step.
func WithRetry(policy middleware.RetryPolicy) StepOption {
	return func(t *Task) { t.Retry = &policy }
}

// ErrorChannel declares a typed failure channel and its payload schema.
func ErrorChannel(channel, jsonSchema string) StepOption {
	return func(t *Task) {
		if t.Errors == nil {
			t.Errors = map[string]string{}
		}
		t.Errors[channel] = jsonSchema
	}
}

// Simulation sets what the step does in simulate mode.
func Simulation[In, Out any](fn func(ctx context.Context, in In) (Out, error)) StepOption {
	return func(t *Task) { t.Simulate = typedInvoke(fn) }
}

// NewStep defines a typed step with id.
func NewStep[In, Out any](id string, fn func(ctx context.Context, in In) (Out, error), opts ...StepOption) *Step[In, Out] {
	s := &Step[In, Out]{task: Task{ID: id, Invoke: typedInvoke(fn), compiled: &channelSchemas{}}}
	for _, o := range opts {
		o(&s.task)
	}
	return s
}

// ID returns the step id.
func (s *Step[In, Out]) ID() string { return s.task.ID }

// Iter returns the same step under the id "<id>#<i>", for the i-th
// iteration of a loop: a loop that reuses one id is served iteration 1's
// outcome on every later iteration.
func (s *Step[In, Out]) Iter(i int) *Step[In, Out] {
	c := *s
	c.task.ID = s.task.ID + "#" + strconv.Itoa(i)
	return &c
}

// Retry returns the step under "<id>#retry:<n>": a deliberate retry of a
// settled step is a new step.
func (s *Step[In, Out]) Retry(n int) *Step[In, Out] {
	c := *s
	c.task.ID = s.task.ID + "#retry:" + strconv.Itoa(n)
	return &c
}

// Task exposes the untyped core.
func (s *Step[In, Out]) Task() *Task { return &s.task }

func typedInvoke[In, Out any](fn func(ctx context.Context, in In) (Out, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("loom: decoding step input: %w", err)
			}
		}
		return fn(ctx, in)
	}
}

// Run executes a typed step through the durable execute syscall: served from
// the log when its id already completed (or failed on a typed channel),
// otherwise run and recorded.
func Run[In, Out any](ctx *Context, s *Step[In, Out], in In) (Out, error) {
	var out Out
	raw, err := ctx.Execute(&s.task, in)
	if err != nil {
		return out, err
	}
	if err := decodeInto(raw, &out); err != nil {
		return out, fmt.Errorf("loom: step %q: decoding output: %w", s.task.ID, err)
	}
	return out, nil
}

func decodeInto(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// IdempotencyKey returns the deterministic key of the effect running under
// ctx: "<executionId>/<stepId>/<attempt>" (K9). It is stable across a crash
// and a replay of the same attempt; a retry gets a new one.
func IdempotencyKey(ctx context.Context) string {
	if ec := effect.FromContext(ctx); ec != nil {
		return ec.IdempotencyKey
	}
	return ""
}
