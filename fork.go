package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// ForkMarker is the type of the kernel-stamped event a fork appends after
// the copied prefix: inert for the fold, its metadata.forkChain records the
// lineage (folded into _forkChain) and whether the branch is a simulation.
const ForkMarker = reservedPrefix + "fork__"

// ForkOption configures Fork.
type ForkOption func(*forkOptions)

type forkOptions struct {
	id       string
	simulate bool
}

// ForkID names the new execution (default: a fresh id).
func ForkID(id string) ForkOption { return func(o *forkOptions) { o.id = id } }

// SimulateFork makes every drive of the fork a simulation.
func SimulateFork() ForkOption { return func(o *forkOptions) { o.simulate = true } }

// forkLink is one entry of metadata.forkChain.
type forkLink struct {
	ExecutionID string `json:"executionId"`
	Sequence    int64  `json:"sequence"`
	Simulate    bool   `json:"simulate,omitempty"`
}

// Fork copies the prefix [0..at] of an execution into a new execution
// (store-side when the store is a PrefixCopier) and returns its id. The
// parent is untouched. A fork parked at a gate waits for its own Resume; a
// fork of a running prefix is driven at once. A snapshot is written at the
// fork point. A fork is an independent execution: there is no merge.
func (rt *Runtime) Fork(ctx context.Context, id string, at int64, opts ...ForkOption) (string, error) {
	var o forkOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return "", err
	}
	src, err := rt.LoadStateAt(ctx, id, at)
	if err != nil {
		return "", err
	}
	if at < 0 || src.Sequence != at {
		return "", fmt.Errorf("loom: fork of %q at %d: the log ends at %d", id, at, src.Sequence)
	}
	if through := rt.trimPoint(ctx, id); through > 0 && at <= through {
		// The prefix to copy is in the archive: a fork is a log of its own.
		return "", &CompactedHistoryError{ExecutionID: id, Through: through, At: at}
	}
	head, err := store.ReadRange(ctx, rt.cfg.Events, id, 0, 1)
	if err != nil || len(head) == 0 {
		return "", fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	flow, ok := rt.flows[head[0].WorkflowID]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownFlow, head[0].WorkflowID)
	}
	newID := o.id
	if newID == "" {
		newID = rt.cfg.NewID()
	}
	if err := validateNewID(newID); err != nil {
		return "", err
	}
	if err := checkCodePin(id, src, flow); err != nil {
		return "", err
	}
	if err := rt.authorize(ctx, "start", newID, flow.ID, false); err != nil {
		return "", err
	}
	chain, err := parentChain(src)
	if err != nil {
		return "", err
	}
	chain = append(chain, forkLink{ExecutionID: id, Sequence: at, Simulate: o.simulate})
	forkedBy, err := json.Marshal(principalOf(ctx))
	if err != nil {
		return "", fmt.Errorf("loom: encoding the principal: %w", err)
	}
	var final fold.State
	err = rt.transact(ctx, newID, txSpec{
		op:     "fork",
		create: true, flow: flow, initial: src,
		admit: func(ctx context.Context, tx *txn) error {
			tx.simulate = o.simulate
			if err := rt.copyPrefix(ctx, id, newID, at); err != nil {
				if errors.Is(err, store.ErrSequenceConflict) {
					return fmt.Errorf("%w: %q", ErrExecutionExists, newID)
				}
				return err
			}
			if rt.cfg.Features.Inbox {
				return rt.copyInbox(ctx, id, src, newID)
			}
			return nil
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			meta := map[string]json.RawMessage{"kernel": json.RawMessage("true"), "forkChain": marshalJSON(chain),
				"forkedBy": forkedBy}
			if _, err := tx.j.Commit(ForkMarker, map[string]any{"parent": id, "at": at}, meta); err != nil {
				return false, err
			}
			st := tx.j.State()
			return st.Status == fold.StatusRunning || st.Status == fold.StatusPending, nil
		},
		durable: func(ctx context.Context, tx *txn) {
			final = tx.j.State()
			rt.saveSnapshot(newID, final)
		},
	})
	if err != nil {
		return "", err
	}
	if awaitsMessage(final) {
		rt.deliver(ctx, newID) // the fork point may sit between a message and its wake-up
	}
	return newID, nil
}

func (rt *Runtime) copyPrefix(ctx context.Context, from, to string, through int64) error {
	if pc, ok := rt.cfg.Events.(store.PrefixCopier); ok {
		return pc.CopyPrefix(ctx, from, to, through)
	}
	evs, err := store.ReadRange(ctx, rt.cfg.Events, from, 0, through+1)
	if err != nil {
		return err
	}
	for i := range evs {
		evs[i].ExecutionID = to
	}
	return rt.cfg.Events.Append(ctx, to, 0, evs)
}

// parentChain is the execution's fork lineage, as the kernel-stamped fork
// markers recorded it.
func parentChain(s fold.State) ([]forkLink, error) {
	var chain []forkLink
	if len(s.Variables.ForkChain) > 0 {
		if err := unmarshalRecorded(s.Variables.ForkChain, &chain); err != nil {
			return nil, fmt.Errorf("loom: the recorded fork lineage is unreadable: %w", err)
		}
	}
	return chain, nil
}

// forkSimulated reports whether the execution is a simulated fork.
// An unreadable lineage counts as a simulation: nothing acts for real on
// a log whose origin the kernel cannot tell.
func forkSimulated(s fold.State) bool {
	chain, err := parentChain(s)
	return err != nil || len(chain) > 0 && chain[len(chain)-1].Simulate
}

// driveMeta is the metadata the kernel stamps on a drive's events: a
// simulation marks each one, so nobody mistakes it for a real outcome.
func driveMeta(s fold.State, simulate bool) map[string]json.RawMessage {
	if simulate || forkSimulated(s) {
		return map[string]json.RawMessage{"simulate": json.RawMessage("true")}
	}
	return nil
}

// Promote points ref at execution id in the BranchRegistry (created if
// missing): promotion is a pointer move, never a merge.
func (rt *Runtime) Promote(ctx context.Context, ref, id string) (store.Ref, error) {
	if rt.cfg.Branches == nil {
		return store.Ref{}, &NotConfiguredError{Field: "Branches", Need: "Promote"}
	}
	if _, err := rt.LoadState(ctx, id); err != nil {
		return store.Ref{}, err
	}
	cur, err := rt.cfg.Branches.ReadRef(ctx, ref)
	switch {
	case errors.Is(err, store.ErrRefNotFound):
		return rt.cfg.Branches.CreateRef(ctx, ref, id)
	case err != nil:
		return store.Ref{}, err
	}
	return rt.cfg.Branches.MoveRef(ctx, ref, id, cur.Version)
}
