package wire

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// dispatch runs one method. Every error it returns is mapped by errorFor.
func (h *handler) dispatch(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case MethodHandshake:
		if err := decodeParams(params, &struct{}{}, false); err != nil {
			return nil, err
		}
		return currentHandshake(h.opts.MaxRequestBytes, h.rt.Flows()), nil
	case MethodStart:
		var p StartParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.start(ctx, p)
	case MethodResume:
		var p ResumeParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.resume(ctx, p)
	case MethodCancel:
		var p CancelParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		if err := requireID("executionId", p.ExecutionID); err != nil {
			return nil, err
		}
		if err := h.rt.Cancel(ctx, p.ExecutionID, p.Reason); err != nil {
			return nil, err
		}
		return CancelResult{ExecutionID: p.ExecutionID}, nil
	case MethodFork:
		var p ForkParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.fork(ctx, p)
	case MethodState:
		var p StateParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.state(ctx, p)
	case MethodEvents:
		var p EventsParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.events(ctx, p)
	case MethodResolve:
		var p ResolveParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.resolve(ctx, p)
	case MethodGate:
		var p GateParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.gate(ctx, p)
	case MethodSend:
		var p SendParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.send(ctx, p)
	case MethodResumeAs:
		var p ResumeAsParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.resumeAs(ctx, p)
	case MethodRecover:
		if err := decodeParams(params, &struct{}{}, false); err != nil {
			return nil, err
		}
		n, err := h.rt.Recover(ctx)
		if err != nil {
			return nil, err
		}
		return RecoverResult{Recovered: n}, nil
	case MethodList:
		var p ListParams
		if err := decodeParams(params, &p, false); err != nil {
			return nil, err
		}
		return h.list(ctx, p)
	case MethodCheck:
		var p CheckReplayParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		if err := requireID("executionId", p.ExecutionID); err != nil {
			return nil, err
		}
		rep, err := h.rt.CheckExecution(ctx, p.ExecutionID)
		if err != nil {
			return nil, err
		}
		return CheckReplayResult{ExecutionID: p.ExecutionID, Report: rep}, nil
	case MethodReadModelQuery:
		var p ReadModelQueryParams
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h.queryReadModels(ctx, p)
	}
	return nil, newError(CodeMethodNotFound, "no method "+strconv.Quote(method)+" in wire ABI "+Version+
		"; loom.handshake lists the methods", nil)
}

// requireID refuses a missing id (invalid params) and a malformed one (the
// kernel's own *event.InvalidEnvelopeError, CodeInvalidInput).
func requireID(field, id string) error {
	if id == "" {
		return invalidParams(field + " is required")
	}
	return event.ValidateID(field, id)
}

func (h *handler) start(ctx context.Context, p StartParams) (StartResult, error) {
	if p.FlowID == "" {
		return StartResult{}, invalidParams("flowId is required")
	}
	if p.ExecutionID != "" {
		if err := event.ValidateID("executionId", p.ExecutionID); err != nil {
			return StartResult{}, err
		}
	}
	input := json.RawMessage("null")
	if len(p.Input) > 0 {
		input = p.Input
	}
	var opts []loom.StartOption
	if p.ExecutionID != "" {
		opts = append(opts, loom.WithExecutionID(p.ExecutionID))
	}
	id, err := h.rt.Start(ctx, p.FlowID, input, opts...)
	if errors.Is(err, loom.ErrUnknownFlow) {
		return StartResult{}, h.unknownFlow(p.FlowID)
	}
	if err != nil {
		return StartResult{}, err
	}
	return StartResult{ExecutionID: id, State: h.settled(ctx, id, p.Wait)}, nil
}

func (h *handler) send(ctx context.Context, p SendParams) (SendResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return SendResult{}, err
	}
	if p.Topic == "" {
		return SendResult{}, invalidParams("topic is required (the inbox topic the flow receives on)")
	}
	payload := json.RawMessage("null")
	if len(p.Payload) > 0 {
		payload = p.Payload
	}
	// The runtime's Authorizer, when the app has one, decides a "send".
	if err := h.rt.Send(ctx, p.ExecutionID, p.Topic, payload); err != nil {
		return SendResult{}, err
	}
	return SendResult{ExecutionID: p.ExecutionID}, nil
}

