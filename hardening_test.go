package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// gated parks on "go" and then runs one step; fp is its code fingerprint.
func gated(fp string, ran *atomic.Int64, opts ...loom.FlowOption) *loom.Flow {
	return loom.NewFlow("gated", func(ctx *loom.Context, _ struct{}) (int, error) {
		if _, err := ctx.Suspend("go"); err != nil {
			return 0, err
		}
		out, err := ctx.Run("after", func(context.Context) (any, error) { ran.Add(1); return 7, nil })
		if err != nil {
			return 0, err
		}
		return int(out[0] - '0'), nil
	}, append([]loom.FlowOption{loom.WithCodeFingerprint(fp)}, opts...)...)
}

func TestK11_AResumeUnderAnotherCodeFingerprintIsRefusedWithNothingAppended(t *testing.T) {
	var ran atomic.Int64
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, gated("v1", &ran))
	id, err := h.rt.Start(h.ctx(), "gated", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close()
	before := len(h.log(id))

	v2 := h.open(gated("v2", &ran))
	err = v2.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "go"})
	var mismatch *loom.FlowCodeMismatchError
	if !errors.As(err, &mismatch) || mismatch.Recorded != "v1" || mismatch.Registered != "v2" ||
		!strings.Contains(err.Error(), "WithCompatibleFingerprints") {
		t.Fatalf("resume under v2 = %v, want *FlowCodeMismatchError naming v1 and v2", err)
	}
	if n := len(h.log(id)); n != before || ran.Load() != 0 {
		t.Fatalf("the refused resume appended %d events and ran the step %d times", n-before, ran.Load())
	}
	// ResumeAs without a migration does not move the pin either.
	if err := v2.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "go"}); !errors.As(err, &mismatch) {
		t.Fatalf("resumeAs under v2 = %v", err)
	}
	v2.Close()

	// A flow that declares v1 compatible replays it.
	compatible := h.open(gated("v2", &ran, loom.WithCompatibleFingerprints("v1")))
	if err := compatible.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	if res, err := compatible.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "7" {
		t.Fatalf("%s %v", res.Output, err)
	}
}

func TestK11_AMigrationMovesTheCodePin(t *testing.T) {
	var ran atomic.Int64
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, gated("v1", &ran))
	id, _ := h.rt.Start(h.ctx(), "gated", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close()
	v2 := h.open(gated("v2", &ran))
	keep := func(in json.RawMessage) (json.RawMessage, error) { return in, nil }
	if err := v2.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "go"}, loom.MigrateInput(keep)); err != nil {
		t.Fatal(err)
	}
	res, err := v2.WaitForCompletion(h.ctx(), id)
	if err != nil || res.State.Variables.CodeHash != "v2" {
		t.Fatalf("code pin %q after the migration: %v", res.State.Variables.CodeHash, err)
	}
	if n := countType(h.log(id), event.ExecutionMigrated); n != 1 {
		t.Fatalf("%d EXECUTION_MIGRATED", n)
	}
}

