package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/telemetry"
)

type order struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

// orderFlow prices an order with a step whose first attempt fails (and is
// retried), then ships it; parks on "approve" between the two when park is
// set.
func orderFlow(park bool) *loom.Flow {
	var calls atomic.Int64
	price := loom.NewStep("price", func(ctx context.Context, o order) (int, error) {
		if calls.Add(1)%2 == 1 {
			return 0, errors.New("price service flaked")
		}
		return o.Qty * 10, nil
	}, noWait(2))
	ship := loom.NewStep("ship", func(ctx context.Context, total int) (string, error) { return "shipped", nil })
	return loom.NewFlow("order", func(ctx *loom.Context, o order) (string, error) {
		total, err := loom.Run(ctx, price, o)
		if err != nil {
			return "", err
		}
		if park {
			if _, err := loom.Suspend[bool](ctx, "approve"); err != nil {
				return "", err
			}
		}
		return loom.Run(ctx, ship, total)
	})
}

func only(t *testing.T, spans []sdktrace.ReadOnlySpan, what string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%d %s spans, want 1", len(spans), what)
	}
	return spans[0]
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

// recordedTrace parses the trace carrier EXECUTION_STARTED records.
func recordedTrace(t *testing.T, r *rig, id string) trace.SpanContext {
	t.Helper()
	raw, ok := r.log(id)[0].Metadata["trace"]
	if !ok {
		t.Fatalf("EXECUTION_STARTED of %s records no trace", id)
	}
	var carrier map[string]string
	if err := json.Unmarshal(raw, &carrier); err != nil {
		t.Fatal(err)
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(carrier))
	return trace.SpanContextFromContext(ctx)
}