func (h *handler) resumeAs(ctx context.Context, p ResumeAsParams) (ResumeAsResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return ResumeAsResult{}, err
	}
	var opts []loom.ResumeOption
	if p.FlowID != "" {
		opts = append(opts, loom.OntoFlow(p.FlowID))
	}
	if len(p.Input) > 0 {
		input := p.Input
		opts = append(opts, loom.MigrateInput(func(json.RawMessage) (json.RawMessage, error) { return input, nil }))
	}
	ev := loom.ResumeEvent{EventType: p.EventType, Payload: p.Payload, Credentials: p.Credentials}
	err := h.rt.ResumeAs(ctx, p.ExecutionID, ev, opts...)
	if p.FlowID != "" && errors.Is(err, loom.ErrUnknownFlow) {
		return ResumeAsResult{}, h.unknownFlow(p.FlowID)
	}
	if err != nil {
		return ResumeAsResult{}, err
	}
	return ResumeAsResult{ExecutionID: p.ExecutionID, State: h.settled(ctx, p.ExecutionID, p.Wait)}, nil
}

// list reads one page through the runtime, which scopes it to the
// caller's tenant and asks its Authorizer; a refused query is invalid
// params naming the param (data.field, data.reason), and nothing is read.
func (h *handler) list(ctx context.Context, p ListParams) (ListResult, error) {
	page, err := h.rt.List(ctx, loom.ListQuery{After: p.After, Limit: p.Limit, FlowID: p.FlowID, Status: p.Status})
	var qe *loom.ListQueryError
	if errors.As(err, &qe) {
		return ListResult{}, newError(CodeInvalidParams, "invalid list query: "+qe.Field+": "+qe.Reason+"; nothing was read",
			map[string]any{"field": qe.Field, "reason": qe.Reason})
	}
	if err != nil {
		return ListResult{}, err
	}
	return ListResult{Executions: page.Executions, Next: page.Next}, nil
}

func (h *handler) resume(ctx context.Context, p ResumeParams) (ResumeResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return ResumeResult{}, err
	}
	if p.EventType == "" {
		return ResumeResult{}, invalidParams("eventType is required (the gate the execution is parked on)")
	}
	// Through the runtime's ingress gate, always: kernel types, the parked
	// gate, resume schemas, the authenticator and the authorizer.
	ev := loom.ResumeEvent{EventType: p.EventType, Payload: p.Payload, Credentials: p.Credentials}
	if err := h.rt.Resume(ctx, p.ExecutionID, ev); err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{ExecutionID: p.ExecutionID, State: h.settled(ctx, p.ExecutionID, p.Wait)}, nil
}

func (h *handler) resolve(ctx context.Context, p ResolveParams) (ResolveResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return ResolveResult{}, err
	}
	if p.StepID == "" || p.Attempt == nil {
		return ResolveResult{}, invalidParams("stepId and attempt are required: the step attempt the park is in doubt about " +
			"(execution.gate shows them)")
	}
	if !p.Done && len(p.Output) > 0 {
		return ResolveResult{}, invalidParams("output goes with done: true (the effect happened, and this is its output); " +
			"without done the step runs again and its new attempt makes the output")
	}
	v := loom.Verdict{StepID: p.StepID, Attempt: *p.Attempt, Done: p.Done}
	if p.Done {
		v.Output = json.RawMessage("null")
		if len(p.Output) > 0 {
			v.Output = p.Output
		}
	}
	if err := h.rt.ResolveInDoubt(ctx, p.ExecutionID, v); err != nil {
		return ResolveResult{}, err
	}
	return ResolveResult{ExecutionID: p.ExecutionID, State: h.settled(ctx, p.ExecutionID, p.Wait)}, nil
}

func (h *handler) fork(ctx context.Context, p ForkParams) (ForkResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return ForkResult{}, err
	}
	if p.At == nil || *p.At < 0 {
		return ForkResult{}, invalidParams("at is required: the last sequence to copy (0 or more)")
	}
	if p.ForkID != "" {
		if err := event.ValidateID("forkId", p.ForkID); err != nil {
			return ForkResult{}, err
		}
	}
	if err := h.checkSequence(ctx, p.ExecutionID, *p.At); err != nil {
		return ForkResult{}, err
	}
	var opts []loom.ForkOption
	if p.ForkID != "" {
		opts = append(opts, loom.ForkID(p.ForkID))
	}
	if p.Simulate {
		opts = append(opts, loom.SimulateFork())
	}
	id, err := h.rt.Fork(ctx, p.ExecutionID, *p.At, opts...)
	if err != nil {
		return ForkResult{}, err
	}
	return ForkResult{ExecutionID: id, State: h.settled(ctx, id, p.Wait)}, nil
}

