package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/store"
)

// One transaction path. Start, Resume, a re-drive, ResumeAs,
// ResolveInDoubt, an inbox delivery, Cancel, a denial record and Fork all
// do the same thing: claim the execution in this process, load its state,
// check what the operation may do, take over its lease and fence, open a
// journal, commit events, wait for the barrier, then drive the flow or
// settle, and release. transact owns that sequence and its one release
// discipline; each operation is a txSpec over it.
//
// Until the first commit, a refusal changes nothing durable: no event, no
// fence bump, no lease write (a lease taken for the transaction is given
// back). From the first commit on the transaction runs to durability
// whatever the caller's context says, so a cancelled caller never leaves
// half a transaction.

// txn is one transaction on an execution, as its spec's hooks see it.
type txn struct {
	id         string
	x          *execution
	state      fold.State // the durable state under the claim
	workflowID string     // the flow id of the log (an admit hook may move it: ResumeAs)
	eventsRead int
	simulate   bool
	j          *journal.Journal
}

// txSpec is what an operation does inside the transaction.
type txSpec struct {
	// op names the operation for an Observer ("start", "resume", …).
	op string
	// create says the id must be new (Start, Fork): a claimed or existing
	// id is refused with ErrExecutionExists, and nothing is loaded — the
	// journal opens on initial, for flow.
	create  bool
	flow    *Flow
	initial fold.State
	// admit inspects the state under the claim before anything durable
	// happens; its error is the operation's refusal.
	admit func(ctx context.Context, tx *txn) error
	// redrive marks a re-drive of a running execution: it is refused while
	// another node's lease is live (or, before any lease was taken, while
	// the execution shows activity younger than a lease TTL).
	redrive bool
	// pin checks the execution's recorded code pin against the flow that
	// will drive it (K11); set by every operation that drives an existing
	// execution without migrating it.
	pin bool
	// anyFlow lets the operation claim an execution of a flow this runtime
	// does not register; its commit must never ask to drive it.
	anyFlow bool
	// commit appends the operation's events through tx.j and says whether
	// the flow is driven afterwards.
	commit func(ctx context.Context, tx *txn) (drive bool, err error)
	// durable runs once the commits are durable, before the drive.
	durable func(ctx context.Context, tx *txn)
}

// transact runs s on execution id.
func (rt *Runtime) transact(ctx context.Context, id string, s txSpec) (err error) {
	if rt.cfg.Observer != nil {
		flowID := ""
		if s.flow != nil {
			flowID = s.flow.ID
		}
		var end func(error)
		ctx, end = rt.operation(ctx, s.op, id, flowID)
		defer func() { end(err) }()
	}
	tx, err := rt.begin(ctx, id, s)
	if err != nil {
		return err
	}
	driving := false
	defer func() {
		if !driving {
			if tx.j != nil {
				tx.j.Settle()
			}
			rt.release(tx.x)
		}
	}()
	if s.admit != nil {
		if err := s.admit(ctx, tx); err != nil {
			return err
		}
	}
	if s.redrive {
		if err := rt.vetoRedrive(ctx, id, tx.state); err != nil {
			return err
		}
	}
	if s.pin {
		if err := checkCodePin(id, tx.state, tx.x.flow); err != nil {
			return err
		}
	}
	var token int64
	if !s.create {
		// A fresh id needs no take-over: its conditional append at
		// sequence 0 is the fence, and its lease comes with the first
		// heartbeat.
		if token, err = rt.takeOver(ctx, id); err != nil {
			return err
		}
	}
	tx.j = rt.openJournal(id, tx.workflowID, tx.state, token, driveMeta(tx.state, tx.simulate), rt.withTrace(ctx, nil))
	drive, err := s.commit(ctx, tx)
	if err == nil {
		err = tx.j.Barrier(context.WithoutCancel(ctx))
	}
	if err != nil {
		if s.create && createConflict(err) {
			return fmt.Errorf("%w: %q", ErrExecutionExists, id)
		}
		return err
	}
	if s.durable != nil {
		s.durable(ctx, tx)
	}
	if drive {
		driving = true
		rt.launch(ctx, tx.x, tx.j, tx.simulate)
	}
	return nil
}

// begin claims id for the transaction and, for an existing execution,
// loads it under the claim.
func (rt *Runtime) begin(ctx context.Context, id string, s txSpec) (*txn, error) {
	if s.create {
		x, err := rt.claim(id, s.flow)
		if errors.Is(err, errBusy) {
			return nil, fmt.Errorf("%w: %q", ErrExecutionExists, id)
		}
		if err != nil {
			return nil, err
		}
		return &txn{id: id, x: x, state: s.initial, workflowID: s.flow.ID}, nil
	}
	x, l, err := rt.claimLoaded(ctx, id, s.anyFlow)
	if err != nil {
		return nil, err
	}
	return &txn{id: id, x: x, state: l.state, workflowID: l.workflowID, eventsRead: l.eventsRead,
		simulate: forkSimulated(l.state)}, nil
}

// createConflict says a fresh id's first append found a log there: a
// sequence conflict at 0, or a fence a former execution of the id raised.
func createConflict(err error) bool {
	var fenced *store.FencedError
	return errors.Is(err, store.ErrSequenceConflict) || errors.As(err, &fenced)
}

// openJournal opens the journal a transaction (and the drive after it)
// writes through.
func (rt *Runtime) openJournal(id, workflowID string, st fold.State, token int64, meta, first map[string]json.RawMessage) *journal.Journal {
	opts := []journal.Option{
		journal.WithClock(func() int64 { return rt.cfg.Clock.Now().UnixMilli() }),
		journal.WithIDs(rt.cfg.NewID),
		journal.WithMeta(meta),
	}
	if len(first) > 0 {
		opts = append(opts, journal.WithFirstMeta(first))
	}
	if f, ok := rt.cfg.Events.(store.Fencer); ok && !rt.cfg.DisableFencing {
		opts = append(opts, journal.WithFence(f, token))
	}
	if rt.cfg.OnEvent != nil || rt.pump != nil {
		var durable func([]event.Envelope)
		if rt.pump != nil {
			durable = rt.pump.push
		}
		opts = append(opts, journal.WithHooks(rt.cfg.OnEvent, durable, func(hook string, v any) {
			rt.cfg.Logger.Warn("loom: "+hook+" panicked; the runtime goes on", "execution", id, "panic", fmt.Sprint(v))
		}))
	}
	if o := rt.cfg.Observer; o != nil {
		opts = append(opts, journal.WithAppendObserver(func(events int) func(error) {
			return o.Append(rt.ctx, id, events)
		}))
	}
	if rt.cfg.Snapshots != nil && rt.cfg.SnapshotEvery > 0 {
		opts = append(opts, journal.WithSnapshots(int64(rt.cfg.SnapshotEvery), func(s fold.State) { rt.saveSnapshot(id, s) }))
	}
	return journal.New(rt.cfg.Events, id, workflowID, st, opts...)
}

// takeOver makes this transaction the execution's newest driver: it takes
// the lease (when leases are wired; another node's live lease refuses it,
// nothing written) and then, with a fencing store, the fence, so every
// driver before it is refused from now on. It returns the fencing token.
func (rt *Runtime) takeOver(ctx context.Context, id string) (int64, error) {
	if err := rt.acquireLease(ctx, id); err != nil {
		return 0, err
	}
	f, ok := rt.cfg.Events.(store.Fencer)
	if !ok || rt.cfg.DisableFencing {
		return 0, nil
	}
	return f.AcquireFence(ctx, id)
}