func TestAStartTracesItsOperationDriveAndEveryAttemptUnderTheCallersTrace(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	rt := r.runtime(orderFlow(false))
	ctx, app := r.caller()
	id, err := rt.Start(ctx, "order", order{Item: "disk", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	app.End()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	traceID := app.SpanContext().TraceID()

	op := only(t, r.ended("loom.operation start"), "start operation")
	if op.Parent().SpanID() != app.SpanContext().SpanID() || op.SpanContext().TraceID() != traceID {
		t.Fatalf("the operation's parent is %v, want the caller's span", op.Parent())
	}
	if got := attr(op, "loom.execution.id").AsString(); got != id {
		t.Fatalf("operation names execution %q, want %q", got, id)
	}
	if rec := recordedTrace(t, r, id); rec.SpanID() != op.SpanContext().SpanID() || rec.TraceID() != traceID {
		t.Fatalf("EXECUTION_STARTED records %v, want the operation's span", rec)
	}
	drive := only(t, r.ended("loom.drive"), "drive")
	if drive.Parent().SpanID() != op.SpanContext().SpanID() {
		t.Fatalf("the drive's parent is %v, want the operation", drive.Parent())
	}
	if got := attr(drive, "loom.status").AsString(); got != "completed" {
		t.Fatalf("drive ended %q", got)
	}
	steps := r.ended("loom.step")
	var seen []string
	for _, s := range steps {
		if s.Parent().SpanID() != drive.SpanContext().SpanID() {
			t.Fatalf("step span %v is not the drive's child", s.Attributes())
		}
		st := attr(s, "loom.step.id").AsString() + "#" + attr(s, "loom.step.attempt").String() + ":" + s.Status().Code.String()
		seen = append(seen, st)
		if attr(s, "loom.execution.id").AsString() != id || attr(s, "loom.step.kind").AsString() != "step" {
			t.Fatalf("step span attributes %v", s.Attributes())
		}
	}
	if want := "price#1:Error price#2:Unset ship#1:Unset"; strings.Join(seen, " ") != want {
		t.Fatalf("step spans %q, want %q", strings.Join(seen, " "), want)
	}
	if got := attr(steps[0], "error.type").AsString(); got != "*errors.errorString" {
		t.Fatalf("failed attempt has error.type %q", got)
	}
	appends := r.ended("loom.append")
	if len(appends) == 0 {
		t.Fatal("no append spans")
	}
	events := int64(0)
	for _, a := range appends {
		if a.SpanContext().TraceID() != traceID {
			t.Fatalf("append span %v outside the caller's trace (parent %v)", a.Attributes(), a.Parent())
		}
		if attr(a, "loom.execution.id").AsString() != id {
			t.Fatalf("append span names %v", a.Attributes())
		}
		events += attr(a, "loom.append.events").AsInt64()
	}
	if n := int64(len(r.log(id))); events != n {
		t.Fatalf("append spans count %d events, the log holds %d", events, n)
	}
}

func TestAResumeOnAnotherRuntimeWithNoTraceContinuesTheRecordedTrace(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	flow := orderFlow(true)
	first := r.runtime(flow)
	ctx, app := r.caller()
	id, err := first.Start(ctx, "order", order{Item: "disk", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.WaitForSuspend(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	app.End()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	parked := only(t, r.ended("loom.drive"), "first drive")
	if !hasEvent(parked, "parked") || attr(parked, "loom.status").AsString() != "suspended" {
		t.Fatalf("the parking drive has events %v, status %q", parked.Events(), attr(parked, "loom.status").AsString())
	}

	second := r.runtime(flow)
	if err := second.Resume(context.Background(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.WaitForCompletion(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	drives := r.ended("loom.drive")
	if len(drives) != 2 {
		t.Fatalf("%d drive spans, want 2", len(drives))
	}
	resumed := drives[1]
	start := only(t, r.ended("loom.operation start"), "start operation")
	if resumed.SpanContext().TraceID() != app.SpanContext().TraceID() {
		t.Fatalf("the resumed drive is in trace %s, want the start's %s", resumed.SpanContext().TraceID(), app.SpanContext().TraceID())
	}
	if resumed.Parent().SpanID() != start.SpanContext().SpanID() || !resumed.Parent().IsRemote() {
		t.Fatalf("the resumed drive's parent is %v, want the recorded start operation as a remote parent", resumed.Parent())
	}
	if !hasEvent(resumed, "resumed") || attr(resumed, "loom.status").AsString() != "completed" {
		t.Fatalf("the resumed drive has events %v, status %q", resumed.Events(), attr(resumed, "loom.status").AsString())
	}
	// The resume's own span is a root of its own, linked from the drive.
	op := only(t, r.ended("loom.operation resume"), "resume operation")
	if op.Parent().IsValid() {
		t.Fatalf("the resume operation has a parent %v; its caller carried none", op.Parent())
	}
	if links := resumed.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != op.SpanContext().SpanID() {
		t.Fatalf("the resumed drive links %v, want the resume operation", links)
	}
	var after []string
	for _, s := range r.ended("loom.step") {
		if s.Parent().SpanID() == resumed.SpanContext().SpanID() {
			after = append(after, attr(s, "loom.step.id").AsString())
		}
	}
	if strings.Join(after, " ") != "ship" {
		t.Fatalf("steps of the resumed drive %q, want ship", after)
	}
}

func TestAResumeCarryingItsOwnTraceIsParentedThereAndLinksTheRecordedOne(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	rt := r.runtime(orderFlow(true))
	ctx, app := r.caller()
	id, err := rt.Start(ctx, "order", order{Item: "disk", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	app.End()
	rctx, other := r.caller()
	if err := rt.Resume(rctx, id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	other.End()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	op := only(t, r.ended("loom.operation resume"), "resume operation")
	resumed := r.ended("loom.drive")[1]
	if resumed.Parent().SpanID() != op.SpanContext().SpanID() || resumed.SpanContext().TraceID() != other.SpanContext().TraceID() {
		t.Fatalf("the resumed drive's parent is %v, want the resume operation", resumed.Parent())
	}
	if links := resumed.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != app.SpanContext().TraceID() {
		t.Fatalf("the resumed drive links %v, want the recorded start trace", links)
	}
}

// declined is a step failure whose message quotes data.
const secret = "card 4242-4242 declined"

func failingFlow() *loom.Flow {
	charge := loom.NewStep("charge", func(ctx context.Context, o order) (int, error) {
		return 0, loom.Fail("declined", map[string]string{"reason": secret})
	}, loom.ErrorChannel("declined", `{"type":"object"}`))
	plain := loom.NewStep("refund", func(ctx context.Context, o order) (int, error) {
		return 0, errors.New(secret)
	})
	return loom.NewFlow("pay", func(ctx *loom.Context, o order) (int, error) {
		if _, err := loom.Run(ctx, charge, o); err == nil {
			return 0, errors.New("charge did not fail")
		}
		return loom.Run(ctx, plain, o)
	})
}

// spanText renders everything a span carries that could leak data.
func spanText(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	b.WriteString(s.Status().Description)
	for _, kv := range s.Attributes() {
		b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
	}
	for _, e := range s.Events() {
		b.WriteString(" " + e.Name)
		for _, kv := range e.Attributes {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
		}
	}
	return b.String()
}

func TestNoSpanCarriesAnErrorMessageUnlessPayloadsIsSet(t *testing.T) {
	for _, payloads := range []bool{false, true} {
		r := newRig(t, telemetry.Options{Payloads: payloads})
		rt := r.runtime(failingFlow())
		id, err := rt.Start(context.Background(), "pay", order{Item: "disk", Qty: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForCompletion(r.ctx(), id); err == nil {
			t.Fatal("the flow did not fail")
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		steps := r.ended("loom.step")
		if len(steps) != 2 {
			t.Fatalf("%d step spans", len(steps))
		}
		charge, refund := steps[0], steps[1]
		for _, s := range steps {
			if s.Status().Code != codes.Error {
				t.Fatalf("step %s has status %v", attr(s, "loom.step.id").AsString(), s.Status())
			}
		}
		if got := attr(charge, "loom.error.channel").AsString(); got != "declined" {
			t.Fatalf("the typed failure's span has channel %q", got)
		}
		if got := attr(charge, "error.type").AsString(); got != "*loom.TypedFailure" {
			t.Fatalf("the typed failure's span has error.type %q", got)
		}
		leaked := false
		for _, s := range r.spans.Ended() {
			if strings.Contains(spanText(s), "4242") {
				leaked = true
				if !payloads {
					t.Fatalf("span %s carries the error message without Payloads: %s", s.Name(), spanText(s))
				}
			}
		}
		if payloads {
			if !leaked || !strings.Contains(refund.Status().Description, secret) || !hasEvent(refund, "exception") {
				t.Fatalf("with Payloads, the failed step does not carry its message: %s", spanText(refund))
			}
		}
	}
}

func TestANoopTracerProviderMakesNoSpanYetTheCallersTraceIsRecorded(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	tel, err := telemetry.New(telemetry.Options{TracerProvider: tracenoop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Events: r.events, Flows: []*loom.Flow{orderFlow(false)}, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)}
	tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, app := r.caller() // the app's own SDK span
	id, err := rt.Start(ctx, "order", order{Item: "disk", Qty: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(r.spans.Ended()); got != 0 {
		t.Fatalf("%d spans ended before the app ended its own", got)
	}
	app.End()
	if attrs := r.spans.Ended()[0].Attributes(); len(attrs) != 0 {
		t.Fatalf("the app's span was given attributes %v", attrs)
	}
	if rec := recordedTrace(t, r, id); rec.SpanID() != app.SpanContext().SpanID() {
		t.Fatalf("EXECUTION_STARTED records %v, want the caller's span", rec)
	}
}