func TestK11_RecoveryAndTimersRefuseAMismatchedPin(t *testing.T) {
	var ran atomic.Int64
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	timers := memstore.NewTimerStore()
	sleepy := func(fp string) *loom.Flow {
		return loom.NewFlow("sleepy", func(ctx *loom.Context, _ struct{}) (int, error) {
			if err := ctx.Sleep(time.Hour); err != nil {
				return 0, err
			}
			_, err := ctx.Run("after", func(context.Context) (any, error) { ran.Add(1); return 1, nil })
			return 1, err
		}, loom.WithCodeFingerprint(fp))
	}
	h := newHarnessWith(t, loom.Config{StickyParks: -1, Clock: clock, Timers: timers, TimerPoll: -1}, sleepy("v1"))
	id, _ := h.rt.Start(h.ctx(), "sleepy", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close()
	before := len(h.log(id))
	v2 := h.open(sleepy("v2"))
	clock.advance(2 * time.Hour)
	if n, _ := v2.FireDueTimers(h.ctx()); n != 0 {
		t.Fatalf("fired %d timers of a mismatched execution", n)
	}
	if n := len(h.log(id)); n != before || ran.Load() != 0 {
		t.Fatalf("the refused timer appended %d events", n-before)
	}
	if due, _ := timers.Due(h.ctx(), clock.Now().UnixMilli(), 10); len(due) != 1 {
		t.Fatalf("the timer must stay for fixed code to fire: %d due", len(due))
	}
}

func TestADR0061_AStepIDReusedWithAnotherInputFailsNamingIter(t *testing.T) {
	var runs atomic.Int64
	double := loom.NewStep("double", func(_ context.Context, n int) (int, error) { runs.Add(1); return 2 * n, nil })
	flow := loom.NewFlow("loop", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		var out []int
		for i := 1; i <= 3; i++ {
			v, err := loom.Run(ctx, double, i)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "loop", nil)
	_, err := h.rt.WaitForCompletion(h.ctx(), id)
	var failed *loom.FlowFailedError
	if !errors.As(err, &failed) || !strings.Contains(failed.Message, "step.Iter(i)") {
		t.Fatalf("a reused step id: %v", err)
	}
	if runs.Load() != 1 || countType(h.log(id), event.StepStarted) != 1 {
		t.Fatalf("the reused id ran %d times, %d STEP_STARTED", runs.Load(), countType(h.log(id), event.StepStarted))
	}
}

func TestADR0061_TheSameIDWithTheSameInputIsServed(t *testing.T) {
	var runs atomic.Int64
	double := loom.NewStep("double", func(_ context.Context, n int) (int, error) { runs.Add(1); return 2 * n, nil })
	flow := loom.NewFlow("twice", func(ctx *loom.Context, _ struct{}) (int, error) {
		a, err := loom.Run(ctx, double, 4)
		if err != nil {
			return 0, err
		}
		b, err := loom.Run(ctx, double, 4)
		return a + b, err
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "twice", nil)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "16" || runs.Load() != 1 {
		t.Fatalf("%s %v, ran %d", res.Output, err, runs.Load())
	}
}

func TestADR0061_ADecisionIDDecidedTwiceInOneRunFails(t *testing.T) {
	flow := loom.NewFlow("pick", func(ctx *loom.Context, _ struct{}) (int, error) {
		for i := range 2 {
			if _, err := loom.Decide(ctx, "pick", func() (int, error) { return i, nil }); err != nil {
				var reused *loom.StepReusedError
				if errors.As(err, &reused) && reused.Kind == "decision" {
					return -1, nil
				}
				return 0, err
			}
		}
		return 0, nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "pick", nil)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "-1" {
		t.Fatalf("%s %v", res.Output, err)
	}
	if n := countType(h.log(id), event.DecisionRecorded); n != 1 {
		t.Fatalf("%d decisions recorded", n)
	}
}

func TestADR0113_ARenamedStepParksOnTheDivergedGateByDefault(t *testing.T) {
	var renamed atomic.Bool
	var ran atomic.Int64
	flow := loom.NewFlow("drift", func(ctx *loom.Context, _ struct{}) (int, error) {
		id := "charge"
		if renamed.Load() {
			id = "charge-card"
		}
		if _, err := ctx.Run(id, func(context.Context) (any, error) { ran.Add(1); return 1, nil }); err != nil {
			return 0, err
		}
		_, err := ctx.Suspend("go")
		return 1, err
	})
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, flow)
	id, _ := h.rt.Start(h.ctx(), "drift", nil)
	resumeWhenParked := func() {
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	resumeWhenParked()
	renamed.Store(true)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil || st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.On != fold.GateDiverged {
		t.Fatalf("park %+v: %v", st.Variables.SuspendedOn, err)
	}
	if ran.Load() != 1 {
		t.Fatalf("the renamed step ran its effect again: %d runs", ran.Load())
	}
}

func TestK9_AReDriveWaitsOutAnotherNodesLiveLeaseAndWritesNothing(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	leases := memstore.NewLeaseStore()
	var ran atomic.Int64
	flow := loom.NewFlow("work", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Run("w", func(context.Context) (any, error) { ran.Add(1); return 1, nil })
		return 1, err
	})
	h := newHarnessWith(t, loom.Config{Clock: clock, Leases: leases, LeaseTTL: 30 * time.Second, Heartbeat: -1}, flow)
	// An execution another node started and drives: its log, its lease.
	id := "driven-elsewhere"
	started := event.Envelope{ID: "e0", WorkflowID: "work", ExecutionID: id, Type: event.ExecutionStarted,
		Timestamp: clock.Now().UnixMilli(), Payload: json.RawMessage(`{"input":null}`)}
	if err := h.events.Append(h.ctx(), id, 0, []event.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	held, err := leases.Acquire(h.ctx(), id, "node-b", clock.Now().UnixMilli(), 30_000)
	if err != nil {
		t.Fatal(err)
	}
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: event.ExecutionRecovered})
	var busy *loom.ExecutionBusyError
	var rr *loom.ResumeRefusedError
	if !errors.As(err, &busy) || busy.Owner != "node-b" || busy.ExpiresAt.UnixMilli() != held.ExpiresAt ||
		!errors.As(err, &rr) || rr.Reason != loom.RefusedBusy {
		t.Fatalf("re-drive = %v, want *ExecutionBusyError naming node-b", err)
	}
	if n, err := h.rt.Recover(h.ctx()); n != 0 || err != nil {
		t.Fatalf("Recover took it: %d %v", n, err)
	}
	// Nothing changed: no event, no lease write, no fence bump.
	if n := len(h.log(id)); n != 1 || ran.Load() != 0 {
		t.Fatalf("%d events, ran %d", n, ran.Load())
	}
	if l, _, _ := leases.Get(h.ctx(), id); l != held {
		t.Fatalf("lease %+v, want %+v untouched", l, held)
	}
	if tok, _ := h.events.AcquireFence(h.ctx(), id); tok != 1 {
		t.Fatalf("the refusal bumped the fence: next token %d", tok)
	}
	// Once the lease lapses, the re-drive goes through.
	clock.advance(31 * time.Second)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: event.ExecutionRecovered}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || ran.Load() != 1 {
		t.Fatalf("%v, ran %d", err, ran.Load())
	}
}

func TestK9_AReDriveOfAFreshStartWithNoLeaseYetIsRefusedForATTL(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	flow := loom.NewFlow("work", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	h := newHarnessWith(t, loom.Config{Clock: clock, Leases: memstore.NewLeaseStore(), LeaseTTL: 30 * time.Second, Heartbeat: -1}, flow)
	id := "fresh"
	started := event.Envelope{ID: "e0", WorkflowID: "work", ExecutionID: id, Type: event.ExecutionStarted,
		Timestamp: clock.Now().UnixMilli(), Payload: json.RawMessage(`{"input":null}`)}
	if err := h.events.Append(h.ctx(), id, 0, []event.Envelope{started}); err != nil {
		t.Fatal(err)
	}
	err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: event.ExecutionRecovered})
	var busy *loom.ExecutionBusyError
	if !errors.As(err, &busy) || busy.Owner != "" || busy.ExpiresAt.UnixMilli() != started.Timestamp+30_000 {
		t.Fatalf("re-drive = %v", err)
	}
	if n := len(h.log(id)); n != 1 {
		t.Fatalf("%d events", n)
	}
}

