package loom

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

// Runtime runs flows durably over an EventStore. Build it with New; it is
// safe for concurrent use. Executions outlive the calls that start them:
// Start returns once EXECUTION_STARTED is durable and the flow runs on.
type Runtime struct {
	cfg    Config
	flows  map[string]*Flow
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	live        map[string]*execution // executions claimed by this process
	sticky      map[string]*stickyPark
	stickyOrder *list.List    // sticky park ids, oldest first
	stickyWait  chan struct{} // closed when a park is (re)registered

	timerHandlers map[string]TimerHandler
	streams       streamLengths          // inbox stream lengths this process knows
	leases        map[string]store.Lease // leases this node holds, by execution
	leaseLocks    leaseLocks
}

// execution is an execution claimed by this process: at most one drive (or
// one gate transaction) at a time.
type execution struct {
	id   string
	flow *Flow
	run  *run          // the current drive, nil while claimed without one
	done chan struct{} // closed when the claim is released
	// final is the durable state a drive ended in (parked or ended);
	// settled says it is set. Written before done is closed.
	final   fold.State
	settled bool
}

// New builds a Runtime from cfg. It refuses a missing event store, a flow
// registered twice and a flow whose resume schemas do not compile.
func New(cfg Config) (*Runtime, error) {
	if cfg.Events == nil {
		return nil, errors.New("loom: Config.Events is required")
	}
	cfg.applyDefaults()
	rt := &Runtime{cfg: cfg, flows: map[string]*Flow{}, live: map[string]*execution{}}
	for _, f := range cfg.Flows {
		if err := f.compile(); err != nil {
			return nil, err
		}
		if _, dup := rt.flows[f.ID]; dup {
			return nil, fmt.Errorf("loom: flow %q registered twice", f.ID)
		}
		rt.flows[f.ID] = f
	}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	if cfg.Timers != nil && cfg.TimerPoll > 0 {
		rt.wg.Add(1)
		go rt.pollTimers()
	}
	if cfg.Leases != nil && cfg.Heartbeat > 0 {
		rt.wg.Add(1)
		go rt.heartbeat()
	}
	return rt, nil
}

// Close cancels every running drive (their effects see a cancelled
// context), waits for them to stop and refuses further calls. Executions
// stay as their logs have them; another Runtime can Recover them.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	rt.closed = true
	var runs []*run
	for _, x := range rt.live { //loom:order-independent each run is halted on its own
		if x.run != nil {
			runs = append(runs, x.run)
		}
	}
	rt.mu.Unlock()
	for _, r := range runs {
		// Nothing more is recorded: no step outcome of a cancelled effect,
		// no failure of the flow.
		r.j.halt(ErrRuntimeClosed)
		r.root.stop.Store(true)
	}
	rt.cancel()
	rt.wg.Wait()
	return nil
}

// claim reserves an execution id for this process, or says who holds it.
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

var errBusy = errors.New("loom: execution is being driven")

func (rt *Runtime) release(x *execution) {
	rt.releaseLease(x.id)
	rt.mu.Lock()
	delete(rt.live, x.id)
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
// Use WaitForCompletion or WaitForSuspend to observe it.
func (rt *Runtime) Start(ctx context.Context, flowID string, input any, opts ...StartOption) (string, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	flow, ok := rt.flows[flowID]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownFlow, flowID)
	}
	id := o.id
	if id == "" {
		id = rt.cfg.NewID()
	}
	if err := event.ValidateID("execution id", id); err != nil {
		return "", err
	}
	if strings.HasPrefix(id, "__loom_") {
		return "", fmt.Errorf("loom: execution id %q: ids starting with __loom_ are reserved", id)
	}
	in, err := marshalPayload(input)
	if err != nil {
		return "", fmt.Errorf("loom: encoding input: %w", err)
	}
	if err := rt.authorize(ctx, "start", id, flowID, false); err != nil {
		return "", err
	}
	started := map[string]any{"input": orNull(in)}
	if p := principalOf(ctx); p != nil {
		started["principal"] = p
	}
	var deadline *int64
	if o.deadline != nil {
		ms := o.deadline.UnixMilli()
		deadline = &ms
	}
	return id, rt.start(ctx, flow, id, started, deadline)
}

