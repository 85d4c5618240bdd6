package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
)

// Span attribute keys (and metric attribute keys, where shared).
const (
	keyExecution = attribute.Key("loom.execution.id")
	keyFlow      = attribute.Key("loom.flow.id")
	keyOperation = attribute.Key("loom.operation")
	keyStep      = attribute.Key("loom.step.id")
	keyTool      = attribute.Key("loom.tool.id")
	keyKind      = attribute.Key("loom.step.kind")
	keyAttempt   = attribute.Key("loom.step.attempt")
	keySimulated = attribute.Key("loom.drive.simulated")
	keyStatus    = attribute.Key("loom.status")
	keyEvents    = attribute.Key("loom.append.events")
	keyErrorType = attribute.Key("error.type")
	keyChannel   = attribute.Key("loom.error.channel")
)

// opKind is an operation name as a small integer: it rides in the
// operation's context as a value that boxes without allocating.
type opKind uint8

const (
	opOther opKind = iota
	opStart
	opResume
	opResumeAs
	opResolve
	opRedrive
	opSend
	opFork
	opCancel
	opDeny
	// opCallerTraced is or-ed in when the caller's context carried a trace
	// of its own (the operation span is its child, not a new root).
	opCallerTraced opKind = 0x80
)

var opKinds = map[string]opKind{
	"start": opStart, "resume": opResume, "resume-as": opResumeAs, "resolve": opResolve,
	"redrive": opRedrive, "send": opSend, "fork": opFork, "cancel": opCancel, "deny": opDeny,
}

// opSpanNames are the operation span names, made once.
var opSpanNames = func() map[string]string {
	m := make(map[string]string, len(opKinds))
	for name := range opKinds { //loom:order-independent map into map
		m[name] = "loom.operation " + name
	}
	return m
}()

type opKey struct{}

// Operation starts the span "loom.operation <name>", a child of ctx's span
// (a new root when ctx has none), and returns ctx with it. Its end marks
// the span as failed on an error (see Options.Payloads for what it says).
func (t *Telemetry) Operation(ctx context.Context, op loom.Operation) (context.Context, func(error)) {
	kind := opKinds[op.Name]
	if trace.SpanContextFromContext(ctx).IsValid() {
		kind |= opCallerTraced
	}
	name, ok := opSpanNames[op.Name]
	if !ok {
		name = "loom.operation " + op.Name
	}
	ctx, span := t.start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(keyOperation.String(op.Name), keyExecution.String(op.ExecutionID))
		if op.FlowID != "" {
			span.SetAttributes(keyFlow.String(op.FlowID))
		}
	}
	ctx = context.WithValue(ctx, opKey{}, kind)
	live := t.live(&t.ops, op.ExecutionID, span)
	return ctx, func(err error) {
		if live != nil {
			t.ops.CompareAndDelete(op.ExecutionID, live)
		}
		t.fail(span, err)
		span.End()
	}
}

// operationOf reads what Operation left in an operation's context.
func operationOf(ctx context.Context) (kind opKind, callerTraced, ok bool) {
	if ctx == nil {
		return opOther, false, false
	}
	k, ok := ctx.Value(opKey{}).(opKind)
	return k &^ opCallerTraced, k&opCallerTraced != 0, ok
}

// Drive starts the span "loom.drive". Its parent is the operation's span
// when the operation's caller carried a trace; otherwise the trace
// recorded when the execution started (DriveInfo.Trace, one read of the
// log's first event), so a resume or a recovery on another node continues
// the execution's trace; otherwise the operation's own span. A resume
// carrying its own trace also reads the recorded one and links to it, and a
// resume continuing the recorded trace links to its operation's span. A
// drive that parks adds the event "parked"; one launched by a resume
// starts with the event "resumed".
func (t *Telemetry) Drive(ctx context.Context, d loom.DriveInfo) (context.Context, func(loom.DriveEnd)) {
	kind, callerTraced, fromOp := operationOf(d.Operation)
	opSC := trace.SpanContextFromContext(d.Operation)
	var links []trace.Link
	parent := ctx
	switch {
	case callerTraced || kind == opStart:
		// A start records its operation's own trace: nothing to read.
		parent = trace.ContextWithSpanContext(ctx, opSC)
		if t.tracing && kind != opStart && opSC.IsValid() {
			if rec := t.recorded(ctx, d); rec.IsValid() && rec.TraceID() != opSC.TraceID() {
				links = append(links, trace.Link{SpanContext: rec})
			}
		}
	default:
		rctx := t.recordedContext(ctx, d)
		if rec := trace.SpanContextFromContext(rctx); rec.IsValid() {
			parent = rctx
			if opSC.IsValid() && opSC.TraceID() != rec.TraceID() {
				links = append(links, trace.Link{SpanContext: opSC})
			}
		} else if opSC.IsValid() {
			parent = trace.ContextWithSpanContext(ctx, opSC)
		}
	}
	var opts []trace.SpanStartOption
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	// parent derives from ctx (the runtime's, cancelled by Close): only a
	// span context and the recorded baggage are added to it.
	dctx, span := t.start(parent, "loom.drive", opts...)
	if span.IsRecording() {
		span.SetAttributes(keyExecution.String(d.ExecutionID), keyFlow.String(d.FlowID))
		if d.Simulated {
			span.SetAttributes(keySimulated.Bool(true))
		}
		if fromOp && (kind == opResume || kind == opResumeAs || kind == opResolve) {
			span.AddEvent("resumed")
		}
	}
	live := t.live(&t.drives, d.ExecutionID, span)
	return dctx, func(end loom.DriveEnd) {
		if live != nil {
			t.drives.CompareAndDelete(d.ExecutionID, live)
		}
		t.m.drive(end)
		if span.IsRecording() {
			if end.Status != "" {
				span.SetAttributes(keyStatus.String(string(end.Status)))
			}
			if end.Status == fold.StatusSuspended {
				span.AddEvent("parked")
			}
		}
		switch {
		case end.Err != nil:
			t.fail(span, end.Err)
		case end.Status == fold.StatusFailed:
			span.SetStatus(codes.Error, "execution failed")
		}
		span.End()
	}
}

