package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Child flows (spec §5.8, orchestration without new syscalls): a flow
// starts child executions as recorded steps and parks until they end.
//
//   - SpawnChild is a step (id "__loom_spawn:<name>") whose effect starts
//     the child under the deterministic id "<parent>/<name>" with
//     EXECUTION_STARTED.parent {executionId, name}: the step is recorded,
//     so replay never starts a second child, and a retried spawn finds the
//     child it already started.
//   - AwaitChild parks the parent on the reserved gate "__loom_child__"
//     with the child's id as the park's correlation key; the answer,
//     EXECUTION_RESUMED {eventType: "__loom_child__", payload: ChildResult}
//     (kernel-stamped), is the kernel's alone: the ingress gate refuses the
//     reserved name to every caller. An await of a child that has already
//     ended writes the same two events back to back, without the park's
//     barrier, lease release and snapshot (answerEndedChild).
//   - The supervisor answers it: when a child ends, its runtime wakes the
//     parent; when a parent parks, its runtime looks at the child (so a
//     child that ended first is seen); each side writes durably, then reads
//     the other, so one of them always finds the pair ready; Recover
//     answers what a crash left between the two. Any node does it: the
//     answer is a transaction on the parent like a message delivery. When
//     both find it ready, the parent's lease decides: a park answering
//     itself takes the lease back first (answerOwnPark), and the
//     other node's transaction needs it too, so only one answers.

// gateChild is the gate a parent parks on while it awaits a child.
const gateChild = reservedPrefix + "child__"

// spawnStepPrefix starts the step id of a spawn.
const spawnStepPrefix = reservedPrefix + "spawn:"

// Child is a spawned child execution, as SpawnChild recorded it.
type Child struct {
	ID   string `json:"childId"`
	Name string `json:"name"`
	Flow string `json:"flow"`
	// OnParentClose is what happens to the child if its parent ends first.
	OnParentClose ClosePolicy `json:"onParentClose,omitempty"`
}

// ClosePolicy says what becomes of a child still running (or parked) when
// its parent ends — completes, fails or is cancelled — without awaiting it.
type ClosePolicy string

const (
	// CloseCancel (the default) cancels the child, and so its own
	// children by their policies: nothing outlives the parent by accident.
	CloseCancel ClosePolicy = "cancel"
	// CloseAbandon lets the child run to its end on its own; its result
	// reaches nobody.
	CloseAbandon ClosePolicy = "abandon"
	// CloseWait keeps the parent from ending before the child: a flow that
	// returns (completes or fails) without having awaited the child waits
	// for it first, then records its own result (the child's outcome does
	// not change it). A parent cancelled from outside ends at once and
	// leaves the child running to its end.
	CloseWait ClosePolicy = "wait"
)

// ChildOption configures SpawnChild.
type ChildOption func(*Child)

// OnParentClose sets the child's ClosePolicy.
func OnParentClose(p ClosePolicy) ChildOption { return func(c *Child) { c.OnParentClose = p } }

