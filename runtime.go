package loom

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/divergence"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/internal/schema"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

// Runtime runs flows durably over an EventStore. Build it with New; it is
// safe for concurrent use. Executions outlive the calls that start them:
// Start returns once EXECUTION_STARTED is durable and the flow runs on.
type Runtime struct {
	cfg   Config
	flows map[string]*Flow
	// schemas are the compiled resume schemas of each flow, by flow id.
	schemas map[string]map[string]*schema.Schema
	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	live        map[string]*execution // executions claimed by this process
	sticky      map[string]*stickyPark
	stickyOrder *list.List    // sticky park ids, oldest first
	changed     chan struct{} // closed at every change a claim waiter waits for (changedLocked)

	// aborted remembers, for the latest maxRememberedAborts executions whose
	// drive here stopped without an outcome, why — so a waiter that comes
	// after the drive is gone still hears it. A new claim of the id forgets.
	aborted      map[string]error
	abortedOrder []string
	// automaticPasses counts the automatic recovery passes begun.
	automaticPasses int

	timerHandlers map[string]TimerHandler
	streams       streamLengths          // inbox stream lengths this process knows
	leases        map[string]store.Lease // leases this node holds, by execution
	leaseLocks    leaseLocks
	pump          *durablePump // feeds Config.OnDurableEvent; nil without it
}

// execution is an execution claimed by this process: at most one drive (or
// one gate transaction) at a time.
type execution struct {
	id    string
	flow  *Flow
	drive *drive        // the current drive, nil while claimed without one
	done  chan struct{} // closed when the claim is released
	// final is the durable state a drive ended in (parked or ended);
	// settled says it is set. Written before done is closed.
	final   fold.State
	settled bool
	// abortErr is why the drive ended without settling (a journal failure,
	// a lost lease, the runtime closing); written before done is closed.
	abortErr error
}

// New builds a Runtime from cfg. It refuses a missing event store, a flow
// registered twice and a flow whose resume schemas do not compile.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.wireStorage(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	rt := &Runtime{cfg: cfg, flows: map[string]*Flow{}, schemas: map[string]map[string]*schema.Schema{}, live: map[string]*execution{}}
	for _, f := range cfg.Flows {
		resume, err := f.compile()
		if err != nil {
			return nil, err
		}
		if _, dup := rt.flows[f.ID]; dup {
			return nil, fmt.Errorf("loom: flow %q registered twice", f.ID)
		}
		rt.flows[f.ID], rt.schemas[f.ID] = f, resume
	}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	if cfg.OnDurableEvent != nil {
		rt.pump = newDurablePump(cfg.OnDurableEvent, cfg.EventHookBuffer, cfg.Logger.Warn)
	}
	if cfg.Timers != nil && cfg.TimerPoll > 0 {
		rt.wg.Add(1)
		go rt.pollTimers()
	}
	if cfg.Leases != nil && cfg.Heartbeat > 0 {
		rt.wg.Add(1)
		go rt.heartbeat()
	}
	if !cfg.Recovery.Disabled {
		rt.wg.Add(1)
		go rt.recoverPeriodically()
	}
	return rt, nil
}

// Close cancels every running drive (their effects see a cancelled
// context), waits for them to stop and refuses further calls. Executions
// stay as their logs have them; another Runtime can Recover them.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	rt.closed = true
	var runs []*drive
	for _, x := range rt.live { //loom:order-independent each run is halted on its own
		if x.drive != nil {
			runs = append(runs, x.drive)
		}
	}
	rt.mu.Unlock()
	for _, r := range runs {
		// Nothing more is recorded: no step outcome of a cancelled effect,
		// no failure of the flow.
		r.j.Halt(ErrRuntimeClosed)
		r.root.stop.Store(true)
	}
	rt.cancel()
	rt.wg.Wait()
	if rt.pump != nil {
		rt.pump.close()
	}
	return nil
}