// start records EXECUTION_STARTED (started, plus the flow's pins) durably
// under id and drives the flow. A log that already exists is refused with
// ErrExecutionExists before anything runs.
func (rt *Runtime) start(ctx context.Context, flow *Flow, id string, started map[string]any, deadline *int64) error {
	x, err := rt.claim(id, flow)
	if errors.Is(err, errBusy) {
		return fmt.Errorf("%w: %q", ErrExecutionExists, id)
	}
	if err != nil {
		return err
	}
	started["flowHash"] = flow.flowHash()
	if flow.CodeFingerprint != "" {
		started["codeHash"] = flow.CodeFingerprint
	}
	j := rt.newJournal(id, flow.ID, fold.Initial())
	if _, err := j.commit(event.ExecutionStarted, started, nil); err != nil {
		rt.release(x)
		return err
	}
	if deadline != nil {
		if err := rt.recordDeadline(ctx, j, *deadline); err != nil {
			rt.release(x)
			return err
		}
	}
	if err := j.barrier(ctx); err != nil {
		rt.release(x)
		if errors.Is(err, store.ErrSequenceConflict) {
			return fmt.Errorf("%w: %q", ErrExecutionExists, id)
		}
		return err
	}
	rt.drive(x, j, false)
	return nil
}

func (rt *Runtime) newJournal(id, workflowID string, st fold.State) *journal {
	j := newJournal(rt.cfg.Events, id, workflowID, st, func() int64 { return rt.cfg.Clock.Now().UnixMilli() }, rt.cfg.NewID)
	if f, ok := rt.cfg.Events.(store.Fencer); ok && !rt.cfg.DisableFencing {
		j.fencer = f
	}
	if rt.cfg.Snapshots != nil && rt.cfg.SnapshotEvery > 0 {
		j.snapshotEvery = int64(rt.cfg.SnapshotEvery)
		j.saveSnapshot = func(s fold.State) { rt.saveSnapshot(id, s) }
	}
	return j
}

// takeOver makes j the execution's newest driver: it takes the lease (when
// leases are wired; another node's live lease refuses it) and, with a
// fencing store, the fence, so every driver before it is refused from now
// on. A fresh start needs neither: its conditional append at sequence 0 is
// the fence, and its lease comes with the first heartbeat.
func (rt *Runtime) takeOver(ctx context.Context, j *journal) error {
	if err := rt.acquireLease(ctx, j.executionID); err != nil {
		return err
	}
	if j.fencer == nil {
		return nil
	}
	token, err := j.fencer.AcquireFence(ctx, j.executionID)
	if err != nil {
		return err
	}
	j.token = token
	return nil
}

// drive runs the flow over j in the background and releases x when done.
func (rt *Runtime) drive(x *execution, j *journal, simulate bool) {
	st := j.state()
	ctx, cancel := context.WithCancel(rt.ctx)
	r := &run{rt: rt, x: x, j: j, flow: x.flow, ctx: ctx, cancel: cancel, simulate: simulate, root: &scope{ctx: ctx, cancel: cancel}, snapshotAt: -1}
	if rt.cfg.Divergence != DivergenceOff && len(st.Frames) > 0 {
		r.div = newDivergence(st)
	}
	// Register the drive with Close under the lock Close takes: a drive
	// either is seen (halted and waited for) by Close or sees the runtime
	// closed and never starts, so no flow runs after Close returns.
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		cancel()
		rt.release(x)
		rt.cfg.Logger.Warn("loom: runtime closed before the drive started; the execution stays as its log has it", "execution", x.id)
		return
	}
	x.run = r
	rt.wg.Add(1)
	rt.mu.Unlock()
	go func() {
		defer rt.wg.Done()
		o := r.execute(st.Variables.Input)
		cancel()
		if o.err == nil {
			x.final, x.settled = j.state(), true
			if o.status == fold.StatusSuspended && x.final.Sequence != r.snapshotAt {
				rt.saveSnapshot(x.id, x.final)
			}
		} else {
			rt.cfg.Logger.Warn("loom: drive aborted; the execution stays as its log has it", "execution", x.id, "error", o.err)
		}
		j.settle() // nothing this drive queued is written after Close returns
		rt.release(x)
		switch {
		case o.status == fold.StatusContinued:
			rt.startSuccessor(rt.ctx, x.id, x.flow, r.successor)
		case o.status == fold.StatusSuspended && x.final.Variables.SuspendedOn != nil &&
			x.final.Variables.SuspendedOn.On == gateSelect:
			// A message sent while this drive was parking found it busy.
			rt.deliver(rt.ctx, x.id)
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
func (rt *Runtime) authorize(ctx context.Context, action, id, flowID string, exists bool) error {
	if rt.cfg.Authorizer == nil {
		return nil
	}
	err := rt.cfg.Authorizer.Authorize(ctx, AuthzRequest{Action: action, ExecutionID: id, FlowID: flowID, Principal: principalOf(ctx)})
	if err == nil {
		return nil
	}
	denied := &ExecutionDeniedError{ExecutionID: id, Action: action, Reason: err.Error()}
	if exists {
		rt.recordDenial(ctx, id, action, err.Error())
	}
	return denied
}

func marshalJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
