package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Continue-as-new (ADR 0109, kernel.features.continueAsNew) bounds a
// perpetual flow's history: the execution ends in status continued and a
// successor starts with a new log, the given input, and a carry of its
// accumulators (resources, inbox cursors) — the chain shares one inbox.

// successor is what EXECUTION_CONTINUED hands over.
type successor struct {
	ID    string          `json:"nextExecutionId"`
	Input json.RawMessage `json:"input"`
	Chain chainLink       `json:"chain"`
	Carry json.RawMessage `json:"carry,omitempty"`
}

type chainLink struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
}

// ContinueAsNew ends this execution (EXECUTION_CONTINUED, durable) and
// starts its successor "<chain>~<n>" with input; it does not return on
// success. Call it from the flow's root goroutine.
func (c *Context) ContinueAsNew(input any) error {
	c.checkpoint()
	r := c.drive
	if !r.rt.cfg.Features.ContinueAsNew {
		return &NotConfiguredError{Field: "Features.ContinueAsNew", Need: "continueAsNew"}
	}
	if c.branch != "" {
		return fmt.Errorf("loom: continueAsNew is called from the flow's root goroutine, not a Parallel branch")
	}
	in, err := marshalPayload(input)
	if err != nil {
		return fmt.Errorf("loom: continueAsNew input: %w", err)
	}
	st := r.j.State()
	index, err := chainIndex(st)
	if err != nil {
		return err
	}
	link := chainLink{ID: chainOf(r.x.id, st), Index: index + 1}
	carry, err := json.Marshal(map[string]any{"resources": st.Variables.Resources, "inbox": st.Variables.Inbox})
	if err != nil {
		return err
	}
	next := &successor{ID: link.ID + "~" + strconv.Itoa(link.Index), Input: orNull(in), Chain: link, Carry: carry}
	if r.verifying() {
		r.reach(frontier{kind: frontierEnd, typ: event.ExecutionContinued, status: fold.StatusContinued})
	}
	r.mu.Lock()
	r.successor = next
	r.mu.Unlock()
	r.root.stop.Store(true)
	// The successor starts first, then this execution ends: a crash in
	// between leaves this one running, and its recovery finds the
	// successor already there — so no recovery has to look for continued
	// executions whose successor never started.
	if err := r.rt.startSuccessor(r.ctx, r.flow, next); err != nil {
		r.abort(err)
	}
	if _, err := r.j.CommitTerminal(event.ExecutionContinued, next, kernelStamp()); err != nil {
		r.abort(err)
	}
	r.barrier()
	runtime.Goexit()
	return nil
}

// chainIndex is the execution's position in its continue-as-new chain.
func chainIndex(st fold.State) (int, error) {
	var link chainLink
	if len(st.Variables.Chain) > 0 {
		if err := unmarshalRecorded(st.Variables.Chain, &link); err != nil {
			return 0, fmt.Errorf("loom: continueAsNew: the recorded chain is unreadable: %w", err)
		}
	}
	return link.Index, nil
}

// startSuccessor starts the execution a continuing one hands over to; a
// successor that already exists (started before a crash, by this
// execution's earlier drive) is left alone.
func (rt *Runtime) startSuccessor(ctx context.Context, flow *Flow, s *successor) error {
	started := map[string]any{"input": s.Input, "chain": s.Chain}
	if len(s.Carry) > 0 {
		started["carry"] = s.Carry
	}
	if err := rt.start(ctx, flow, s.ID, started, nil); err != nil && !errors.Is(err, ErrExecutionExists) {
		return fmt.Errorf("loom: starting the successor %q: %w", s.ID, err)
	}
	return nil
}

// recoverSuccessor starts the successor of a continued execution whose
// process stopped before it could.
func (rt *Runtime) recoverSuccessor(ctx context.Context, id string, flow *Flow, st fold.State) (bool, error) {
	next := st.Variables.ContinuedTo
	if st.Status != fold.StatusContinued || next == "" {
		return false, nil
	}
	head, err := store.ReadRange(ctx, rt.cfg.Events, next, 0, 1)
	if err != nil || len(head) > 0 {
		return false, err
	}
	last, err := store.ReadRange(ctx, rt.cfg.Events, id, st.Sequence, st.Sequence+1)
	if err != nil || len(last) == 0 || last[0].Type != event.ExecutionContinued {
		return false, err
	}
	var s successor
	if err := unmarshalRecorded(last[0].Payload, &s); err != nil {
		return false, err
	}
	if err := rt.startSuccessor(ctx, flow, &s); err != nil {
		return false, err
	}
	return true, nil
}