// unknownFlow refuses a start of a flow the app does not register, listing
// those it does (data.flows).
func (h *handler) unknownFlow(id string) *Error {
	ids := []string{}
	for _, f := range h.rt.Flows() {
		ids = append(ids, f.ID)
	}
	msg := "no flow " + quoteCut(id, maxQuotedName) + " is registered"
	if len(ids) > 0 {
		msg += "; the app registers " + strings.Join(ids, ", ")
	}
	return newError(CodeUnknownFlow, msg, map[string]any{"flowId": cut(id, maxQuotedName), "flows": ids})
}

// checkSequence refuses a sequence past the end of a log with a typed
// error (Fork's own refusal of one is an untyped error).
func (h *handler) checkSequence(ctx context.Context, id string, at int64) error {
	st, err := h.rt.LoadState(ctx, id)
	if err != nil {
		return err
	}
	if at > st.Sequence {
		return &rangeError{id: id, at: at, last: st.Sequence}
	}
	return nil
}

func (h *handler) state(ctx context.Context, p StateParams) (StateResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return StateResult{}, err
	}
	var (
		st  fold.State
		err error
	)
	if p.At == nil {
		st, err = h.rt.LoadState(ctx, p.ExecutionID)
	} else {
		if *p.At < 0 {
			return StateResult{}, invalidParams("at must be 0 or more")
		}
		// Asked for at most math.MaxInt64-1, so that the runtime's at+1
		// cannot overflow; no log reaches either, so the answer is the same.
		st, err = h.rt.LoadStateAt(ctx, p.ExecutionID, min(*p.At, math.MaxInt64-1))
		if err == nil && st.Sequence < *p.At {
			err = &rangeError{id: p.ExecutionID, at: *p.At, last: st.Sequence}
		}
	}
	if err != nil {
		return StateResult{}, err
	}
	b, err := fold.Encode(st)
	if err != nil {
		return StateResult{}, err
	}
	return StateResult{ExecutionID: p.ExecutionID, State: b}, nil
}

func (h *handler) events(ctx context.Context, p EventsParams) (EventsResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return EventsResult{}, err
	}
	if p.From < 0 || p.Limit < 0 {
		return EventsResult{}, invalidParams("from and limit must be 0 or more")
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultEventsPage
	}
	limit = min(limit, MaxEventsPage)
	if err := h.admitRead(ctx, p.ExecutionID); err != nil {
		return EventsResult{}, err
	}
	// One more than the page tells whether another page follows; the end
	// saturates rather than overflow (no log reaches it).
	evs, err := store.ReadRange(ctx, h.opts.Events, p.ExecutionID, p.From, saturatingAdd(p.From, int64(limit)+1))
	if err != nil {
		return EventsResult{}, err
	}
	res := EventsResult{Events: evs}
	if len(evs) > limit {
		res.Events = evs[:limit]
		next := p.From + int64(limit)
		res.Next = &next
	}
	if res.Events == nil {
		res.Events = []event.Envelope{}
	}
	return res, nil
}

// admitRead checks, through the runtime, that the execution exists and that
// the caller may query it (the Authorizer's "query"): the runtime has no
// read-the-log call of its own, so the log is read from Options.Events only
// after this.
func (h *handler) admitRead(ctx context.Context, id string) error {
	_, err := h.rt.LoadStateAt(ctx, id, 0)
	return err
}

// settled waits, when asked to, for the execution to park or end within the
// call's deadline, and returns its canonical state; nil when not asked, when
// the deadline passed first, or when the state cannot be read (the call
// itself succeeded: the caller reads execution.state).
func (h *handler) settled(ctx context.Context, id string, wait bool) json.RawMessage {
	if !wait {
		return nil
	}
	st, err := h.rt.WaitForSettled(ctx, id)
	if err != nil {
		return nil
	}
	b, err := fold.Encode(st)
	if err != nil {
		return nil
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

// saturatingAdd returns a+b for b >= 0, or math.MaxInt64 where that
// overflows.
func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