// claim reserves an execution id for this process, or says who holds it.
// Every claim is released exactly once, by release: transact owns that for
// every operation, and a drive releases the claim it was handed.
func (rt *Runtime) claim(id string, flow *Flow) (*execution, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil, ErrRuntimeClosed
	}
	if _, busy := rt.live[id]; busy {
		return nil, errBusy
	}
	x := &execution{id: id, flow: flow, done: make(chan struct{})}
	rt.live[id] = x
	return x, nil
}

// maxRememberedAborts bounds Runtime.aborted.
const maxRememberedAborts = 1024

// rememberAbortLocked keeps why x's drive stopped without an outcome.
func (rt *Runtime) rememberAbortLocked(x *execution) {
	if x.abortErr == nil {
		return
	}
	if rt.aborted == nil {
		rt.aborted = map[string]error{}
	}
	if _, ok := rt.aborted[x.id]; !ok {
		rt.abortedOrder = append(rt.abortedOrder, x.id)
	}
	rt.aborted[x.id] = x.abortErr
	for len(rt.abortedOrder) > maxRememberedAborts {
		delete(rt.aborted, rt.abortedOrder[0])
		rt.abortedOrder = rt.abortedOrder[1:]
	}
}

// abortOf is why this process's last drive of id stopped without an
// outcome, if it did and no drive of id started since (a claim that
// launched nothing, a refused resume, leaves it).
func (rt *Runtime) abortOf(id string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.aborted[id]
}

var errBusy = errors.New("loom: execution is being driven")

func (rt *Runtime) release(x *execution) {
	rt.releaseLease(x.id)
	rt.mu.Lock()
	delete(rt.live, x.id)
	rt.rememberAbortLocked(x)
	rt.mu.Unlock()
	close(x.done)
}

func (rt *Runtime) liveExecution(id string) *execution {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.live[id]
}

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	id       string
	deadline *time.Time
}

// WithDeadline bounds the whole execution (K8): past t it is cancelled
// (EXECUTION_CANCELLED, "deadline exceeded") — by its timer when
// Config.Timers is wired, wherever it is parked — and every effect's
// context expires at t. The deadline is recorded, so it survives restarts.
func WithDeadline(t time.Time) StartOption { return func(o *startOptions) { o.deadline = &t } }

// WithExecutionID starts under a caller-chosen id; a duplicate is refused
// with ErrExecutionExists before anything runs (ADR 0103).
func WithExecutionID(id string) StartOption { return func(o *startOptions) { o.id = id } }

// Start begins an execution of flow flowID with input and returns its id
// once EXECUTION_STARTED is durable; the flow then runs in the background.
// Use WaitForCompletion or WaitForSuspend to observe it. An unknown flow,
// an invalid or reserved id and an input with no JSON form are refused
// before anything is appended; a caller-chosen id already in use is
// refused with ErrExecutionExists before anything runs.
func (rt *Runtime) Start(ctx context.Context, flowID string, input any, opts ...StartOption) (string, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	flow, ok := rt.flows[flowID]
	if !ok {
		return "", rt.unknownFlow(flowID)
	}
	id := o.id
	if id == "" {
		id = rt.cfg.NewID()
	}
	if err := validateNewID(id); err != nil {
		return "", err
	}
	in, err := marshalPayload(input)
	if err == nil {
		err = event.ValidateCarried("input", in)
	}
	if err != nil {
		return "", fmt.Errorf("loom: encoding input: %w", err)
	}
	if err := flow.checkInput(in); err != nil {
		return "", err
	}
	if err := rt.authorize(ctx, "start", id, flowID, false); err != nil {
		return "", err
	}
	started := map[string]any{"input": orNull(in)}
	if p := principalOf(ctx); p != nil {
		raw, err := json.Marshal(p)
		if err != nil {
			return "", fmt.Errorf("loom: encoding the principal: %w", err)
		}
		if err := store.ValidateTenant(identityOf(raw).tenant); err != nil {
			return "", err
		}
		started["principal"] = json.RawMessage(raw)
	}
	var deadline *int64
	if o.deadline != nil && rt.cfg.Timers == nil {
		return "", &NotConfiguredError{Field: "Timers", Need: "WithDeadline (its timer cancels a parked execution)"}
	}
	if o.deadline != nil {
		ms := o.deadline.UnixMilli()
		deadline = &ms
	}
	return id, rt.start(ctx, flow, id, started, deadline)
}