// diskFull fails every append once full is set, as a full disk would.
type diskFull struct {
	*memstore.EventStore
	full atomic.Bool
}

var errDiskFull = errors.New("disk full")

func (d *diskFull) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if d.full.Load() {
		return errDiskFull
	}
	return d.EventStore.Append(ctx, id, expected, evs)
}

func (d *diskFull) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	if d.full.Load() {
		return errDiskFull
	}
	return d.EventStore.AppendFenced(ctx, id, token, expected, evs)
}

func TestAWaiterHearsOfAnAbortedDriveWithItsTypedError(t *testing.T) {
	for _, wait := range []string{"completion", "suspend", "settled"} {
		t.Run(wait, func(t *testing.T) {
			disk := &diskFull{EventStore: memstore.NewEventStore()}
			release := make(chan struct{})
			flow := loom.NewFlow("w", func(ctx *loom.Context, _ struct{}) (int, error) {
				if _, err := ctx.Run("slow", func(context.Context) (any, error) { <-release; return 1, nil }); err != nil {
					return 0, err
				}
				_, err := ctx.Suspend("never")
				return 1, err
			})
			rt, err := loom.New(loom.Config{Events: disk, Flows: []*loom.Flow{flow}, Durability: loom.StepDurable})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx := testCtx(t)
			id, err := rt.Start(ctx, "w", nil)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				var err error
				switch wait {
				case "completion":
					_, err = rt.WaitForCompletion(ctx, id)
				case "suspend":
					_, err = rt.WaitForSuspend(ctx, id)
				default:
					_, err = rt.WaitForSettled(ctx, id)
				}
				errc <- err
			}()
			disk.full.Store(true)
			close(release)
			err = <-errc
			var aborted *loom.DriveAbortedError
			var je *loom.JournalError
			if !errors.As(err, &aborted) || !errors.As(err, &je) || !errors.Is(err, errDiskFull) {
				t.Fatalf("wait = %v, want *DriveAbortedError wrapping the *JournalError", err)
			}
		})
	}
}

