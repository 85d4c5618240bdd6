package loomtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loom-kernel/loom/effect"
)

// Mock replaces the effect of one tool id in an Env and counts every call.
// Build it with NewMock, hand it to New with WithMocks, and read Calls and
// Count afterwards: a step served from the log on a replay, a resume or a
// recovery is not a call, so a count of one after a Restart proves the
// recorded step did not run again.
//
// A Mock belongs to one Env (New refuses it a second time) and keeps its
// calls across Restart. It is safe for concurrent use.
type Mock struct {
	toolID string
	fn     func(ctx context.Context, input json.RawMessage) (any, error)

	mu    sync.Mutex
	calls []Call
	bound bool
}

// Call is one invocation of a mocked effect: which step attempt called it
// and with what input (the step's recorded input, as JSON).
type Call struct {
	StepID         string
	Attempt        int64
	IdempotencyKey string
	Input          json.RawMessage
}

// NewMock builds a mock of the effect toolID: fn runs instead of the
// step's own function or the registered effect, with the step's input
// decoded into In; its Out is the step's output, its error the step's
// failure (a *loom.TypedFailure on a declared channel stays typed).
//
// A step matches by its tool id (loom.ToolID; llm.Complete's is
// llm.ToolID(provider, model)), and a step without one by its step id, the
// id the kernel authorizes it as. A qualified id "<effect>:<qualifier>"
// with no mock of its own falls back to a mock of "<effect>", as the effect
// registry does. A step without a function of its own (a Task run by the
// effect registered under its tool id) needs its tool id registered: the
// Env registers every mocked id when the config sets no Config.Effects;
// an app that sets its own registers them there.
//
// The mock runs innermost of Config.Middleware, so the app's rings
// (metering, safety, redaction) wrap it as they wrap the real effect; a
// step's own retry policy, which the kernel puts inside every ring, does
// not retry a mock's failure.
func NewMock[In, Out any](toolID string, fn func(ctx context.Context, in In) (Out, error)) *Mock {
	return &Mock{toolID: toolID, fn: func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("loomtest: mock %q: decoding input: %w", toolID, err)
			}
		}
		return fn(ctx, in)
	}}
}

// ToolID is the tool id the mock replaces.
func (m *Mock) ToolID() string { return m.toolID }

// Count is how many times the mocked effect ran.
func (m *Mock) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

// Calls returns the calls so far, in the order they began.
func (m *Mock) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// bind claims m for one Env.
func (m *Mock) bind() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bound {
		return fmt.Errorf("loomtest: mock %q is already used by another Env; build one per Env", m.toolID)
	}
	m.bound = true
	return nil
}

func (m *Mock) call(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
	m.mu.Lock()
	m.calls = append(m.calls, Call{StepID: ec.StepID, Attempt: ec.Attempt, IdempotencyKey: ec.IdempotencyKey,
		Input: slices.Clone(in)})
	m.mu.Unlock()
	out, err := m.fn(ec.Ctx(), in)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("loomtest: mock %q: encoding output: %w", m.toolID, err)
	}
	return raw, nil
}

// mockSet is the mocks of one Env, by tool id.
type mockSet map[string]*Mock

// lookup finds the mock of an effect by the rules NewMock states.
func (s mockSet) lookup(ec *effect.Context) *Mock {
	id := ec.ToolID
	if id == "" {
		id = ec.StepID
	}
	if m, ok := s[id]; ok {
		return m
	}
	if base, _, qualified := strings.Cut(id, ":"); qualified {
		return s[base]
	}
	return nil
}

// middleware is the seam: Config.Middleware wraps every effect, whether a
// step's own Invoke or a registered effect, and sees its tool id. The
// mocks sit innermost of the app's rings, so metering, authorization and
// the log see a mocked step as they see the real one; only the step's own
// retry policy, which the kernel puts inside every ring, does not run
// around a mock.
func (s mockSet) middleware() effect.Middleware {
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		if m := s.lookup(ec); m != nil {
			return m.call(ec, in)
		}
		return next(ec, in)
	}
}

// registry registers every mocked tool id, for the steps that run a
// registered effect (a Task without Invoke): the kernel looks the effect
// up before the middleware runs, and refuses an unknown tool id. The
// registered effect is never reached, since the mock answers first; an
// app that sets Config.Effects itself registers its tool ids there.
func (s mockSet) registry() (*effect.Registry, error) {
	effects := make(map[string]effect.Func, len(s))
	for id := range s { //loom:order-independent map into map
		effects[id] = func(ec *effect.Context, _ json.RawMessage) (json.RawMessage, error) {
			return nil, fmt.Errorf("loomtest: the mock of %q was bypassed", ec.ToolID)
		}
	}
	return effect.NewRegistry(effects)
}
