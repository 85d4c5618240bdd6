package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store/memstore"
)

// Spec §5: every refusal of the ingress gate is a typed error and appends
// nothing. Each test parks an execution, tries a refused resume, and checks
// the log did not grow and the execution is still resumable.

const approveSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"by":{"type":"string","default":"unknown"}},"required":["approved"],"additionalProperties":false}`

func gatedFlow(extra ...loom.FlowOption) *loom.Flow {
	opts := append([]loom.FlowOption{loom.WithResumeSchema("approve", approveSchema)}, extra...)
	return loom.NewFlow("gated", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Suspend("approve", loom.Timeout(time.Hour))
	}, opts...)
}

// parked starts the gated flow and waits for its park.
func parked(t *testing.T, h *harness) string {
	t.Helper()
	id, err := h.rt.Start(h.ctx(), "gated", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	return id
}

// refused asserts err is a refusal and that the log is unchanged.
func refused(t *testing.T, h *harness, id string, before int, err error, reason loom.RefusalReason) {
	t.Helper()
	var rr *loom.ResumeRefusedError
	if reason != "" && (!errors.As(err, &rr) || rr.Reason != reason) {
		t.Fatalf("err = %v, want refusal %q", err, reason)
	}
	if err == nil {
		t.Fatal("resume was not refused")
	}
	if n := len(h.log(id)); n != before {
		t.Fatalf("a refused resume appended: log %d -> %d", before, n)
	}
}

func TestSpec5_KernelEventTypesAreRefused(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	for _, typ := range []string{event.StepCompleted, event.ExecutionMigrated, event.ApprovalGranted,
		event.ExecutionCompleted, event.DecisionRecorded, "__loom_fork__"} {
		err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: typ, Payload: json.RawMessage(`{}`)})
		refused(t, h, id, before, err, loom.RefusedKernelEventType)
	}
}

func TestSpec5_MustBeParkedOnExactlyThatGate(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "reject", Payload: json.RawMessage(`{"approved":true}`)})
	refused(t, h, id, before, err, loom.RefusedGateMismatch)
}

func TestSpec5_TimerFiredOnlyWhereTheRecordedWakeAtAllows(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_000_000)}
	untimed := loom.NewFlow("untimed", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Suspend("approve")
	})
	h := newHarnessWith(t, loom.Config{Clock: clock}, gatedFlow(), untimed)
	timedID := parked(t, h)
	before := len(h.log(timedID))
	st, _ := h.rt.LoadState(h.ctx(), timedID)
	wakeAt := *st.Variables.SuspendedOn.WakeAt
	timer := loom.ResumeEvent{EventType: event.TimerFired, Payload: json.RawMessage(fmt.Sprintf(`{"wakeAt":%d}`, wakeAt))}
	refused(t, h, timedID, before, h.rt.Resume(h.ctx(), timedID, timer), loom.RefusedTimerNotDue)
	clock.advance(2 * time.Hour)
	wrong := loom.ResumeEvent{EventType: event.TimerFired, Payload: json.RawMessage(fmt.Sprintf(`{"wakeAt":%d}`, wakeAt-1))}
	refused(t, h, timedID, before, h.rt.Resume(h.ctx(), timedID, wrong), loom.RefusedTimerNotDue)

	untimedID, err := h.rt.Start(h.ctx(), "untimed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), untimedID); err != nil {
		t.Fatal(err)
	}
	n := len(h.log(untimedID))
	refused(t, h, untimedID, n, h.rt.Resume(h.ctx(), untimedID, timer), loom.RefusedTimerNotDue)

	// Past the recorded wakeAt the timed gate takes the timer.
	if err := h.rt.Resume(h.ctx(), timedID, timer); err != nil {
		t.Fatalf("due timer refused: %v", err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), timedID); err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("%v %v", res.Status, err)
	}
}

func TestSpec5_RecoveredOnlyForARunningExecution(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: event.ExecutionRecovered})
	refused(t, h, id, before, err, loom.RefusedNotRecoverable)
}

func TestSpec5_ResumeBeforeTheParkIsRefusedNotSuspended(t *testing.T) {
	hold := make(chan struct{})
	flow := loom.NewFlow("slow", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		if _, err := ctx.Run("work", func(context.Context) (any, error) { <-hold; return 1, nil }); err != nil {
			return nil, err
		}
		return ctx.Suspend("approve")
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := len(h.log(id))
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`1`)})
	close(hold)
	var rr *loom.ResumeRefusedError
	if !errors.As(err, &rr) || rr.Reason != loom.RefusedNotSuspended {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	for _, e := range h.log(id)[before:] {
		if e.Type == event.ExecutionResumed {
			t.Fatal("the early resume was recorded")
		}
	}
}

func TestSpec5_NullAnswerAfterParkedFailureIsRefused(t *testing.T) {
	failing, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	flow := loom.NewFlow("sibling", func(ctx *loom.Context, _ struct{}) (any, error) {
		err := ctx.Parallel(
			func(c *loom.Context) error { <-started; _, err := c.Suspend("approve"); return err },
			func(c *loom.Context) error {
				_, err := c.Run("flaky", func(context.Context) (any, error) {
					once.Do(func() { close(started) })
					<-failing
					return nil, errors.New("down")
				})
				return err
			},
		)
		return nil, err
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "sibling", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	close(failing)
	waitUntil(t, h, id, func(s fold.State) bool { return s.Variables.FailedWhileParked })
	before := len(h.log(id))
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve"})
	refused(t, h, id, before, err, loom.RefusedNullAfterFailure)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`"go"`)}); err != nil {
		t.Fatalf("a non-null answer was refused: %v", err)
	}
}

func TestSpec5_ResumeSchemaParsedBeforeAppendAndParsedValueRecorded(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	for _, bad := range []string{`{"approved":"yes"}`, `{}`, `{"approved":true,"extra":1}`, `[1]`} {
		err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(bad)})
		var ve *loom.ResumePayloadValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("payload %s: err = %v", bad, err)
		}
		refused(t, h, id, before, err, "")
	}
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `{"approved":true,"by":"unknown"}` {
		t.Fatalf("recorded answer %s, want the parsed value with its default", res.Output)
	}
}

type stubAuthenticator struct{ calls int }

func (a *stubAuthenticator) Authenticate(_ context.Context, _ string, ev loom.ResumeEvent) (json.RawMessage, error) {
	a.calls++
	if string(ev.Credentials) != `"secret"` {
		return nil, errors.New("bad credentials")
	}
	return json.RawMessage(`{"sub":"ann"}`), nil
}

func TestSpec5_AuthenticatorCheckedBeforeShapeAndRecorded(t *testing.T) {
	auth := &stubAuthenticator{}
	h := newHarnessWith(t, loom.Config{ResumeAuthenticator: auth}, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	// A bad shape from an unauthenticated caller is refused as unauthenticated:
	// identity comes first, and the gate's name is not revealed.
	err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":"x"}`)})
	refused(t, h, id, before, err, loom.RefusedUnauthenticated)
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "wrong", Credentials: json.RawMessage(`"nope"`)})
	refused(t, h, id, before, err, loom.RefusedUnauthenticated)
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`), Credentials: json.RawMessage(`"secret"`)})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := h.rt.WaitForCompletion(h.ctx(), id)
	if a := st.State.Variables.Approvals; len(a) != 1 || string(a[0].Principal) != `{"sub":"ann"}` || a[0].Gate != "approve" {
		t.Fatalf("approvals %+v", a)
	}
	for _, e := range h.log(id) {
		if strings.Contains(string(e.Payload), "secret") {
			t.Fatalf("credentials were recorded in %s", e.Type)
		}
	}
}

type denyingAuthorizer struct{ deny string }

func (a denyingAuthorizer) Authorize(_ context.Context, req loom.AuthzRequest) error {
	if req.Action == a.deny {
		return errors.New("tenant mismatch")
	}
	return nil
}

func TestSpec5_ExecutionAuthorizerDeniesAndRecordsExecutionDenied(t *testing.T) {
	h := newHarnessWith(t, loom.Config{Authorizer: denyingAuthorizer{deny: "resume"}}, gatedFlow())
	id := parked(t, h)
	before := len(h.log(id))
	err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)})
	var de *loom.ExecutionDeniedError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v", err)
	}
	log := h.log(id)
	if len(log) != before+1 || log[before].Type != event.ExecutionDenied {
		t.Fatalf("want exactly EXECUTION_DENIED appended, log %v", types(log[before:]))
	}
	if st, _ := h.rt.LoadState(h.ctx(), id); st.Status != fold.StatusSuspended {
		t.Fatalf("status %s", st.Status)
	}
	startDenied := newHarnessWith(t, loom.Config{Authorizer: denyingAuthorizer{deny: "start"}}, gatedFlow())
	if _, err := startDenied.rt.Start(startDenied.ctx(), "gated", nil, loom.WithExecutionID("x")); !errors.As(err, &de) {
		t.Fatalf("start: %v", err)
	}
	if n := len(startDenied.log("x")); n != 0 {
		t.Fatalf("a denied start wrote %d events", n)
	}
}

// One *Flow given to runtimes built at once: each compiles its own resume
// schemas and none writes into the Flow (run under -race), and each still
// enforces them.
func TestOneFlowSharedByRuntimesBuiltConcurrently(t *testing.T) {
	flow := gatedFlow()
	hs := make([]*harness, 4)
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for i := range hs {
		h := &harness{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), timers: memstore.NewTimerStore()}
		hs[i] = h
		wg.Go(func() {
			h.rt, errs[i] = loom.New(loom.Config{Events: h.events, Snapshots: h.snaps, Timers: h.timers, TimerPoll: -1,
				Flows: []*loom.Flow{flow}, Logger: slog.New(slog.DiscardHandler), Recovery: loom.Recovery{Disabled: true}})
		})
	}
	wg.Wait()
	for i, h := range hs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { h.rt.Close() })
	}
	for _, h := range hs {
		id := parked(t, h)
		before := len(h.log(id))
		err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{}`)})
		var ve *loom.ResumePayloadValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("a payload the schema refuses: err = %v", err)
		}
		refused(t, h, id, before, err, "")
	}
}