func TestADR0103_ADuplicateStartAfterAFenceIsStillExecutionExists(t *testing.T) {
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "f", nil, loom.WithExecutionID("dup"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	// A re-opening moved the fence past 0.
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	before := len(h.log(id))
	other := h.open(flow) // another process: the id is not claimed there
	_, err = other.Start(h.ctx(), "f", nil, loom.WithExecutionID("dup"))
	var je *loom.JournalError
	if !errors.Is(err, loom.ErrExecutionExists) || errors.As(err, &je) {
		t.Fatalf("duplicate start = %v, want ErrExecutionExists and no JournalError", err)
	}
	if n := len(h.log(id)); n != before {
		t.Fatalf("the refused start appended %d events", n-before)
	}
}

func TestForkRefusesAReservedIDLikeStart(t *testing.T) {
	var ran atomic.Int64
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, gated("", &ran))
	id, _ := h.rt.Start(h.ctx(), "gated", nil)
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.Start(h.ctx(), "gated", nil, loom.WithExecutionID("__loom_x")); err == nil {
		t.Fatal("Start took a reserved id")
	}
	if _, err := h.rt.Fork(h.ctx(), id, st.Sequence, loom.ForkID("__loom_x")); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("fork to a reserved id = %v", err)
	}
	if evs, _ := store.Read(h.ctx(), h.events, "__loom_x"); len(evs) != 0 {
		t.Fatalf("the refused fork wrote %d events", len(evs))
	}
}

func TestSpec5_AnInDoubtParkRefusesANonVerdictAsAPayloadValidationError(t *testing.T) {
	for _, typ := range []string{fold.GateInDoubt, "approve", "__loom_other__"} {
		t.Run(typ, func(t *testing.T) {
			h, id := parkedInDoubt(t)
			before := len(h.log(id))
			err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: typ})
			var ve *loom.ResumePayloadValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("resume %s at an in-doubt park = %v, want *ResumePayloadValidationError", typ, err)
			}
			if n := len(h.log(id)); n != before {
				t.Fatalf("appended %d", n-before)
			}
		})
	}
}

