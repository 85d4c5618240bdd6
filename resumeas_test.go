package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func TestResumeAsOntoATerminalExecutionRecordsANullStatusOnlyResume(t *testing.T) {
	var runs atomic.Int64
	flow := loom.NewFlow("once", func(ctx *loom.Context, _ struct{}) (int, error) {
		runs.Add(1)
		return 7, nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "once", nil)
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	n := len(h.log(id))
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, id, func(s fold.State) bool { return s.Sequence > int64(n) && s.Status == fold.StatusCompleted })
	log := h.log(id)
	if log[n].Type != event.ExecutionResumed || string(log[n].Payload) != "" && string(log[n].Payload) != "null" {
		t.Fatalf("re-open event %s %s", log[n].Type, log[n].Payload)
	}
	st := fold.Fold(log)
	if len(st.Variables.ResumePayloads) != 0 || runs.Load() != 2 {
		t.Fatalf("passthroughs %v, runs %d", st.Variables.ResumePayloads, runs.Load())
	}
}

func TestResumeAsOntoAParkedExecutionEnforcesTheTargetFlowsGate(t *testing.T) {
	v1 := loom.NewFlow("v1", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Suspend("approve")
	})
	v2 := loom.NewFlow("v2", func(ctx *loom.Context, _ struct{}) (string, error) {
		a, err := loom.Suspend[struct{ Approved bool }](ctx, "approve")
		if err != nil {
			return "", err
		}
		if a.Approved {
			return "v2 approved", nil
		}
		return "v2 rejected", nil
	}, loom.WithResumeSchema("approve", `{"type":"object","required":["approved"]}`), loom.WithCodeFingerprint("v2"))
	h := newHarness(t, v1, v2)
	id, _ := h.rt.Start(h.ctx(), "v1", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	before := len(h.log(id))
	var ve *loom.ResumePayloadValidationError
	err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{}`)}, loom.OntoFlow("v2"))
	if !errors.As(err, &ve) || len(h.log(id)) != before {
		t.Fatalf("the target flow's schema was not enforced: %v", err)
	}
	var rr *loom.ResumeRefusedError
	err = h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "other", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"))
	if !errors.As(err, &rr) || rr.Reason != loom.RefusedGateMismatch {
		t.Fatalf("gate rule: %v", err)
	}
	failing := loom.MigrateInput(func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("no") })
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"), failing); err == nil || len(h.log(id)) != before {
		t.Fatalf("a failing migration appended or passed: %v", err)
	}
	migrate := loom.MigrateInput(func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"v":2}`), nil })
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"), migrate); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"v2 approved"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	if v := res.State.Variables; v.CodeHash != "v2" || string(v.Input) != `{"v":2}` {
		t.Fatalf("migration not folded: codeHash %q input %s", v.CodeHash, v.Input)
	}
	if log := h.log(id); log[before].Type != event.ExecutionMigrated {
		t.Fatalf("first event after the park: %s", log[before].Type)
	}
}

func TestRecoverRedrivesACrashedExecutionWithoutAResume(t *testing.T) {
	var steps atomic.Int64
	hold := make(chan struct{})
	flow := loom.NewFlow("crashy", func(ctx *loom.Context, _ struct{}) (int, error) {
		if _, err := ctx.Run("first", func(context.Context) (any, error) { steps.Add(1); return 1, nil }); err != nil {
			return 0, err
		}
		if _, err := ctx.Run("second", func(c context.Context) (any, error) {
			steps.Add(10)
			select {
			case <-hold:
			case <-c.Done(): // the "process" dies here
				return nil, c.Err()
			}
			return 2, nil
		}); err != nil {
			return 0, err
		}
		return 3, nil
	})
	h := newHarnessWith(t, loom.Config{Durability: loom.StepDurable}, flow)
	id, _ := h.rt.Start(h.ctx(), "crashy", nil)
	waitUntil(t, h, id, func(s fold.State) bool { return s.Frames["second"].Status == fold.FrameRunning })
	h.rt.Close() // a Close mid-step leaves the execution running in the log
	close(hold)
	rt := h.open(flow)
	n, err := rt.Recover(h.ctx())
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	res, err := rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "3" {
		t.Fatalf("%s %v", res.Output, err)
	}
	if steps.Load() != 21 {
		t.Fatalf("steps = %d: first must run once, second twice", steps.Load())
	}
	count := map[string]int{}
	for _, e := range h.log(id) {
		count[e.Type]++
	}
	if count[event.ExecutionRecovered] != 1 || count[event.ExecutionResumed] != 0 {
		t.Fatalf("events %v", count)
	}
	if n, _ := rt.Recover(h.ctx()); n != 0 {
		t.Fatalf("a completed execution was recovered again: %d", n)
	}
}

