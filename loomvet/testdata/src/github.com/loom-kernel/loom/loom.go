// Package loom is a stub of github.com/loom-kernel/loom for the loomvet
// tests (analysistest in GOPATH mode cannot import the real module). It
// declares, with the real signatures, the names loomvet recognizes;
// TestStubMatchesLoom fails when one drifts from the real package. The
// bodies do nothing.
package loom

import (
	"context"
	"encoding/json"
	mrand "math/rand/v2"
	"time"

	"github.com/loom-kernel/loom/effect"
)

type Context struct{}

func (c *Context) Execute(t *Task, input any) (json.RawMessage, error) { return nil, nil }

func (c *Context) Run(id string, fn func(ctx context.Context) (any, error)) (json.RawMessage, error) {
	return nil, nil
}

func (c *Context) Decide(id string, choose func() (any, error)) (json.RawMessage, error) {
	return nil, nil
}

func (c *Context) Parallel(branches ...func(ctx *Context) error) error { return nil }

func (c *Context) Select(cases ...SelectCase) (Selected, error) { return Selected{}, nil }

func (c *Context) Receive(topic string) (json.RawMessage, error) { return nil, nil }

func (c *Context) Sleep(d time.Duration) error { return nil }

func (c *Context) Context() context.Context { return context.Background() }

type Task struct {
	ID       string
	Invoke   func(ctx context.Context, input json.RawMessage) (any, error)
	Simulate func(ctx context.Context, input json.RawMessage) (any, error)
}

type Flow struct {
	ID   string
	Body func(ctx *Context, input json.RawMessage) (any, error)
}

type FlowOption func(*Flow)

func NewFlow[In, Out any](id string, body func(ctx *Context, in In) (Out, error), opts ...FlowOption) *Flow {
	return &Flow{ID: id}
}

type Step[In, Out any] struct{ task Task }

type StepOption func(*Task)

func NewStep[In, Out any](id string, fn func(ctx context.Context, in In) (Out, error), opts ...StepOption) *Step[In, Out] {
	return &Step[In, Out]{task: Task{ID: id}}
}

func Simulation[In, Out any](fn func(ctx context.Context, in In) (Out, error)) StepOption {
	return func(*Task) {}
}

func (s *Step[In, Out]) ID() string { return s.task.ID }

func (s *Step[In, Out]) Iter(i int) *Step[In, Out] { return s }

func (s *Step[In, Out]) Retry(n int) *Step[In, Out] { return s }

func (s *Step[In, Out]) Task() *Task { return &s.task }

func Run[In, Out any](ctx *Context, s *Step[In, Out], in In) (Out, error) {
	var out Out
	return out, nil
}

func Decide[T any](ctx *Context, id string, choose func() (T, error)) (T, error) {
	var v T
	return v, nil
}

func Now(ctx *Context) time.Time { return time.Time{} }

func Random(ctx *Context) *mrand.Rand { return mrand.New(mrand.NewPCG(1, 2)) }

func Parallel[T any](ctx *Context, branches ...func(ctx *Context) (T, error)) ([]T, error) {
	return nil, nil
}

type SelectCase struct{}

type Selected struct {
	Index   int
	Kind    string
	Payload json.RawMessage
}

func OnMessage(topic string) SelectCase { return SelectCase{} }

func OnTimer(d time.Duration) SelectCase { return SelectCase{} }

func Receive[T any](ctx *Context, topic string) (T, error) {
	var v T
	return v, nil
}

type Child struct{ ID, Name, Flow string }

type ChildOption func(*Child)

func SpawnChild(c *Context, flowID, name string, input any, opts ...ChildOption) (Child, error) {
	return Child{}, nil
}

// EffectContext stands for the real loom.EffectContext.
func EffectContext(ctx context.Context) *effect.Context { return nil }
