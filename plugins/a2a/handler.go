package a2a

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"iter"
	"strings"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/loom-kernel/loom"
)

// TaskPrefix starts every task id (and execution id) a Server mints.
const TaskPrefix = "a2a-"

// MaxContextIDBytes bounds a client-chosen contextId.
const MaxContextIDBytes = 256

// taskHandler serves one published agent's JSON-RPC methods.
type taskHandler struct {
	s     *Server
	agent PublishedAgent
}

var _ a2asrv.RequestHandler = (*taskHandler)(nil)

// SendMessage starts a task (a message without a taskId) or answers the
// gate of an input-required task, then waits for it to settle.
func (h *taskHandler) SendMessage(ctx context.Context, req *protocol.SendMessageRequest) (protocol.SendMessageResult, error) {
	caller, err := h.s.admit(ctx, h.agent.Name)
	if err != nil {
		return nil, err
	}
	if req == nil || req.Message == nil {
		return nil, protocol.NewError(protocol.ErrInvalidParams, "the request has no message")
	}
	payload, err := payloadOf(req.Message)
	if err != nil {
		return nil, err
	}
	if req.Message.TaskID == "" {
		return h.start(ctx, caller, req.Message.ContextID, payload)
	}
	return h.answer(ctx, caller, req.Message, payload)
}

// start begins an execution of the agent's flow for caller.
func (h *taskHandler) start(ctx context.Context, caller Caller, contextID string, payload json.RawMessage) (*protocol.Task, error) {
	if len(contextID) > MaxContextIDBytes {
		return nil, protocol.NewError(protocol.ErrInvalidParams, "the contextId is too long")
	}
	if contextID == "" {
		contextID = protocol.NewContextID()
	}
	id := TaskPrefix + randomHex()
	rec := taskRecord{ID: caller.ID, Tenant: caller.Tenant, A2A: &taskBinding{Agent: h.agent.Name, ContextID: contextID}}
	pctx := loom.WithPrincipal(ctx, rec)
	if _, err := h.s.rt.Start(pctx, h.agent.FlowID, payload, loom.WithExecutionID(id)); err != nil {
		var typeErr *loom.InputTypeError
		var denied *loom.ExecutionDeniedError
		switch {
		case errors.As(err, &typeErr):
			return nil, protocol.NewError(protocol.ErrInvalidParams, "the message does not fit the agent's input")
		case errors.As(err, &denied):
			return nil, protocol.NewError(protocol.ErrUnauthorized, "permission denied")
		}
		return nil, protocol.NewError(protocol.ErrInternalError, "the task could not be started")
	}
	return h.settle(pctx, id, rec)
}