// idle is the span start returns when tracing is off: it records nothing
// and carries no span context.
var idle trace.Span = tracenoop.Span{}

// start starts a span, or with tracing off returns ctx as it is and idle
// (never ctx's own span, which may be an app's recording one).
func (t *Telemetry) start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.tracing {
		return ctx, idle
	}
	return t.tracer.Start(ctx, name, opts...)
}

// live registers span's context in m as execution id's live one (for
// Append to parent in) and returns the entry, or nil when the span has no
// valid context (a no-op tracer) and nothing is registered.
func (t *Telemetry) live(m *sync.Map, id string, span trace.Span) *trace.SpanContext {
	sc := span.SpanContext()
	if !sc.IsValid() || id == "" {
		return nil
	}
	p := &sc
	m.Store(id, p)
	return p
}

// recorded returns the span context of the trace recorded when d's
// execution started, or an invalid one.
func (t *Telemetry) recorded(ctx context.Context, d loom.DriveInfo) trace.SpanContext {
	return trace.SpanContextFromContext(t.recordedContext(ctx, d))
}

// recordedContext is ctx with the recorded trace extracted into it (as a
// remote span context, with its baggage), or ctx when none was recorded.
func (t *Telemetry) recordedContext(ctx context.Context, d loom.DriveInfo) context.Context {
	if d.Trace == nil {
		return ctx
	}
	carrier := d.Trace()
	if len(carrier) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.MapCarrier(carrier))
}

// StepAttempt starts the span "loom.step" for one attempt, a child of the
// drive's span, and measures the attempt (loom.step.attempts and
// loom.step.duration). A failed attempt's span has status error.
func (t *Telemetry) StepAttempt(ctx context.Context, s loom.StepAttempt) (context.Context, func(error)) {
	ctx, span := t.start(ctx, "loom.step")
	began := time.Now()
	if span.IsRecording() {
		span.SetAttributes(keyExecution.String(s.ExecutionID), keyStep.String(s.StepID),
			keyKind.String(s.Kind), keyAttempt.Int64(s.Attempt))
		if s.ToolID != "" {
			span.SetAttributes(keyTool.String(s.ToolID))
		}
	}
	if !span.IsRecording() && !t.m.stepAttempts.Enabled(ctx) {
		// Nothing records (no-op providers): no clock read, no closure. A
		// span that does not record has nothing for End to do.
		return ctx, nopEnd
	}
	kind := s.Kind
	return ctx, func(err error) {
		t.m.step(ctx, kind, err != nil, time.Since(began))
		t.fail(span, err)
		span.End()
	}
}

func nopEnd(error) {}

// Append starts the span "loom.append" for one durable append batch: a
// child of the execution's live drive (or operation) on this Telemetry,
// else a root span naming the execution. It measures the batch
// (loom.journal.append.duration, loom.journal.append.events).
func (t *Telemetry) Append(ctx context.Context, executionID string, events int) func(error) {
	if sc, ok := t.drives.Load(executionID); ok {
		ctx = trace.ContextWithSpanContext(ctx, *sc.(*trace.SpanContext))
	} else if sc, ok := t.ops.Load(executionID); ok {
		ctx = trace.ContextWithSpanContext(ctx, *sc.(*trace.SpanContext))
	}
	_, span := t.start(ctx, "loom.append")
	if span.IsRecording() {
		span.SetAttributes(keyExecution.String(executionID), keyEvents.Int(events))
	} else if !t.m.appendDuration.Enabled(ctx) {
		return nopEnd
	}
	began := time.Now()
	return func(err error) {
		t.m.append(ctx, events, err != nil, time.Since(began))
		t.fail(span, err)
		span.End()
	}
}

// TimerFired measures a durable timer's lag (loom.timer.lag).
func (t *Telemetry) TimerFired(ctx context.Context, key string, lag time.Duration) {
	t.m.timer(ctx, key, lag)
}

// LeaseTakenOver counts a take-over (loom.lease.takeovers) and adds the
// event "lease.takeover" to ctx's span, if it records.
func (t *Telemetry) LeaseTakenOver(ctx context.Context, executionID, from string) {
	t.m.takeovers.Add(ctx, 1)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("lease.takeover", trace.WithAttributes(keyExecution.String(executionID),
			attribute.String("loom.lease.from", from)))
	}
}

// TraceContext injects ctx's span context (and baggage) into a new map
// carrier through the propagator; nil when there is nothing to carry.
func (t *Telemetry) TraceContext(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// fail marks span as failed by err (nothing for nil): always the error's
// Go type and a typed failure's channel; its message only with Payloads.
func (t *Telemetry) fail(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(keyErrorType.String(errorType(err)))
	var typed interface{ TypedChannel() string }
	if errors.As(err, &typed) {
		span.SetAttributes(keyChannel.String(typed.TypedChannel()))
	}
	if t.payloads {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return
	}
	span.SetStatus(codes.Error, "")
}

// errorType names err's Go type; for a wrapper the kernel adds around a
// step's error (loom.StepError), the type it wraps.
func errorType(err error) string {
	var se *loom.StepError
	if errors.As(err, &se) && se.Err != nil {
		err = se.Err
	}
	return fmt.Sprintf("%T", err)
}