// validateNewID refuses an id a new execution (a start, a fork) may not
// take: an invalid one, or one in the kernel's reserved namespace.
func validateNewID(id string) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if strings.HasPrefix(id, reservedPrefix) {
		return fmt.Errorf("loom: execution id %q: ids starting with %s are reserved for the kernel; choose another id", id, reservedPrefix)
	}
	return nil
}

// start records EXECUTION_STARTED (started, plus the flow's pins) durably
// under id and drives the flow. A log that already exists is refused with
// ErrExecutionExists before anything runs.
func (rt *Runtime) start(ctx context.Context, flow *Flow, id string, started map[string]any, deadline *int64) error {
	started["flowHash"] = flow.flowHash()
	if flow.CodeFingerprint != "" {
		started["codeHash"] = flow.CodeFingerprint
	}
	return rt.transact(ctx, id, txSpec{
		op:     "start",
		create: true, flow: flow, initial: fold.Initial(),
		admit: func(ctx context.Context, tx *txn) error {
			if deadline == nil {
				return nil
			}
			// The deadline's timer is stored before the start commits, so
			// make sure it cannot land on another execution's id.
			head, err := store.ReadRange(ctx, rt.cfg.Events, id, 0, 1)
			if err != nil {
				return err
			}
			if len(head) > 0 {
				return fmt.Errorf("%w: %q", ErrExecutionExists, id)
			}
			return nil
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			if _, err := tx.j.Commit(event.ExecutionStarted, started, nil); err != nil {
				return false, err
			}
			if deadline != nil {
				if err := rt.recordDeadline(ctx, tx.j, *deadline); err != nil {
					return false, err
				}
			}
			return true, nil
		},
	})
}

// unknownFlow refuses a flow id that is not registered, naming those that are.
func (rt *Runtime) unknownFlow(flowID string) error {
	ids := make([]string, 0, len(rt.flows))
	for id := range rt.flows { //loom:sorted below
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return fmt.Errorf("%w: %q (registered flows: %s)", ErrUnknownFlow, flowID, strings.Join(ids, ", "))
}

// launch runs the flow over j in the background and releases x when the
// drive ends.
func (rt *Runtime) launch(opCtx context.Context, x *execution, j *journal.Journal, simulate bool) {
	st := j.State()
	ctx, cancel := context.WithCancel(rt.ctx)
	endDrive := func(DriveEnd) {}
	if o := rt.cfg.Observer; o != nil {
		// The drive's context stays the runtime's (cancelled by Close); the
		// Observer adds the drive's span, parented in the operation's trace.
		ctx, endDrive = o.Drive(ctx, DriveInfo{ExecutionID: x.id, FlowID: x.flow.ID, Simulated: simulate,
			Operation: opCtx, Trace: func() map[string]string { return rt.startedTrace(x.id) }})
	}
	r := &drive{rt: rt, x: x, j: j, flow: x.flow, ctx: ctx, cancel: cancel, simulate: simulate,
		root: &scope{ctx: ctx, cancel: cancel}, snapshotAt: -1, issued: map[string]issue{}}
	if rt.cfg.Interleaver != nil {
		r.turns = newTurns(rt.cfg.Interleaver, x.id)
	}
	if rt.cfg.Divergence != DivergenceOff && (len(st.Frames) > 0 || len(st.Variables.ResumePayloads) > 0) {
		r.div = divergence.New(st)
	}
	// Register the drive with Close under the lock Close takes: a drive
	// either is seen (halted and waited for) by Close or sees the runtime
	// closed and never starts, so no flow runs after Close returns.
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		cancel()
		x.abortErr = ErrRuntimeClosed
		rt.release(x)
		endDrive(DriveEnd{Err: ErrRuntimeClosed})
		rt.cfg.Logger.Warn("loom: runtime closed before the drive started; the execution stays as its log has it", "execution", x.id)
		return
	}
	x.drive = r
	delete(rt.aborted, x.id) // a new drive: the last one's abort is history
	rt.changedLocked()
	rt.wg.Add(1)
	rt.mu.Unlock()
	go func() {
		defer rt.wg.Done()
		o := r.runBody(st.Variables.Input)
		endDrive(DriveEnd{Status: o.status, Err: o.err})
		cancel()
		if o.err == nil {
			x.final, x.settled = j.State(), true
			if o.status == fold.StatusSuspended && x.final.Sequence != r.snapshotAt {
				rt.saveSnapshot(x.id, x.final)
			}
		} else {
			x.abortErr = &DriveAbortedError{ExecutionID: x.id, Err: o.err}
			rt.cfg.Logger.Warn("loom: drive aborted; the execution stays as its log has it", "execution", x.id, "error", o.err)
		}
		j.Settle() // nothing this drive queued is written after Close returns
		rt.release(x)
		switch {
		case o.status == fold.StatusContinued:
			// A message sent to the chain while this execution was ending
			// went to it, not to the successor that had already started.
			rt.deliver(rt.ctx, r.successor.ID)
			// The chain's end may have come before this end was durable
			// (the successor starts first): look again for the parent.
			if rt.cfg.Features.Children {
				rt.wakeParent(rt.ctx, x.final)
			}
		case o.status == fold.StatusSuspended && x.final.Variables.SuspendedOn != nil &&
			x.final.Variables.SuspendedOn.On == gateSelect:
			// A message sent while this drive was parking found it busy.
			rt.deliver(rt.ctx, x.id)
		case o.status == fold.StatusSuspended && x.final.Variables.SuspendedOn != nil &&
			x.final.Variables.SuspendedOn.On == gateChild:
			// The child may have ended before this park: look at it now.
			rt.deliverChild(rt.ctx, x.id)
		case o.err == nil && o.status.Terminal():
			rt.ended(rt.ctx, x.id, x.final)
		}
	}()
}

