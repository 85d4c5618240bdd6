package dst

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Reserved gates the simulator tells apart (the kernel's own names, as
// docs/events.md lists them).
const (
	reservedPrefix = "__loom_"
	gateSleep      = "__loom_sleep__"
	gateSelect     = "__loom_select__"
	gateChild      = "__loom_child__"
)

// execView is one execution as the durable log has it now.
type execView struct {
	ID    string
	Flow  string // the flow its latest event names
	State fold.State
	Len   int64
}

// running reports whether the log leaves it running (or not started).
func (x execView) running() bool {
	return x.State.Status == fold.StatusRunning || x.State.Status == fold.StatusPending
}

// parkedOn returns the gate x is parked on, or "".
func (x execView) parkedOn() string {
	if x.State.Status != fold.StatusSuspended || x.State.Variables.SuspendedOn == nil {
		return ""
	}
	return x.State.Variables.SuspendedOn.On
}

// userGate reports whether x is parked on a gate a caller answers.
func (x execView) userGate() bool {
	g := x.parkedOn()
	return g != "" && !strings.HasPrefix(g, reservedPrefix)
}

// wait is one entry of a Select park's waits (EXECUTION_SUSPENDED.waits).
type wait struct {
	WaitID string `json:"waitId"`
	Kind   string `json:"kind"`
	On     string `json:"on,omitempty"`
	Topic  string `json:"topic,omitempty"`
	WakeAt *int64 `json:"wakeAt,omitempty"`
}

// waits decodes the waits of x's Select park (none for another park).
func (x execView) waits() []wait {
	if x.parkedOn() != gateSelect {
		return nil
	}
	var ws []wait
	if json.Unmarshal(x.State.Variables.Waits, &ws) != nil {
		return nil
	}
	return ws
}

// world is every execution of the durable log, in id order (inbox streams
// left out), read straight from the durable store: the simulator's oracle,
// which no process's fault reaches.
type world struct {
	execs []execView
	byID  map[string]int
}

func (w world) get(id string) (execView, bool) {
	i, ok := w.byID[id]
	if !ok {
		return execView{}, false
	}
	return w.execs[i], true
}

// ids returns the executions' ids, in order.
func (w world) ids() []string {
	out := make([]string, len(w.execs))
	for i, x := range w.execs {
		out[i] = x.ID
	}
	return out
}

// look reads the world.
func (r *run) look() (world, error) {
	ctx, cancel := r.callCtx()
	defer cancel()
	w := world{byID: map[string]int{}}
	after := ""
	for {
		page, err := r.events.ListExecutions(ctx, after, 256)
		if err != nil {
			return w, err
		}
		for _, info := range page.Executions {
			if store.IsInboxStream(info.ExecutionID) {
				continue
			}
			evs, err := r.events.ReadFrom(ctx, info.ExecutionID, 0)
			if err != nil {
				return w, err
			}
			if len(evs) == 0 {
				continue
			}
			w.byID[info.ExecutionID] = len(w.execs)
			w.execs = append(w.execs, execView{ID: info.ExecutionID, Flow: evs[len(evs)-1].WorkflowID,
				State: fold.Fold(evs), Len: int64(len(evs))})
		}
		if page.Next == "" {
			return w, nil
		}
		after = page.Next
	}
}

// logs reads every stored log, inbox streams included, in id order.
func (r *run) logs() ([]string, map[string][]event.Envelope, error) {
	ctx, cancel := r.callCtx()
	defer cancel()
	var ids []string
	out := map[string][]event.Envelope{}
	after := ""
	for {
		page, err := r.events.ListExecutions(ctx, after, 256)
		if err != nil {
			return nil, nil, err
		}
		for _, info := range page.Executions {
			evs, err := r.events.ReadFrom(ctx, info.ExecutionID, 0)
			if err != nil {
				return nil, nil, err
			}
			ids = append(ids, info.ExecutionID)
			out[info.ExecutionID] = evs
		}
		if page.Next == "" {
			return ids, out, nil
		}
		after = page.Next
	}
}

// lenOf is the length of id's durable log (0 on a read error).
func (r *run) lenOf(id string) int64 {
	ctx, cancel := r.callCtx()
	defer cancel()
	evs, err := r.events.ReadFrom(ctx, id, 0)
	if err != nil {
		return 0
	}
	return int64(len(evs))
}

// callCtx bounds one call into a store or a runtime: the safety net only.
func (r *run) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.sim.waitTimeout())
}
