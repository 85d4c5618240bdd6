package a2a

import (
	"context"
	"encoding/json"
	"errors"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

// taskRecord is the principal a Server records on a task's
// EXECUTION_STARTED: the caller (id, tenant — what grants and authorizers
// see) and the task's binding to the agent and its context. Scoping
// compares it with each later caller.
type taskRecord struct {
	ID     string       `json:"id"`
	Tenant string       `json:"tenant,omitempty"`
	A2A    *taskBinding `json:"a2a"`
}

// taskBinding ties an execution to the published agent that started it.
type taskBinding struct {
	Agent     string `json:"agent"`
	ContextID string `json:"contextId"`
}

// notFound is the answer for a task that does not exist and for one of
// another caller alike: the two are indistinguishable.
func notFound() error { return protocol.NewError(protocol.ErrTaskNotFound, "task not found") }

// MaxTaskIDBytes bounds a task id a Server looks up.
const MaxTaskIDBytes = 128

// owned loads task id for caller: the execution must exist and record
// caller as its principal, bound to this agent. Anything else — a missing
// execution, another caller's, another agent's, one not started by a
// Server, an id of the wrong shape — is notFound, and nothing is appended.
func (h *taskHandler) owned(ctx context.Context, caller Caller, id string) (fold.State, taskRecord, error) {
	if len(id) <= len(TaskPrefix) || len(id) > MaxTaskIDBytes || id[:len(TaskPrefix)] != TaskPrefix {
		return fold.State{}, taskRecord{}, notFound()
	}
	pctx := loom.WithPrincipal(ctx, loom.Principal{ID: caller.ID, Tenant: caller.Tenant})
	st, err := h.s.rt.LoadState(pctx, id)
	if err != nil {
		var denied *loom.ExecutionDeniedError
		if errors.Is(err, loom.ErrExecutionNotFound) || errors.As(err, &denied) {
			return fold.State{}, taskRecord{}, notFound()
		}
		return fold.State{}, taskRecord{}, protocol.NewError(protocol.ErrInternalError, "the task could not be read")
	}
	var rec taskRecord
	if json.Unmarshal(st.Variables.Principal, &rec) != nil || rec.A2A == nil ||
		rec.ID != caller.ID || rec.Tenant != caller.Tenant || rec.A2A.Agent != h.agent.Name {
		return fold.State{}, taskRecord{}, notFound()
	}
	return st, rec, nil
}

// settle waits, at most SettleTimeout, for task id to park or end, and
// returns it as it then is.
func (h *taskHandler) settle(ctx context.Context, id string, rec taskRecord) (*protocol.Task, error) {
	wctx, cancel := context.WithTimeout(ctx, h.s.opts.SettleTimeout)
	defer cancel()
	st, err := h.s.rt.WaitForSettled(wctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if st, err = h.s.rt.LoadState(ctx, id); err != nil {
			return nil, protocol.NewError(protocol.ErrInternalError, "the task could not be read")
		}
	}
	return taskOf(id, rec, st, h.s.schemas[h.agent.FlowID]), nil
}

// namedGate is the flow's gate st is parked on, nil when it is not parked
// on one a caller may answer (running, ended, or parked on a timer, a
// message, a select or a kernel gate).
func namedGate(st fold.State, schemas map[string]json.RawMessage) *wire.Gate {
	g := wire.ParkedGate(st, schemas)
	if g == nil || g.Kind != wire.GateNamed {
		return nil
	}
	return g
}

// taskOf maps an execution's state to its task: pending and running are
// working, a park on a named gate is input-required (the gate's name and
// schema in the status message's metadata, MetaGate and MetaSchema), any
// other park is working, completed carries the output as the artifact
// "output" (a JSON string as text, anything else as data), failed and
// cancelled are failed and canceled. A continued execution is reported
// completed with no output: its successor is not a task of the caller.
func taskOf(id string, rec taskRecord, st fold.State, schemas map[string]json.RawMessage) *protocol.Task {
	t := &protocol.Task{ID: protocol.TaskID(id), ContextID: rec.A2A.ContextID, Status: protocol.TaskStatus{State: protocol.TaskStateWorking}}
	agentSays := func(text string) *protocol.Message {
		m := protocol.NewMessageForTask(protocol.MessageRoleAgent, t, protocol.NewTextPart(text))
		m.ID = id + "/status"
		return m
	}
	switch st.Status {
	case fold.StatusSuspended:
		g := namedGate(st, schemas)
		if g == nil {
			break
		}
		t.Status.State = protocol.TaskStateInputRequired
		m := agentSays("input required: " + g.On)
		m.SetMeta(MetaGate, g.On)
		if len(g.Schema) > 0 {
			var schema any
			if json.Unmarshal(g.Schema, &schema) == nil {
				m.SetMeta(MetaSchema, schema)
			}
		}
		t.Status.Message = m
	case fold.StatusCompleted:
		t.Status.State = protocol.TaskStateCompleted
		if out := st.Variables.Output; len(out) > 0 && string(out) != "null" {
			t.Artifacts = []*protocol.Artifact{outputArtifact(out)}
		}
	case fold.StatusContinued:
		t.Status.State = protocol.TaskStateCompleted
	case fold.StatusFailed:
		t.Status.State = protocol.TaskStateFailed
		t.Status.Message = agentSays("the flow failed")
	case fold.StatusCancelled:
		t.Status.State = protocol.TaskStateCanceled
	}
	return t
}

// outputArtifact is a completed flow's output as an artifact.
func outputArtifact(out json.RawMessage) *protocol.Artifact {
	part := protocol.NewTextPart("")
	var s string
	if json.Unmarshal(out, &s) == nil {
		part = protocol.NewTextPart(s)
	} else {
		var v any
		if json.Unmarshal(out, &v) == nil {
			part = protocol.NewDataPart(v)
		}
	}
	return &protocol.Artifact{ID: "output", Name: "output", Parts: protocol.ContentParts{part}}
}
