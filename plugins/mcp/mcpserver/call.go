package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is the structured content of every tool answer: where the
// execution stands once it settled (or why nothing was started).
type Outcome struct {
	// ExecutionID is the execution the call started or resumed; empty when
	// the call was refused before one existed.
	ExecutionID string `json:"executionId,omitempty"`
	// Status is the execution's status (completed, suspended, failed,
	// cancelled, continued); "refused" for a call nothing came of; or
	// "unsettled" when the wait for a started or resumed execution was cut
	// short (the request ended, the runtime closed): it runs on.
	Status string `json:"status"`
	// Output is a completed execution's output.
	Output json.RawMessage `json:"output,omitempty"`
	// Gate is the park of a suspended execution, with the JSON Schema its
	// answer must satisfy: call resume with it.
	Gate *wire.Gate `json:"gate,omitempty"`
	// ContinuedTo is the successor of a continued execution.
	ContinuedTo string `json:"continuedTo,omitempty"`
	// Error says why the execution failed or the call was refused.
	Error string `json:"error,omitempty"`
	// Refusal is the ingress gate's reason (loom.RefusalReason) for a
	// refused resume, or "invalid-payload" for a payload its schema refused.
	Refusal string `json:"refusal,omitempty"`
	// Violations say where the payload fails the gate's schema.
	Violations []loom.SchemaViolation `json:"violations,omitempty"`
}

// The Outcome statuses that are not an execution's.
const (
	statusRefused   = "refused"
	statusUnsettled = "unsettled"
)

// callFlow serves a call of flow tool t by c: authorize, start, settle.
func (s *Server) callFlow(ctx context.Context, c Caller, t *exposedTool, args json.RawMessage) *sdk.CallToolResult {
	if err := s.authorize(ctx, c, t.Name); err != nil {
		return refused("", err)
	}
	input, err := objectArguments(t.Name, args)
	if err != nil {
		return refused("", err)
	}
	ctx = loom.WithPrincipal(ctx, c.principal())
	id, err := s.rt.Start(ctx, t.FlowID, input)
	if err != nil {
		return refused("", err)
	}
	return s.settle(ctx, id, t)
}

// resumeArguments are the resume tool's arguments.
type resumeArguments struct {
	ExecutionID string          `json:"executionId"`
	Gate        string          `json:"gate"`
	Payload     json.RawMessage `json:"payload"`
}

// callResume serves a call of the resume tool by c: authorize, check that
// c started the execution and that it runs an exposed flow c may call,
// resume it through the ingress gate, settle.
func (s *Server) callResume(ctx context.Context, c Caller, args json.RawMessage) *sdk.CallToolResult {
	if err := s.authorize(ctx, c, ResumeToolName); err != nil {
		return refused("", err)
	}
	input, err := objectArguments(ResumeToolName, args)
	if err != nil {
		return refused("", err)
	}
	var a resumeArguments
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return refused("", &ArgumentsError{Tool: ResumeToolName, Detail: "want {executionId, gate, payload}"})
	}
	if a.ExecutionID == "" || a.Gate == "" {
		return refused("", &ArgumentsError{Tool: ResumeToolName, Detail: "executionId and gate are required"})
	}
	ctx = loom.WithPrincipal(ctx, c.principal())
	t, err := s.ownedBy(ctx, c, a.ExecutionID)
	if err != nil {
		return refused(a.ExecutionID, err)
	}
	ev := loom.ResumeEvent{EventType: a.Gate, Payload: a.Payload}
	if err := s.rt.Resume(ctx, a.ExecutionID, ev); err != nil {
		return refused(a.ExecutionID, err)
	}
	return s.settle(ctx, a.ExecutionID, t)
}

// ownedBy returns the exposed tool whose flow execution id runs, when c
// started it and may call that tool; anything else — no such execution,
// another caller's, a flow not exposed to c — is ErrExecutionNotFound, so
// a caller learns nothing of executions not its own.
func (s *Server) ownedBy(ctx context.Context, c Caller, id string) (*exposedTool, error) {
	st, err := s.rt.LoadState(ctx, id)
	if errors.Is(err, loom.ErrExecutionNotFound) {
		return nil, ErrExecutionNotFound
	}
	if err != nil {
		return nil, err
	}
	var p loom.Principal
	if json.Unmarshal(st.Variables.Principal, &p) != nil || p.ID != c.ID || p.Tenant != c.Tenant {
		return nil, ErrExecutionNotFound
	}
	flow, err := s.rt.FlowOf(ctx, id)
	if err != nil {
		return nil, err
	}
	t := s.byFlow[flow]
	if t == nil || !t.visibleTo(c) {
		return nil, ErrExecutionNotFound
	}
	return t, nil
}

// settle waits for execution id (of t's flow) to park or end and answers
// where it stands.
func (s *Server) settle(ctx context.Context, id string, t *exposedTool) *sdk.CallToolResult {
	st, err := s.rt.WaitForSettled(ctx, id)
	if err != nil {
		return answer(Outcome{ExecutionID: id, Status: statusUnsettled, Error: err.Error()}, true)
	}
	o := Outcome{ExecutionID: id, Status: string(st.Status)}
	switch st.Status {
	case fold.StatusCompleted:
		o.Output = st.Variables.Output
	case fold.StatusSuspended:
		o.Gate = wire.ParkedGate(st, t.schemas)
	case fold.StatusContinued:
		o.ContinuedTo = st.Variables.ContinuedTo
	case fold.StatusFailed, fold.StatusCancelled:
		o.Error = failureMessage(st.Variables.Error)
		return answer(o, true)
	}
	return answer(o, false)
}

// refused answers a call that err refused or cut short.
func refused(id string, err error) *sdk.CallToolResult {
	o := Outcome{ExecutionID: id, Status: statusRefused, Error: err.Error()}
	var rr *loom.ResumeRefusedError
	var pv *loom.ResumePayloadValidationError
	switch {
	case errors.As(err, &rr):
		o.Refusal = string(rr.Reason)
	case errors.As(err, &pv):
		o.Refusal, o.Violations = "invalid-payload", pv.Violations
	}
	return answer(o, true)
}

// answer renders o as a tool result: structured content and the same JSON
// as text, for hosts that read only text.
func answer(o Outcome, isError bool) *sdk.CallToolResult {
	b, err := json.Marshal(o)
	if err != nil { // only a recorded output that is not JSON could do this
		o = Outcome{ExecutionID: o.ExecutionID, Status: o.Status, Error: "mcpserver: encoding the answer: " + err.Error()}
		b, _ = json.Marshal(o)
		isError = true
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b), IsError: isError}
}

// objectArguments returns a call's arguments, which MCP makes a JSON object
// (absent is {}).
func objectArguments(tool string, args json.RawMessage) (json.RawMessage, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if args[0] != '{' || !json.Valid(args) {
		return nil, &ArgumentsError{Tool: tool, Detail: "the arguments must be a JSON object"}
	}
	return args, nil
}

// failureMessage reads a recorded failure's message.
func failureMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	if len(raw) == 0 {
		return "the execution ended without an outcome"
	}
	return string(raw)
}