// parkedInDoubt leaves an execution parked in doubt: a non-idempotent step
// whose start is durable and whose outcome was lost with its process.
func parkedInDoubt(t *testing.T) (*harness, string) {
	t.Helper()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	flow := loom.NewFlow("pay", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Execute(&loom.Task{ID: "charge", NonIdempotent: true, Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return 1, ctx.Err()
		}}, nil)
		return 1, err
	})
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, flow)
	id, _ := h.rt.Start(h.ctx(), "pay", nil)
	<-entered    // STEP_STARTED is durable before the effect runs
	h.rt.Close() // the process dies with the charge in flight
	close(release)
	rt := h.open(flow)
	h.rt = rt
	if _, err := rt.Recover(h.ctx()); err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitForSuspend(h.ctx(), id)
	if err != nil || st.Variables.SuspendedOn.On != fold.GateInDoubt {
		t.Fatalf("%+v %v", st.Variables.SuspendedOn, err)
	}
	return h, id
}

func TestSpec5_EmitValidatorsReadMemberNamesExactly(t *testing.T) {
	cases := map[string]string{
		"a reserved id under the exact name": `{"decisionId":"__loom_q","choice":1,"DecisionID":"ok"}`,
		"a duplicate member name":            `{"decisionId":"ok","choice":1,"decisionId":"__loom_q"}`,
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			var emitErr error
			flow := loom.NewFlow("emit", func(ctx *loom.Context, _ struct{}) (int, error) {
				emitErr = ctx.Emit(event.DecisionRecorded, json.RawMessage(payload))
				return 1, nil
			})
			h := newHarness(t, flow)
			id, _ := h.rt.Start(h.ctx(), "emit", nil)
			if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(emitErr, loom.ErrEmitRefused) {
				t.Fatalf("emit %s = %v, want refused", payload, emitErr)
			}
			if n := countType(h.log(id), event.DecisionRecorded); n != 0 {
				t.Fatalf("%d decisions appended", n)
			}
		})
	}
}

func TestLoadStateAtTheLargestSequenceIsTheEndOfTheLog(t *testing.T) {
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "f", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.rt.LoadStateAt(h.ctx(), id, math.MaxInt64)
	if err != nil || st.Sequence != res.State.Sequence || st.Status != fold.StatusCompleted {
		t.Fatalf("state at MaxInt64: %d %s %v", st.Sequence, st.Status, err)
	}
	if _, err := h.rt.LoadStateAt(h.ctx(), id, -1); err == nil {
		t.Fatal("a negative sequence was accepted")
	}
}

func TestADR0113_ARenamedGateParksOnTheDivergedGate(t *testing.T) {
	twoGates := func(first string) *loom.Flow {
		return loom.NewFlow("gates", func(ctx *loom.Context, _ struct{}) (string, error) {
			a, err := loom.Suspend[string](ctx, first)
			if err != nil {
				return "", err
			}
			b, err := loom.Suspend[string](ctx, "second")
			return a + b, err
		})
	}
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, twoGates("approve"))
	id, _ := h.rt.Start(h.ctx(), "gates", nil)
	resume(t, h, id, "approve", `"yes"`)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close()
	renamed := h.open(twoGates("approval"))
	if err := renamed.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "second", Payload: json.RawMessage(`"!"`)}); err != nil {
		t.Fatal(err)
	}
	st, err := renamed.WaitForSuspend(h.ctx(), id)
	if err != nil || st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.On != fold.GateDiverged {
		t.Fatalf("park %+v: %v", st.Variables.SuspendedOn, err)
	}
	log := h.log(id)
	reason := string(log[len(log)-1].Payload)
	if !strings.Contains(reason, `\"approval\"`) || !strings.Contains(reason, `\"approve\"`) {
		t.Fatalf("the divergence reason %s does not name both gates", reason)
	}
}

