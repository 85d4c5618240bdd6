package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// serve builds a runtime over cfg (its Events a memory store) and serves it
// with the test token; the client talks to it.
func serve(t *testing.T, cfg loom.Config) (*loom.Runtime, *wire.Client) {
	t.Helper()
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wire.Handler(rt, wire.Options{Events: cfg.Events, Authenticate: wire.BearerToken(token, ann)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := wire.NewClient(srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return rt, c
}

func wireErr(t *testing.T, err error, code int) *wire.Error {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("error %v, want code %d", err, code)
	}
	return we
}

// TestRefusalDataSchemaViolations: a resume-schema refusal lists every
// violation as {pointer, keyword, message}, the message says where and
// what, and no value of the payload comes back (a pattern's message would
// quote it).
func TestRefusalDataSchemaViolations(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"v-1","wait":true}}`)
	_, out := e.post(t, `{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":{"executionId":"v-1","eventType":"approve",
		"payload":{"approved":"SECRET-yes","note":"SECRET-NOTE!"}}}`)
	if strings.Contains(out, "SECRET") {
		t.Fatalf("the refusal quotes the payload: %s", out)
	}
	var resp struct{ Error *wire.Error }
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Error == nil {
		t.Fatalf("not an error response: %s", out)
	}
	we := resp.Error
	if we.Code != wire.CodePayloadInvalid || !strings.Contains(we.Message, `gate "approve" at /approved: got string, want boolean`) {
		t.Fatalf("message %q", we.Message)
	}
	d := we.Detail()
	if d.Gate != "approve" || d.Location != "/approved" || d.ExecutionID != "v-1" {
		t.Fatalf("data %s", we.Data)
	}
	want := map[string]wire.Violation{
		"/approved": {Pointer: "/approved", Keyword: "properties/approved/type", Message: "got string, want boolean"},
		"/note":     {Pointer: "/note", Keyword: "properties/note/pattern", Message: "does not match the pattern the schema requires"},
	}
	if len(d.Violations) != len(want) {
		t.Fatalf("violations %+v", d.Violations)
	}
	for _, v := range d.Violations {
		w := want[v.Pointer]
		if v.Message != w.Message || !strings.HasSuffix(v.Keyword, w.Keyword[strings.LastIndexByte(w.Keyword, '/')+1:]) {
			t.Errorf("violation %+v, want %+v", v, w)
		}
	}
}

// TestRefusalDataBusy: a resume while another node holds the execution's
// lease names the owner and when to retry (expiresAt, epoch ms).
func TestRefusalDataBusy(t *testing.T) {
	leases := memstore.NewLeaseStore()
	events := memstore.NewEventStore()
	rt, c := serve(t, loom.Config{Events: events, Leases: leases, Flows: []*loom.Flow{orderFlow()}, NodeID: "node-here",
		ResumeAuthenticator: principalAuth{}})
	ctx := testCtx(t)
	if _, err := c.Start(ctx, wire.StartParams{FlowID: "order", Input: json.RawMessage(`{"item":"x","qty":1}`), ExecutionID: "b-1", Wait: true}); err != nil {
		t.Fatal(err)
	}
	_ = rt
	// Another node takes the lease (the runtime released its own at the park).
	expires := time.Now().Add(time.Hour).UnixMilli()
	if _, err := leases.Acquire(ctx, "b-1", "node-dead", time.Now().UnixMilli(), expires-time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Read(ctx, events, "b-1")
	_, err := c.Resume(ctx, wire.ResumeParams{ExecutionID: "b-1", EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)})
	we := wireErr(t, err, wire.CodeBusy)
	d := we.Detail()
	if d.Owner != "node-dead" || d.ExpiresAt < expires-1000 || d.ExpiresAt > expires+1000 || d.Reason != "busy" {
		t.Fatalf("busy data %s", we.Data)
	}
	if !strings.Contains(we.Message, `driven by node "node-dead"; retry after `) {
		t.Fatalf("busy message %q", we.Message)
	}
	if after, _ := store.Read(ctx, events, "b-1"); len(after) != len(before) {
		t.Fatalf("a busy refusal appended %d events", len(after)-len(before))
	}
}

// TestRefusalDataCodeMismatch: an execution recorded under one code
// fingerprint, resumed by an app registering another, is refused with both.
func TestRefusalDataCodeMismatch(t *testing.T) {
	events, snaps := memstore.NewEventStore(), memstore.NewSnapshotStore()
	flow := func(fp string) *loom.Flow {
		return loom.NewFlow("pinned", func(ctx *loom.Context, _ struct{}) (bool, error) {
			return loom.Suspend[bool](ctx, "go")
		}, loom.WithCodeFingerprint(fp))
	}
	old, err := loom.New(loom.Config{Events: events, Snapshots: snaps, Flows: []*loom.Flow{flow("v1")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := old.Start(ctx, "pinned", struct{}{}, loom.WithExecutionID("p-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.WaitForSuspend(ctx, "p-1"); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, loom.Config{Events: events, Snapshots: snaps, Flows: []*loom.Flow{flow("v2")}})
	_, err = c.Resume(ctx, wire.ResumeParams{ExecutionID: "p-1", EventType: "go", Payload: json.RawMessage(`true`)})
	we := wireErr(t, err, wire.CodeFlowCodeMismatch)
	if d := we.Detail(); d.Recorded != "v1" || d.Registered != "v2" || d.FlowID != "pinned" || d.ExecutionID != "p-1" {
		t.Fatalf("mismatch data %s", we.Data)
	}
}

// TestRefusalDataStart: an unknown flow lists the registered ones; an
// input of the wrong type names the type the flow takes.
func TestRefusalDataStart(t *testing.T) {
	e := newEnv(t, nil)
	c, err := wire.NewClient(e.srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	_, err = c.Start(ctx, wire.StartParams{FlowID: "ordr"})
	we := wireErr(t, err, wire.CodeUnknownFlow)
	if d := we.Detail(); d.FlowID != "ordr" || strings.Join(d.Flows, ",") != "blocker,order" ||
		!strings.Contains(we.Message, "the app registers blocker, order") || !errors.Is(err, loom.ErrUnknownFlow) {
		t.Fatalf("unknown flow: %q %s", we.Message, we.Data)
	}
	_, err = c.Start(ctx, wire.StartParams{FlowID: "order", Input: json.RawMessage(`"SECRET-not-an-order"`)})
	we = wireErr(t, err, wire.CodeInvalidInput)
	if d := we.Detail(); d.Field != "input" || d.FlowID != "order" || d.Want == "" || strings.Contains(string(we.Data)+we.Message, "SECRET") {
		t.Fatalf("input type: %q %s", we.Message, we.Data)
	}
}

// chargeFlow charges once (a step with side effects), then completes.
func chargeFlow(charge func(context.Context, int) (string, error)) *loom.Flow {
	step := loom.NewStep("charge", charge, loom.NonIdempotent())
	return loom.NewFlow("pay", func(ctx *loom.Context, amount int) (string, error) {
		return loom.Run(ctx, step, amount)
	})
}

// inDoubt leaves execution id parked in doubt on a served runtime: a first
// runtime starts it and stops while the charge runs (its STEP_STARTED is
// durable, its outcome never recorded), and the served one recovers it.
func inDoubt(t *testing.T, id string) (*loom.Runtime, *wire.Client, *memstore.EventStore) {
	t.Helper()
	ctx := testCtx(t)
	events := memstore.NewEventStore()
	charging := make(chan struct{})
	crashed := memstore.NewEventStore()
	first, err := loom.New(loom.Config{Events: crashed, Flows: []*loom.Flow{chargeFlow(func(ctx context.Context, n int) (string, error) {
		close(charging)
		<-ctx.Done()
		return "", ctx.Err()
	})}, Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Start(ctx, "pay", 7, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	<-charging
	// What a crash leaves: the log up to the charge's STEP_STARTED.
	log, err := store.Read(ctx, crashed, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := events.Append(ctx, id, 0, log); err != nil {
		t.Fatal(err)
	}
	rt, c := serve(t, loom.Config{Events: events, Flows: []*loom.Flow{chargeFlow(func(context.Context, int) (string, error) {
		return "charged-again", nil
	})}, Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}})
	if _, err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil || st.Variables.SuspendedOn.On != fold.GateInDoubt {
		t.Fatalf("not parked in doubt: %+v %v", st.Variables.SuspendedOn, err)
	}
	return rt, c, events
}

// TestResolveOverTheWire: execution.gate shows an in-doubt park with its
// step and attempt; a resume of it is refused naming execution.resolve; a
// verdict for another attempt, or malformed, records nothing; a done
// verdict serves its output and the execution completes; a rerun runs the
// step again.
func TestResolveOverTheWire(t *testing.T) {
	_, c, events := inDoubt(t, "pay-1")
	ctx := testCtx(t)
	g, err := c.Gate(ctx, wire.GateParams{ExecutionID: "pay-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != fold.StatusSuspended || g.FlowID != "pay" || g.Gate == nil || g.Gate.Kind != wire.GateInDoubt ||
		g.Gate.StepID != "charge" || g.Gate.Attempt == nil || *g.Gate.Attempt != 1 {
		t.Fatalf("gate %+v %+v", g, g.Gate)
	}
	before, _ := store.Read(ctx, events, "pay-1")
	_, err = c.Resume(ctx, wire.ResumeParams{ExecutionID: "pay-1", EventType: "approve", Payload: json.RawMessage(`{}`)})
	we := wireErr(t, err, wire.CodePayloadInvalid)
	if we.Detail().Reason != "in-doubt" || !strings.Contains(we.Message, "parked in doubt") ||
		!strings.Contains(we.Message, "execution.resolve (loom resolve pay-1 --done OUTPUT, or --rerun)") ||
		strings.Contains(we.Message, "schema") {
		t.Fatalf("a resume of an in-doubt park: %q %s", we.Message, we.Data)
	}
	two, one := int64(2), int64(1)
	for _, tc := range []struct {
		p    wire.ResolveParams
		code int
	}{
		{wire.ResolveParams{ExecutionID: "pay-1", StepID: "charge", Attempt: &two, Done: true}, wire.CodePayloadInvalid},
		{wire.ResolveParams{ExecutionID: "pay-1", StepID: "refund", Attempt: &one}, wire.CodePayloadInvalid},
		{wire.ResolveParams{ExecutionID: "pay-1", Attempt: &one}, wire.CodeInvalidParams},
		{wire.ResolveParams{ExecutionID: "pay-1", StepID: "charge"}, wire.CodeInvalidParams},
		{wire.ResolveParams{ExecutionID: "pay-1", StepID: "charge", Attempt: &one, Output: json.RawMessage(`"x"`)}, wire.CodeInvalidParams},
		{wire.ResolveParams{ExecutionID: "pay-9", StepID: "charge", Attempt: &one}, wire.CodeExecutionNotFound},
	} {
		_, err := c.Resolve(ctx, tc.p)
		we := wireErr(t, err, tc.code)
		if tc.code == wire.CodePayloadInvalid && !strings.Contains(we.Message, "nothing was recorded") {
			t.Errorf("%+v: %q", tc.p, we.Message)
		}
	}
	if after, _ := store.Read(ctx, events, "pay-1"); len(after) != len(before) {
		t.Fatalf("refused verdicts appended %d events", len(after)-len(before))
	}
	r, err := c.Resolve(ctx, wire.ResolveParams{ExecutionID: "pay-1", StepID: "charge", Attempt: &one, Done: true,
		Output: json.RawMessage(`"ch-7"`), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := fold.Decode(r.State)
	if err != nil || st.Status != fold.StatusCompleted || string(st.Variables.Output) != `"ch-7"` {
		t.Fatalf("after a done verdict: %s %v", r.State, err)
	}

	_, c2, _ := inDoubt(t, "pay-2")
	r, err = c2.Resolve(ctx, wire.ResolveParams{ExecutionID: "pay-2", StepID: "charge", Attempt: &one, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := fold.Decode(r.State); err != nil || st.Status != fold.StatusCompleted || string(st.Variables.Output) != `"charged-again"` ||
		st.Frames["charge"].Attempt != 2 {
		t.Fatalf("after a rerun verdict: %s %v", r.State, err)
	}
}

// TestGateOverTheWire: a flow's gate with its schema and timeout, a select
// park with each wait, and an execution that is not parked.
func TestGateOverTheWire(t *testing.T) {
	timed := loom.NewFlow("timed", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Suspend[bool](ctx, "sign", loom.Timeout(time.Hour))
	}, loom.WithResumeSchema("sign", `{"type":"boolean"}`))
	either := loom.NewFlow("either", func(ctx *loom.Context, _ struct{}) (int, error) {
		s, err := ctx.Select(loom.OnGate("sign"), loom.OnMessage("news"), loom.OnTimer(time.Hour))
		return s.Index, err
	}, loom.WithResumeSchema("sign", `{"type":"boolean"}`))
	family := loom.NewFlow("family", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Suspend[bool](ctx, "approve.deploy:3f9a")
	}, loom.WithResumeSchema("approve.*", `{"type":"boolean"}`))
	events := memstore.NewEventStore()
	_, c := serve(t, loom.Config{Events: events, Timers: memstore.NewTimerStore(), Flows: []*loom.Flow{timed, either, family, orderFlow()},
		Features: loom.Features{Inbox: true}, ResumeAuthenticator: principalAuth{}})
	ctx := testCtx(t)
	for _, s := range []wire.StartParams{{FlowID: "timed", ExecutionID: "t-1"}, {FlowID: "either", ExecutionID: "e-1"}, {FlowID: "family", ExecutionID: "f-1"}} {
		s.Wait = true
		if _, err := c.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	g, err := c.Gate(ctx, wire.GateParams{ExecutionID: "t-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Gate == nil || g.Gate.Kind != wire.GateNamed || g.Gate.On != "sign" || string(g.Gate.Schema) != `{"type":"boolean"}` ||
		g.Gate.WakeAt == nil || g.Gate.TimeoutMs == nil || *g.Gate.TimeoutMs != time.Hour.Milliseconds() {
		t.Fatalf("a timed gate: %+v %+v", g, g.Gate)
	}
	// A gate of a family ("approve.*") shows the family's schema.
	if g, err = c.Gate(ctx, wire.GateParams{ExecutionID: "f-1"}); err != nil || g.Gate == nil || string(g.Gate.Schema) != `{"type":"boolean"}` {
		t.Fatalf("a gate of a family: %+v %v", g, err)
	}
	g, err = c.Gate(ctx, wire.GateParams{ExecutionID: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Gate == nil || g.Gate.Kind != wire.GateSelect || len(g.Gate.Waits) != 3 {
		t.Fatalf("a select: %+v", g.Gate)
	}
	if w := g.Gate.Waits; w[0].Kind != "gate" || w[0].On != "sign" || string(w[0].Schema) != `{"type":"boolean"}` ||
		w[1].Kind != "message" || w[1].Topic != "news" || w[2].Kind != "timer" || w[2].WakeAt == nil {
		t.Fatalf("the select's waits: %+v", w)
	}
	if _, err := c.Cancel(ctx, wire.CancelParams{ExecutionID: "t-1"}); err != nil {
		t.Fatal(err)
	}
	if g, err = c.Gate(ctx, wire.GateParams{ExecutionID: "t-1"}); err != nil || g.Gate != nil || g.Status != fold.StatusCancelled {
		t.Fatalf("an ended execution: %+v %v", g, err)
	}
	_, err = c.Gate(ctx, wire.GateParams{ExecutionID: "none"})
	wireErr(t, err, wire.CodeExecutionNotFound)
	if _, err := c.Gate(ctx, wire.GateParams{}); !errors.Is(err, event.ErrInvalidEnvelope) {
		wireErr(t, err, wire.CodeInvalidParams)
	}
}