// answer resumes the gate caller's task is parked on with payload.
func (h *taskHandler) answer(ctx context.Context, caller Caller, msg *protocol.Message, payload json.RawMessage) (*protocol.Task, error) {
	id := string(msg.TaskID)
	st, rec, err := h.owned(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	if msg.ContextID != "" && msg.ContextID != rec.A2A.ContextID {
		return nil, protocol.NewError(protocol.ErrInvalidParams, "the contextId is not the task's")
	}
	gate := namedGate(st, h.s.schemas[h.agent.FlowID])
	if gate == nil {
		return nil, protocol.NewError(protocol.ErrUnsupportedOperation, "the task is not waiting for input")
	}
	pctx := loom.WithPrincipal(ctx, loom.Principal{ID: caller.ID, Tenant: caller.Tenant})
	err = h.s.rt.Resume(pctx, id, loom.ResumeEvent{EventType: gate.On, Payload: payload})
	var invalid *loom.ResumePayloadValidationError
	var refused *loom.ResumeRefusedError
	var denied *loom.ExecutionDeniedError
	switch {
	case err == nil:
	case errors.As(err, &invalid):
		e := protocol.NewError(protocol.ErrInvalidParams, "the input does not satisfy the task's input schema")
		if len(invalid.Violations) > 0 {
			e = e.WithDetails(map[string]any{"violations": violations(invalid.Violations)})
		}
		return nil, e
	case errors.As(err, &refused):
		return nil, protocol.NewError(protocol.ErrUnsupportedOperation, "the task is not waiting for this input: "+string(refused.Reason))
	case errors.As(err, &denied):
		return nil, protocol.NewError(protocol.ErrUnauthorized, "permission denied")
	default:
		return nil, protocol.NewError(protocol.ErrInternalError, "the input could not be delivered")
	}
	return h.settle(pctx, id, rec)
}

// GetTask reads caller's task.
func (h *taskHandler) GetTask(ctx context.Context, req *protocol.GetTaskRequest) (*protocol.Task, error) {
	caller, err := h.s.admit(ctx, h.agent.Name)
	if err != nil {
		return nil, err
	}
	st, rec, err := h.owned(ctx, caller, string(req.ID))
	if err != nil {
		return nil, err
	}
	return taskOf(string(req.ID), rec, st, h.s.schemas[h.agent.FlowID]), nil
}

// CancelTask cancels caller's task.
func (h *taskHandler) CancelTask(ctx context.Context, req *protocol.CancelTaskRequest) (*protocol.Task, error) {
	caller, err := h.s.admit(ctx, h.agent.Name)
	if err != nil {
		return nil, err
	}
	id := string(req.ID)
	st, rec, err := h.owned(ctx, caller, id)
	if err != nil {
		return nil, err
	}
	if st.Status.Terminal() {
		return nil, protocol.NewError(protocol.ErrTaskNotCancelable, "the task has ended")
	}
	pctx := loom.WithPrincipal(ctx, loom.Principal{ID: caller.ID, Tenant: caller.Tenant})
	if err := h.s.rt.Cancel(pctx, id, "canceled by the A2A caller"); err != nil {
		var refused *loom.ResumeRefusedError
		if errors.As(err, &refused) && refused.Reason == loom.RefusedTerminal {
			return nil, protocol.NewError(protocol.ErrTaskNotCancelable, "the task has ended")
		}
		return nil, protocol.NewError(protocol.ErrInternalError, "the task could not be canceled")
	}
	if st, err = h.s.rt.LoadState(pctx, id); err != nil {
		return nil, protocol.NewError(protocol.ErrInternalError, "the task could not be read")
	}
	return taskOf(id, rec, st, h.s.schemas[h.agent.FlowID]), nil
}

// ListTasks is not supported: a caller keeps its task ids.
func (h *taskHandler) ListTasks(ctx context.Context, _ *protocol.ListTasksRequest) (*protocol.ListTasksResponse, error) {
	if _, err := h.s.admit(ctx, h.agent.Name); err != nil {
		return nil, err
	}
	return nil, protocol.ErrUnsupportedOperation
}

// SubscribeToTask is not supported (the card advertises no streaming).
func (h *taskHandler) SubscribeToTask(context.Context, *protocol.SubscribeToTaskRequest) iter.Seq2[protocol.Event, error] {
	return unsupportedStream
}

// SendStreamingMessage is not supported (the card advertises no streaming).
func (h *taskHandler) SendStreamingMessage(context.Context, *protocol.SendMessageRequest) iter.Seq2[protocol.Event, error] {
	return unsupportedStream
}

func unsupportedStream(yield func(protocol.Event, error) bool) {
	yield(nil, protocol.ErrUnsupportedOperation)
}

// GetTaskPushConfig is not supported.
func (h *taskHandler) GetTaskPushConfig(context.Context, *protocol.GetTaskPushConfigRequest) (*protocol.PushConfig, error) {
	return nil, protocol.ErrPushNotificationNotSupported
}

// ListTaskPushConfigs is not supported.
func (h *taskHandler) ListTaskPushConfigs(context.Context, *protocol.ListTaskPushConfigRequest) (*protocol.ListTaskPushConfigResponse, error) {
	return nil, protocol.ErrPushNotificationNotSupported
}

// CreateTaskPushConfig is not supported.
func (h *taskHandler) CreateTaskPushConfig(context.Context, *protocol.PushConfig) (*protocol.PushConfig, error) {
	return nil, protocol.ErrPushNotificationNotSupported
}

// DeleteTaskPushConfig is not supported.
func (h *taskHandler) DeleteTaskPushConfig(context.Context, *protocol.DeleteTaskPushConfigRequest) error {
	return protocol.ErrPushNotificationNotSupported
}

// GetExtendedAgentCard is not supported: the public card is the card.
func (h *taskHandler) GetExtendedAgentCard(context.Context, *protocol.GetExtendedAgentCardRequest) (*protocol.AgentCard, error) {
	return nil, protocol.ErrExtendedCardNotConfigured
}

// payloadOf is what a message carries into the flow: its first data part,
// else its text parts joined, as a JSON string.
func payloadOf(m *protocol.Message) (json.RawMessage, error) {
	var texts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case protocol.Data:
			raw, err := json.Marshal(c.Value)
			if err != nil {
				return nil, protocol.NewError(protocol.ErrInvalidParams, "the data part has no JSON form")
			}
			return raw, nil
		case protocol.Text:
			texts = append(texts, string(c))
		}
	}
	if len(texts) == 0 {
		return nil, protocol.NewError(protocol.ErrInvalidParams, "the message has no text or data part")
	}
	raw, err := json.Marshal(strings.Join(texts, "\n"))
	if err != nil {
		return nil, protocol.NewError(protocol.ErrInvalidParams, "the message's text has no JSON form")
	}
	return raw, nil
}

// violations are a refused payload's schema violations, for the error's
// details (they name pointers and keywords, never values).
func violations(vs []loom.SchemaViolation) []any {
	out := make([]any, 0, len(vs))
	for _, v := range vs {
		out = append(out, map[string]any{"pointer": v.Pointer, "keyword": v.Keyword, "message": v.Message})
	}
	return out
}

// randomHex is 128 random bits, hex-encoded.
func randomHex() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("a2a: no randomness for task ids: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