// What the fold would read as malformed never enters the log: a step that
// returns it fails, an emit of it is refused, and the drive goes on.
func TestInexactJSONFailsTheStepAndNeverReachesTheLog(t *testing.T) {
	var emitErr error
	flow := loom.NewFlow("inexact", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := ctx.Run("dup", func(context.Context) (any, error) { return json.RawMessage(`{"a":"\udc00"}`), nil })
		var se *loom.StepError
		if !errors.As(err, &se) {
			return "", errors.New("want a step error")
		}
		emitErr = ctx.Emit("thing.happened", json.RawMessage(`{"who":1,"who":2}`))
		return "went on", nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "inexact", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"went on"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	if !errors.Is(emitErr, loom.ErrEmitRefused) {
		t.Fatalf("emit = %v", emitErr)
	}
	if fr := res.State.Frames["dup"]; fr.Status != fold.FrameFailed {
		t.Fatalf("frame %s", fr.Status)
	}
	for _, e := range h.log(id) {
		if err := event.ValidateExact("payload", e.Payload); err != nil {
			t.Fatalf("sequence %d: %v", e.Sequence, err)
		}
	}
}

// A crashed execution is re-driven by the runtime itself when the next
// process starts: no Recover call, no ResumeAuthenticator asked.
func TestRecoveryIsAutomaticAndAKernelAct(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	release, entered := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	flow := loom.NewFlow("long", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Run("work", func(c context.Context) (any, error) {
			if runs.Add(1) == 1 {
				close(entered)
				select { // the first process dies in here
				case <-release:
				case <-c.Done():
				}
				return nil, c.Err()
			}
			return 1, nil
		})
		return 1, err
	})
	refuseAll := authenticatorFunc(func() error { return errors.New("no caller is allowed") })
	h := newHarnessWith(t, loom.Config{Clock: clock, ResumeAuthenticator: refuseAll}, flow)
	id, _ := h.rt.Start(h.ctx(), "long", nil)
	<-entered
	h.rt.Close()
	close(release)
	clock.advance(time.Minute) // past a lease TTL: nothing else drives it
	auto := true
	h.autoRecover = &auto
	next := h.open(flow)
	res, err := next.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "1" || runs.Load() != 2 {
		t.Fatalf("%s %v after %d runs", res.Output, err, runs.Load())
	}
	if n := countType(h.log(id), event.ExecutionRecovered); n != 1 {
		t.Fatalf("%d EXECUTION_RECOVERED", n)
	}
	if n := countType(h.log(id), event.ApprovalGranted); n != 0 {
		t.Fatal("recovery went through the authenticator")
	}
}

type authenticatorFunc func() error

func (f authenticatorFunc) Authenticate(context.Context, string, loom.ResumeEvent) (json.RawMessage, error) {
	return nil, f()
}

// A resume refused after a drive aborted (the execution is running in its
// log, so a gate answer is refused) claims the execution for a moment; the
// abort it leaves behind is still the answer a waiter gets, not a wait
// that never ends.
func TestARefusedResumeKeepsTheAbortAWaiterHears(t *testing.T) {
	disk := &diskFull{EventStore: memstore.NewEventStore()}
	release := make(chan struct{})
	flow := loom.NewFlow("w", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Run("step", func(context.Context) (any, error) { <-release; return 1, nil })
		return 1, err
	})
	rt, err := loom.New(loom.Config{Events: disk, Flows: []*loom.Flow{flow}, Durability: loom.StepDurable,
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := testCtx(t)
	id, err := rt.Start(ctx, "w", nil, loom.WithExecutionID("aborts"))
	if err != nil {
		t.Fatal(err)
	}
	disk.full.Store(true)
	close(release)
	var aborted *loom.DriveAbortedError
	if _, err := rt.WaitForSettled(ctx, id); !errors.As(err, &aborted) {
		t.Fatalf("wait = %v, want *DriveAbortedError", err)
	}
	disk.full.Store(false)
	before, _ := store.Read(ctx, disk, id)
	err = rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve"})
	var refused *loom.ResumeRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("resume of a running execution = %v, want *ResumeRefusedError", err)
	}
	if after, _ := store.Read(ctx, disk, id); len(after) != len(before) {
		t.Fatalf("the refused resume appended: %d -> %d events", len(before), len(after))
	}
	if _, err := rt.WaitForSettled(ctx, id); !errors.As(err, &aborted) {
		t.Fatalf("wait after the refused resume = %v, want the *DriveAbortedError still", err)
	}
}