// §5-j: resumeAs onto a parked execution enforces every resume rule — the
// authenticator and the authorizer as much as the gate and the schema. A
// caller the ResumeAuthenticator refuses is refused as unauthenticated with
// nothing appended, before the target flow or the answer's shape is
// looked at; an Authorizer denying the resume records EXECUTION_DENIED and
// nothing else; each time the execution stays parked on its own flow, and
// an authenticated, authorized ResumeAs then records its principal.
func TestSpec5_ResumeAsOntoAParkedExecutionRunsTheAuthenticatorAndTheAuthorizer(t *testing.T) {
	target := loom.NewFlow("gated-v2", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Suspend("approve", loom.Timeout(time.Hour))
	}, loom.WithResumeSchema("approve", approveSchema))
	auth := &stubAuthenticator{}
	authz := &switchAuthorizer{}
	h := newHarnessWith(t, loom.Config{ResumeAuthenticator: auth, Authorizer: authz}, gatedFlow(), target)
	id := parked(t, h)
	before := len(h.log(id))
	good := json.RawMessage(`{"approved":true}`)

	for _, ev := range []loom.ResumeEvent{
		{EventType: "approve", Payload: good},
		{EventType: "approve", Payload: good, Credentials: json.RawMessage(`"nope"`)},
		// Identity comes first: a bad shape and another gate read as
		// unauthenticated too, and reveal nothing.
		{EventType: "approve", Payload: json.RawMessage(`{"approved":"x"}`)},
		{EventType: "other", Credentials: json.RawMessage(`"nope"`)},
	} {
		err := h.rt.ResumeAs(h.ctx(), id, ev, loom.OntoFlow("gated-v2"))
		refused(t, h, id, before, err, loom.RefusedUnauthenticated)
	}

	authz.deny.Store(true)
	err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: good, Credentials: json.RawMessage(`"secret"`)}, loom.OntoFlow("gated-v2"))
	var de *loom.ExecutionDeniedError
	if !errors.As(err, &de) || de.Action != "resume" {
		t.Fatalf("a denied resumeAs: %v, want *loom.ExecutionDeniedError for resume", err)
	}
	log := h.log(id)
	if len(log) != before+1 || log[before].Type != event.ExecutionDenied {
		t.Fatalf("a denied resumeAs appended %v, want EXECUTION_DENIED alone", types(log[before:]))
	}
	if req := authz.last(); req.Action != "resume" || req.ExecutionID != id || req.FlowID != "gated-v2" {
		t.Fatalf("the Authorizer saw %+v, want the resume of %s onto gated-v2", req, id)
	}
	authz.deny.Store(false)
	st, err := h.rt.LoadState(h.ctx(), id)
	if err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("after the refusals: %v, status %s", err, st.Status)
	}
	if flow, err := h.rt.FlowOf(h.ctx(), id); err != nil || flow != "gated" {
		t.Fatalf("after the refusals the execution runs %q (%v), want its own flow gated", flow, err)
	}
	denied := len(h.log(id))
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: good, Credentials: json.RawMessage(`"secret"`)}, loom.OntoFlow("gated-v2")); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a := res.State.Variables.Approvals; len(a) != 1 || string(a[0].Principal) != `{"sub":"ann"}` {
		t.Fatalf("the approval recorded %+v, want ann's", a)
	}
	if flow, err := h.rt.FlowOf(h.ctx(), id); err != nil || flow != "gated-v2" || len(h.log(id)) <= denied {
		t.Fatalf("after the admitted resumeAs the execution runs %q (%v)", flow, err)
	}
}

// switchAuthorizer denies every action while deny is set, and keeps the
// last request it saw.
type switchAuthorizer struct {
	deny atomic.Bool
	mu   sync.Mutex
	req  loom.AuthzRequest
}

func (a *switchAuthorizer) Authorize(_ context.Context, req loom.AuthzRequest) error {
	a.mu.Lock()
	a.req = req
	a.mu.Unlock()
	if a.deny.Load() {
		return errors.New("not today")
	}
	return nil
}

func (a *switchAuthorizer) last() loom.AuthzRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.req
}