// ChildResult is how a child ended, as its parent received it: Status is
// completed, failed or cancelled; Output is the completed child's output,
// Error the failed or cancelled child's recorded error.
type ChildResult struct {
	ChildID string          `json:"childId"`
	Status  fold.Status     `json:"status"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// ChildFailedError is AwaitChild's error for a child that failed or was
// cancelled: the childFailed a parent catches (errors.As). Returned from
// the parent's flow it is recorded with the child's error inside it
// (EXECUTION_FAILED error {message, name: "childFailed", childId, status,
// child}), so a grandparent's ChildFailedError holds the whole path down
// the tree (Path).
type ChildFailedError struct {
	ChildID string
	Status  fold.Status
	// Err is the child's recorded error ({message, ...}).
	Err json.RawMessage
}

func (e *ChildFailedError) Error() string {
	var m struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(e.Err, &m)
	if e.Status == fold.StatusCancelled {
		return "loom: child " + strconv.Quote(e.ChildID) + " was cancelled"
	}
	return "loom: child " + strconv.Quote(e.ChildID) + " failed: " + m.Message
}

// Cause returns the child's own childFailed when the child failed because
// one of its children did (nil otherwise).
func (e *ChildFailedError) Cause() *ChildFailedError {
	var m childFailedPayload
	if json.Unmarshal(e.Err, &m) != nil || m.Name != childFailedName || m.ChildID == "" {
		return nil
	}
	return &ChildFailedError{ChildID: m.ChildID, Status: m.Status, Err: m.Child}
}

// Path returns the ids from this child down to the execution that failed
// first.
func (e *ChildFailedError) Path() []string {
	var out []string
	for c := e; c != nil; c = c.Cause() {
		out = append(out, c.ChildID)
	}
	return out
}

// childFailedName is the recorded error name of a childFailed.
const childFailedName = "childFailed"

type childFailedPayload struct {
	Message string          `json:"message"`
	Name    string          `json:"name"`
	ChildID string          `json:"childId"`
	Status  fold.Status     `json:"status"`
	Child   json.RawMessage `json:"child"`
}

// ChildIDError refuses a spawn whose child id is not usable: too long, or
// taken by an execution that is not this parent's child of that name.
type ChildIDError struct {
	ChildID string
	Reason  string
}

func (e *ChildIDError) Error() string {
	return "loom: child " + strconv.Quote(e.ChildID) + ": " + e.Reason
}

// UnknownChildError refuses an await of a child this execution never
// spawned (no recorded spawn of that name gave that id): awaiting it would
// park forever. Nothing is recorded.
type UnknownChildError struct {
	ChildID string
	Name    string
}

func (e *UnknownChildError) Error() string {
	return "loom: await: this execution spawned no child " + strconv.Quote(e.ChildID) + " (name " + strconv.Quote(e.Name) +
		"): await the Child that SpawnChild returned in this execution"
}

// ChildID is the id SpawnChild gives the child name of parentID.
func ChildID(parentID, name string) string { return parentID + "/" + name }

// SpawnChild starts an execution of flowID with input as a child of this
// execution, under the id ChildID(this id, name), and returns once the
// child's start is durable (the child then runs on its own). The spawn is
// a recorded step: on replay it returns the recorded child and starts
// nothing. The child starts under the parent's principal (tenant
// included); the Authorizer is not asked again. Names are unique per
// parent: spawning a name twice returns the first child. It needs
// Features.Children.
func SpawnChild(c *Context, flowID, name string, input any, opts ...ChildOption) (Child, error) {
	rt := c.drive.rt
	if !rt.cfg.Features.Children {
		return Child{}, &NotConfiguredError{Field: "Features.Children", Need: "SpawnChild"}
	}
	if err := event.ValidateID("child name", name); err != nil {
		return Child{}, err
	}
	flow, ok := rt.flows[flowID]
	if !ok {
		return Child{}, rt.unknownFlow(flowID)
	}
	parentID := c.drive.x.id
	childID := ChildID(parentID, name)
	if err := validateNewID(childID); err != nil {
		return Child{}, &ChildIDError{ChildID: childID, Reason: err.Error() + " (use a shorter name)"}
	}
	in, err := marshalPayload(input)
	if err == nil {
		err = event.ValidateCarried("input", in)
	}
	if err != nil {
		return Child{}, fmt.Errorf("loom: child %q: encoding input: %w", name, err)
	}
	var principal json.RawMessage
	c.state(func(s *fold.State) { principal = s.Variables.Principal })
	child := Child{ID: childID, Name: name, Flow: flowID}
	for _, o := range opts {
		o(&child)
	}
	switch child.OnParentClose {
	case "", CloseCancel:
		child.OnParentClose = ""
	case CloseAbandon, CloseWait:
	default:
		return Child{}, fmt.Errorf("loom: child %q: unknown close policy %q: use loom.CloseCancel, loom.CloseAbandon or loom.CloseWait", name, child.OnParentClose)
	}
	// A first spawn looks at the child's id before it records anything,
	// and that look is the start's too: no second read of the head.
	fresh := false
	if !spawnRecorded(c, child) {
		var err error
		if fresh, err = rt.childIDFree(c.Context(), parentID, child); err != nil {
			return Child{}, err
		}
	}
	raw, err := c.Execute(&Task{
		ID: spawnStepPrefix + name, Kind: "spawn",
		Invoke: func(ctx context.Context, in json.RawMessage) (any, error) {
			err := rt.startChild(ctx, flow, parentID, child, in, principal, fresh)
			fresh = false // a retried attempt looks again
			var taken *ChildIDError
			if err != nil && !errors.As(err, &taken) {
				err = &spawnStartError{err: err}
			}
			return child, err
		},
		Simulate: func(context.Context, json.RawMessage) (any, error) { return child, nil },
	}, json.RawMessage(in))
	var failed *spawnStartError
	if errors.As(err, &failed) {
		// The store failed under the child's start: like a failed append,
		// this ends the drive, and the execution stays as its log has it (a
		// later drive spawns again, and adopts the child if it started).
		// The flow never sees an error its log may not hold.
		c.drive.abort(failed)
	}
	if err != nil {
		return Child{}, err
	}
	var got Child
	if err := unmarshalRecorded(raw, &got); err != nil {
		return Child{}, fmt.Errorf("loom: child %q: the recorded spawn is unreadable: %w", name, err)
	}
	return got, nil
}

// ParentOf returns the parent link a child's start recorded (false for an
// execution that is no child).
func ParentOf(st fold.State) (ParentLink, bool) {
	var p ParentLink
	if st.Variables.Parent == nil || unmarshalRecorded(st.Variables.Parent, &p) != nil || p.ExecutionID == "" {
		return ParentLink{}, false
	}
	return p, true
}

// ChildrenOf returns the children st's execution has spawned, by name.
func ChildrenOf(st fold.State) []Child { return spawned(st) }

// AwaitedChild returns the id of the child a parked execution awaits.
func AwaitedChild(st fold.State) (string, bool) { return awaitsChild(st) }

// ParentLink is EXECUTION_STARTED.parent: whose child an execution is.
type ParentLink = parentLink

// parentLink is EXECUTION_STARTED.parent.
type parentLink struct {
	ExecutionID   string      `json:"executionId"`
	Name          string      `json:"name"`
	OnParentClose ClosePolicy `json:"onParentClose,omitempty"`
}

// spawnRecorded reports whether the log holds child's completed spawn (as
// SpawnChild records it: the step "__loom_spawn:<name>" with the child as
// its output).
func spawnRecorded(c *Context, child Child) bool {
	var ok bool
	c.state(func(s *fold.State) {
		fr, exists := s.Frames[spawnStepPrefix+child.Name]
		var got Child
		ok = exists && fr.Status == fold.FrameCompleted && unmarshalRecorded(fr.Output, &got) == nil && got.ID == child.ID
	})
	return ok
}

// childIDFree refuses a spawn whose child id another execution holds,
// before the spawn is recorded: it is free, or this parent's child of that
// name already (a spawn retried after a crash). fresh says no execution
// holds it yet.
func (rt *Runtime) childIDFree(ctx context.Context, parentID string, child Child) (fresh bool, err error) {
	head, err := store.ReadRange(ctx, rt.cfg.Events, child.ID, 0, 1)
	if err != nil {
		return false, err
	}
	if len(head) == 0 {
		return true, nil
	}
	if startedAsChild(head[0], parentLink{ExecutionID: parentID, Name: child.Name, OnParentClose: child.OnParentClose}) {
		return false, nil
	}
	return false, &ChildIDError{ChildID: child.ID, Reason: "the id is taken by an execution that is not this parent's child " + strconv.Quote(child.Name) + " (spawn it under another name)"}
}

// startedAsChild reports whether start (an execution's first event) started
// it as the child link names.
func startedAsChild(start event.Envelope, link parentLink) bool {
	var p struct {
		Parent parentLink `json:"parent"`
	}
	return start.Type == event.ExecutionStarted && json.Unmarshal(start.Payload, &p) == nil && p.Parent == link
}

// startChild starts child of parentID; a child already started (a spawn
// retried after a crash) is accepted when its start names this parent and
// name.
func (rt *Runtime) startChild(ctx context.Context, flow *Flow, parentID string, child Child, in, principal json.RawMessage, fresh bool) error {
	link := parentLink{ExecutionID: parentID, Name: child.Name, OnParentClose: child.OnParentClose}
	// A spawn retried after a crash finds its child started: it adopts it
	// without claiming the id (a claim would hide the child from a
	// recovery pass running meanwhile). fresh: the spawn's own look found
	// the id free just now; a start that finds it taken since looks again.
	var head []event.Envelope
	if !fresh {
		var err error
		if head, err = store.ReadRange(ctx, rt.cfg.Events, child.ID, 0, 1); err != nil {
			return err
		}
	}
	if len(head) == 0 {
		started := map[string]any{"input": orNull(in), "parent": link}
		if principal != nil {
			started["principal"] = principal
		}
		err := rt.start(ctx, flow, child.ID, started, nil)
		if !errors.Is(err, ErrExecutionExists) {
			return err
		}
		if head, err = store.ReadRange(ctx, rt.cfg.Events, child.ID, 0, 1); err != nil {
			return err
		}
	}
	if len(head) == 1 && startedAsChild(head[0], link) {
		rt.driveAdopted(ctx, child.ID)
		return nil
	}
	return &ChildIDError{ChildID: child.ID, Reason: "the id is taken by an execution that is not this parent's child " + strconv.Quote(child.Name)}
}

// driveAdopted drives a child a retried spawn found started: the process
// that started it may have stopped before driving it, and nothing else
// would until a recovery pass. A child driven elsewhere (live here, or
// leased by another node) is left to its driver. Best effort: Recover
// drives what this misses.
func (rt *Runtime) driveAdopted(ctx context.Context, childID string) {
	if _, err := rt.recoverOne(ctx, childID, false); err != nil && ctx.Err() == nil {
		rt.cfg.Logger.Warn("loom: an adopted child not driven now; Recover drives it", "execution", childID, "error", err)
	}
}

// spawnStartError is a child's start that failed in the store (not a
// refusal): the kernel's own write failed, as a journal append can. The
// spawn aborts the parent's drive instead of handing the flow an error
// its log may never hold.
type spawnStartError struct{ err error }

func (e *spawnStartError) Error() string { return "loom: starting a child: " + e.err.Error() }
func (e *spawnStartError) Unwrap() error { return e.err }

// AwaitChild parks until child ends and returns how it ended; a child that
// failed or was cancelled is a *ChildFailedError as well (the result is
// returned with it). A child that continued as new is awaited to the end
// of its chain. Replay returns the recorded result. An await of a child
// that has already ended costs no durable commit of its own: its park and
// answer become durable with the run's next barrier.
func AwaitChild(c *Context, child Child) (ChildResult, error) {
	if !c.drive.rt.cfg.Features.Children {
		return ChildResult{}, &NotConfiguredError{Field: "Features.Children", Need: "AwaitChild"}
	}
	if child.ID == "" {
		return ChildResult{}, errors.New("loom: AwaitChild: the child has no id; pass what SpawnChild returned")
	}
	c.checkpoint()
	if !spawnRecorded(c, child) {
		return ChildResult{}, &UnknownChildError{ChildID: child.ID, Name: child.Name}
	}
	c.drive.markAwaited(child.ID)
	raw, err := awaitAnswer(c, child)
	if err != nil {
		return ChildResult{}, err
	}
	var res ChildResult
	if err := unmarshalRecorded(raw, &res); err != nil {
		return ChildResult{}, fmt.Errorf("loom: awaiting child %q: the recorded result is unreadable: %w", child.ID, err)
	}
	if res.ChildID != child.ID {
		return ChildResult{}, fmt.Errorf("loom: awaiting child %q: the log answers this await with child %q (the flow's awaits changed order since it ran)", child.ID, res.ChildID)
	}
	if res.Status != fold.StatusCompleted {
		return res, &ChildFailedError{ChildID: res.ChildID, Status: res.Status, Err: res.Error}
	}
	return res, nil
}

// awaitAnswer returns the recorded answer to this await of child, or
// records one: a recorded gate answer this run has not served yet (replay)
// is served as it always was; at the log's end, a child that has already
// ended is answered in place (answerEndedChild), and otherwise the await
// parks until the child's end answers it.
func awaitAnswer(c *Context, child Child) (json.RawMessage, error) {
	if answer, ok := c.servePositional(gateChild); ok {
		return answer, nil
	}
	p := suspendPayload{On: gateChild, CorrelationKey: child.ID}
	c.answerEndedChild(p)
	return c.gateWait(p)
}

// answerEndedChild records the park p and its answer back to back when
// p's child has already ended, as the park would have: EXECUTION_SUSPENDED
// {on: "__loom_child__", correlationKey: child id}, then the kernel-stamped
// EXECUTION_RESUMED with the child's result. The log, and so the state and
// every replay, is the same as when the park finds its child ended, but
// the park's costs go: no barrier before the answer, no lease release, no
// snapshot, no sticky registration (the drive answers itself and goes on,
// holding its lease). Both events are durable by the drive's next barrier;
// a crash before that loses them, and the re-run answers the await again
// from the child's log, which no longer changes. Should only the park be
// durable, the log is that of a park whose child ended, which Recover and
// the child's own wake-up answer. Only the root goroutine of a live,
// unsimulated run does it (a Parallel branch, a simulation or a replay
// check parks as before).
func (c *Context) answerEndedChild(p suspendPayload) {
	r := c.drive
	if c.branch != "" || r.simulate || r.verifying() {
		return
	}
	res, ended, err := r.rt.childResult(c.Context(), p.CorrelationKey)
	if err != nil || !ended {
		return // the park looks at the child again, and Recover answers what it misses
	}
	r.mu.Lock()
	live := !r.parked && !r.cancelled && r.abortErr == nil
	r.mu.Unlock()
	if !live {
		return // the park unwinds the run
	}
	// While only the park is durable, another node that sees the child's
	// end could answer it too and fence this drive: the drive's live lease
	// refuses that node's take-over (a park released the lease, a fresh
	// start has none until its first heartbeat).
	if err := r.rt.holdDriveLease(r.ctx, r.x.id); err != nil {
		return // the park releases it and lets any node answer
	}
	r.commit(event.ExecutionSuspended, p, nil)
	r.commit(event.ExecutionResumed, map[string]any{"eventType": gateChild, "payload": res}, kernelStamp())
}

// holdDriveLease makes sure this node holds the lease of id, which it
// drives: a lease it already holds is kept as it is (the heartbeat renews
// it), a missing one is acquired; another node's live lease refuses.
func (rt *Runtime) holdDriveLease(ctx context.Context, id string) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	rt.mu.Lock()
	_, held := rt.leases[id]
	rt.mu.Unlock()
	if held {
		return nil
	}
	return rt.acquireLease(ctx, id)
}

// AwaitChildTyped is AwaitChild with the completed child's output decoded
// into T.
func AwaitChildTyped[T any](c *Context, child Child) (T, error) {
	var v T
	res, err := AwaitChild(c, child)
	if err != nil {
		return v, err
	}
	if err := decodeInto(res.Output, &v); err != nil {
		return v, fmt.Errorf("loom: child %q: decoding output: %w", child.ID, err)
	}
	return v, nil
}

// AwaitChildren waits for every child (wait-all) and returns their
// results in the order given; a failed child does not stop the wait, and
// its result says so (no error is returned for it).
func AwaitChildren(c *Context, children []Child) ([]ChildResult, error) {
	out := make([]ChildResult, len(children))
	for i, ch := range children {
		res, err := AwaitChild(c, ch)
		var cf *ChildFailedError
		if err != nil && !errors.As(err, &cf) {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// AwaitAll waits for every child and returns their results when all
// completed; the first failed child (in the order given) fails it with its
// *ChildFailedError, after every child has ended.
func AwaitAll(c *Context, children []Child) ([]ChildResult, error) {
	results, err := AwaitChildren(c, children)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if r.Status != fold.StatusCompleted {
			return results, &ChildFailedError{ChildID: r.ChildID, Status: r.Status, Err: r.Error}
		}
	}
	return results, nil
}

// awaitsChild reports the child st is parked waiting for.
func awaitsChild(st fold.State) (string, bool) {
	s := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || s == nil || s.On != gateChild || s.CorrelationKey == "" {
		return "", false
	}
	return s.CorrelationKey, true
}

// childResult reads how childID ended, following a continue-as-new chain
// to its end; ok is false while it has not ended.
func (rt *Runtime) childResult(ctx context.Context, childID string) (ChildResult, bool, error) {
	id := childID
	for hops := 0; ; hops++ {
		l, err := rt.load(ctx, id)
		if errors.Is(err, ErrExecutionNotFound) {
			return ChildResult{}, false, nil // not started yet: its spawn is not durable
		}
		if err != nil {
			return ChildResult{}, false, err
		}
		st := l.state
		switch {
		case st.Status == fold.StatusContinued && st.Variables.ContinuedTo != "" && hops < maxChainHops:
			id = st.Variables.ContinuedTo
			continue
		case st.Status == fold.StatusCompleted:
			return ChildResult{ChildID: childID, Status: st.Status, Output: orNull(st.Variables.Output)}, true, nil
		case st.Status == fold.StatusFailed:
			return ChildResult{ChildID: childID, Status: st.Status, Error: orNull(st.Variables.Error)}, true, nil
		case st.Status == fold.StatusCancelled:
			return ChildResult{ChildID: childID, Status: st.Status, Error: marshalJSON(map[string]string{"message": "the child was cancelled"})}, true, nil
		}
		return ChildResult{}, false, nil
	}
}

// childAnswer is the answer of the child park of st once its child has
// ended (nil before).
func (rt *Runtime) childAnswer(ctx context.Context, _ string, st fold.State) ([]pendingEvent, error) {
	childID, ok := awaitsChild(st)
	if !ok {
		return nil, nil
	}
	res, ended, err := rt.childResult(ctx, childID)
	if err != nil || !ended {
		return nil, err
	}
	return []pendingEvent{{typ: event.ExecutionResumed, payload: map[string]any{"eventType": gateChild, "payload": res}, meta: kernelStamp()}}, nil
}

// deliverChild answers id's child park if its child has ended: through a
// sticky park's own journal, or in a transaction. A sticky park that can
// no longer answer itself (parkLost) is evicted: its drive unwinds,
// and its end delivers again through a transaction. Best effort: Recover
// answers what this misses.
func (rt *Runtime) deliverChild(ctx context.Context, id string) {
	if rt.deliverInPlace(ctx, id, rt.childAnswer) {
		return
	}
	err := rt.answerTx(ctx, id, "child", rt.childAnswer)
	if err != nil && !errors.Is(err, errNothingToAnswer) && !errors.Is(err, ErrExecutionNotFound) && !isRefusal(err) && ctx.Err() == nil {
		var busy *ExecutionBusyError
		if !errors.As(err, &busy) {
			rt.cfg.Logger.Warn("loom: child result not delivered now; Recover delivers it", "execution", id, "error", err)
		}
	}
}

// ended is what the supervisor does when an execution ends: wake its
// parent, and close the children it left running by their policies.
func (rt *Runtime) ended(ctx context.Context, id string, st fold.State) {
	if !rt.cfg.Features.Children || !st.Status.Terminal() {
		return
	}
	rt.wakeParent(ctx, st)
	if st.Status != fold.StatusContinued {
		rt.closeChildren(ctx, id, st) // a continued execution goes on in its successor
	}
}

// closeChildren cancels the children of an ended parent whose policy is
// CloseCancel and that have not ended. A child whose end the parent's log
// received (an answered await) is passed over without a look; one that
// ended meanwhile is left as it is; a failure is logged and left to
// Recover, which cancels a child whose parent has ended.
func (rt *Runtime) closeChildren(ctx context.Context, parentID string, st fold.State) {
	ended := receivedChildren(st)
	for _, ch := range spawned(st) {
		if ch.OnParentClose == CloseAbandon || ch.OnParentClose == CloseWait || ended[ch.ID] {
			continue
		}
		err := rt.Cancel(ctx, ch.ID, "its parent "+parentID+" ended ("+string(st.Status)+")")
		var rr *ResumeRefusedError
		if err != nil && !(errors.As(err, &rr) && rr.Reason == RefusedTerminal) && !errors.Is(err, ErrExecutionNotFound) && ctx.Err() == nil {
			rt.cfg.Logger.Warn("loom: child not cancelled with its parent; Recover cancels it", "execution", ch.ID, "parent", parentID, "error", err)
		}
	}
}

// receivedChildren is the set of children whose end st's log holds: the
// ids of its answered child awaits.
func receivedChildren(st fold.State) map[string]bool {
	ids := map[string]bool{}
	for _, e := range st.Variables.ResumePayloads {
		var res struct {
			ChildID string `json:"childId"`
		}
		if e.EventType == gateChild && json.Unmarshal(e.Payload, &res) == nil && res.ChildID != "" {
			ids[res.ChildID] = true
		}
	}
	return ids
}

// spawned lists the children st's completed spawns recorded, by step id.
func spawned(st fold.State) []Child {
	var out []Child
	for _, id := range slices.Sorted(maps.Keys(st.Frames)) {
		fr := st.Frames[id]
		if !strings.HasPrefix(id, spawnStepPrefix) || fr.Status != fold.FrameCompleted {
			continue
		}
		var ch Child
		if unmarshalRecorded(fr.Output, &ch) == nil && ch.ID != "" {
			out = append(out, ch)
		}
	}
	return out
}

// orphaned reports whether st is a child whose parent has ended and whose
// policy cancels it (Recover then cancels it: its parent's close was
// interrupted).
func (rt *Runtime) orphaned(ctx context.Context, st fold.State) bool {
	var p parentLink
	if st.Variables.Parent == nil || unmarshalRecorded(st.Variables.Parent, &p) != nil || p.ExecutionID == "" || p.OnParentClose == CloseAbandon || p.OnParentClose == CloseWait {
		return false
	}
	l, err := rt.load(ctx, p.ExecutionID)
	return err == nil && l.state.Status.Terminal()
}

// wakeParent delivers an ended execution's result to its parent, if it has
// one (a continued child's parent is its chain's first execution's).
func (rt *Runtime) wakeParent(ctx context.Context, st fold.State) {
	raw := st.Variables.Parent
	if raw == nil && st.Variables.Chain != nil {
		var link chainLink
		if unmarshalRecorded(st.Variables.Chain, &link) == nil && link.ID != "" {
			if root, err := rt.load(ctx, link.ID); err == nil {
				raw = root.state.Variables.Parent
			}
		}
	}
	var p parentLink
	if raw == nil || unmarshalRecorded(raw, &p) != nil || p.ExecutionID == "" {
		return
	}
	rt.deliverChild(ctx, p.ExecutionID)
}

// childErrorPayload is the recorded error of a flow that returned a
// childFailed: the child's error travels inside it.
func childErrorPayload(cf *ChildFailedError, message string) map[string]any {
	return map[string]any{"message": message, "name": childFailedName, "childId": cf.ChildID,
		"status": cf.Status, "child": orNull(cf.Err)}
}

// markAwaited notes that this drive's flow awaited childID (so its end
// need not wait for it: awaitWaitChildren).
func (r *drive) markAwaited(childID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.awaited == nil {
		r.awaited = map[string]bool{}
	}
	r.awaited[childID] = true
}

// awaitWaitChildren awaits, once the flow has returned, each child of
// policy CloseWait it spawned and did not await, in spawn-step order: the
// same awaits on every replay, since a replay runs the same flow to the
// same return. A child's failure is its own; any other error fails the
// flow.
func (r *drive) awaitWaitChildren(c *Context) error {
	if !r.rt.cfg.Features.Children {
		return nil
	}
	var kids []Child
	c.state(func(s *fold.State) { kids = spawned(*s) })
	for _, ch := range kids {
		r.mu.Lock()
		done := r.awaited[ch.ID]
		r.mu.Unlock()
		if ch.OnParentClose != CloseWait || done {
			continue
		}
		var cf *ChildFailedError
		if _, err := AwaitChild(c, ch); err != nil && !errors.As(err, &cf) {
			return err
		}
	}
	return nil
}
