package loom

import (
	"context"
	"fmt"
	"reflect"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// StartFlow is the typed Start: flow must have been built by NewFlow with
// exactly In and Out (else *FlowTypeError), and registered in this
// Runtime's Config.Flows. Nothing is appended on a refusal.
func StartFlow[In, Out any](ctx context.Context, rt *Runtime, flow *Flow, in In, opts ...StartOption) (string, error) {
	if err := flowTypes[In, Out](flow); err != nil {
		return "", err
	}
	if rt.flows[flow.ID] != flow {
		return "", fmt.Errorf("%w: this *Flow is not the one registered as %q: %v", ErrUnknownFlow, flow.ID, rt.unknownFlow(flow.ID))
	}
	return rt.Start(ctx, flow.ID, in, opts...)
}

// Await waits for execution id to end and returns its output as an Out.
// An execution that did not complete is a typed error: *FlowFailedError,
// *ExecutionCancelledError or *ExecutionContinuedError; an output that does
// not decode into Out is an error naming both.
func Await[Out any](ctx context.Context, rt *Runtime, id string) (Out, error) {
	var out Out
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		return out, err
	}
	switch res.Status {
	case fold.StatusCancelled:
		reason, err := rt.cancelReason(ctx, id, res.State)
		if err != nil {
			return out, err
		}
		return out, &ExecutionCancelledError{ExecutionID: id, Reason: reason}
	case fold.StatusContinued:
		return out, &ExecutionContinuedError{ExecutionID: id, Next: res.State.Variables.ContinuedTo}
	}
	if err := decodeInto(res.Output, &out); err != nil {
		return out, fmt.Errorf("loom: execution %q: its output does not decode into %s: %w", id, reflect.TypeFor[Out](), err)
	}
	return out, nil
}

// flowTypes refuses type parameters that are not flow's own.
func flowTypes[In, Out any](flow *Flow) error {
	if flow == nil {
		return fmt.Errorf("%w: nil flow", ErrUnknownFlow)
	}
	if flow.in == nil {
		return nil // built by hand: its types are its own business
	}
	if want, got := flow.in, reflect.TypeFor[In](); want != got {
		return &FlowTypeError{FlowID: flow.ID, Parameter: "In", Want: want.String(), Got: got.String()}
	}
	if want, got := flow.out, reflect.TypeFor[Out](); want != got {
		return &FlowTypeError{FlowID: flow.ID, Parameter: "Out", Want: want.String(), Got: got.String()}
	}
	return nil
}

// cancelReason reads the reason of the EXECUTION_CANCELLED that ended st.
func (rt *Runtime) cancelReason(ctx context.Context, id string, st fold.State) (string, error) {
	last, err := store.ReadRange(ctx, rt.cfg.Events, id, st.Sequence, st.Sequence+1)
	if err != nil || len(last) == 0 || last[0].Type != event.ExecutionCancelled {
		return "", err
	}
	var p struct {
		Reason string `json:"reason"`
	}
	if err := unmarshalRecorded(last[0].PayloadOrNull(), &p); err != nil {
		return "", fmt.Errorf("loom: execution %q: its EXECUTION_CANCELLED is unreadable: %w", id, err)
	}
	return p.Reason, nil
}