// saveSnapshot checkpoints s; a failure only costs a longer replay later.
func (rt *Runtime) saveSnapshot(id string, s fold.State) {
	if rt.cfg.Snapshots == nil {
		return
	}
	b, err := snapshot.Encode(s)
	if err == nil {
		err = rt.cfg.Snapshots.Save(context.Background(), store.Snapshot{ExecutionID: id, Sequence: s.Sequence,
			SchemaVersion: event.SchemaVersion, State: b})
	}
	if err != nil {
		rt.cfg.Logger.Warn("loom: snapshot not saved", "execution", id, "sequence", s.Sequence, "error", err)
	}
}

// authorize asks the Authorizer; a denial of an existing execution is
// recorded as EXECUTION_DENIED.
//
// Tenancy comes first: a caller whose principal names a tenant finds no
// execution of another tenant (ErrExecutionNotFound, nothing recorded —
// not even the denial, which would write to the other tenant's log), and
// the Authorizer sees the execution's recorded tenant.
func (rt *Runtime) authorize(ctx context.Context, action, id, flowID string, exists bool) error {
	scope := callerTenant(ctx)
	if rt.cfg.Authorizer == nil && (scope == "" || !exists) {
		return nil
	}
	tenant := scope
	if exists {
		recorded, found, err := store.ReadTenant(ctx, rt.cfg.Events, id)
		if err != nil {
			return err
		}
		if found && scope != "" && recorded != scope {
			return fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
		}
		tenant = recorded
	}
	if rt.cfg.Authorizer == nil {
		return nil
	}
	err := rt.cfg.Authorizer.Authorize(ctx, AuthzRequest{Action: action, ExecutionID: id, FlowID: flowID, Tenant: tenant, Principal: principalOf(ctx)})
	if err == nil {
		return nil
	}
	denied := &ExecutionDeniedError{ExecutionID: id, Action: action, Reason: err.Error()}
	if exists {
		rt.recordDenial(ctx, id, action, err.Error())
	}
	return denied
}

// marshalJSON encodes a value the kernel built itself (ids, numbers,
// lineage): it cannot fail, and a failure is a kernel bug.
func marshalJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("loom: encoding a kernel value: " + err.Error())
	}
	return b
}
