package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
)

// sleeps records the delays Retry asked for, instead of waiting them.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

// flaky fails its first n attempts, recording the idempotency key of each.
type flaky struct {
	mu   sync.Mutex
	fail int
	keys []string
}

func (f *flaky) Func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, ec.IdempotencyKey)
	if len(f.keys) <= f.fail {
		return nil, fmt.Errorf("flaky %d", len(f.keys))
	}
	return json.RawMessage(`"ok"`), nil
}

func (f *flaky) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

func retryRig(t *testing.T, fn effect.Func, policy middleware.RetryPolicy) (*rig, *counted, *outcome) {
	t.Helper()
	c := &counted{fn: fn}
	flow, o := gatedFlow("retry", &loom.Task{ID: "fetch", ToolID: "http.get"}, map[string]int{"n": 1})
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"http.get": c.Func}),
		Middleware: []effect.Middleware{middleware.Retry(policy)}}, flow)
	return r, c, o
}

// Allow: an attempt that succeeds passes through; nothing is recorded and
// nothing waited.
func TestRetryPassesASuccessThrough(t *testing.T) {
	s := &sleeps{}
	r, c, _ := retryRig(t, (&flaky{}).Func, middleware.RetryPolicy{Sleep: s.Sleep})
	r.start("retry", "x", nil)
	r.parked("x")
	if got := types(r.log("x")); !reflect.DeepEqual(got, []string{event.ExecutionStarted, event.StepStarted,
		event.StepCompleted, event.ExecutionSuspended}) {
		t.Fatalf("log %v", got)
	}
	if c.n.Load() != 1 || len(s.got()) != 0 {
		t.Fatalf("calls %d, sleeps %v", c.n.Load(), s.got())
	}
}

// Trigger: two failures then a success are three attempts of one step id,
// each with its own idempotency key, the retries recorded as STEP_RETRYING
// with the attempt about to run and the backoff waited; the replay serves
// the step and records no retry again.
func TestRetryRecordsEachAttemptUnderANewIdempotencyKey(t *testing.T) {
	s := &sleeps{}
	f := &flaky{fail: 2}
	r, c, o := retryRig(t, f.Func, middleware.RetryPolicy{Sleep: s.Sleep})
	r.start("retry", "x", nil)
	r.parked("x")
	if got, want := f.seen(), []string{"x/fetch/1", "x/fetch/2", "x/fetch/3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	want := []string{
		`{"attempt":2,"delayMs":100,"error":{"message":"flaky 1"},"stepId":"fetch"}`,
		`{"attempt":3,"delayMs":200,"error":{"message":"flaky 2"},"stepId":"fetch"}`,
	}
	if got := r.payloads("x", event.StepRetrying); !reflect.DeepEqual(got, want) {
		t.Fatalf("STEP_RETRYING\n got %v\nwant %v", got, want)
	}
	if got := s.got(); !reflect.DeepEqual(got, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("slept %v", got)
	}
	if got := r.payloads("x", event.StepStarted); len(got) != 1 {
		t.Fatalf("one STEP_STARTED per step run, got %v", got)
	}
	if out, err := o.get(); err != nil || string(out) != `"ok"` {
		t.Fatalf("step returned %s, %v", out, err)
	}
	res := replayKeepsRingFacts(t, r, "x", c, event.StepRetrying, event.StepStarted)
	if fr := res.State.Frames["fetch"]; fr.Attempt != 3 || string(res.Output) != `"ok"` {
		t.Fatalf("frame %+v, output %s", fr, res.Output)
	}
}

// Deny: when attempts run out the step fails with the last error,
// unchanged, after MaxAttempts-1 recorded retries.
func TestRetryGivesUpAfterMaxAttemptsWithTheLastError(t *testing.T) {
	s := &sleeps{}
	r, c, o := retryRig(t, (&flaky{fail: 99}).Func, middleware.RetryPolicy{MaxAttempts: 4, Sleep: s.Sleep,
		Backoff: func(int64) time.Duration { return time.Second }})
	r.start("retry", "x", nil)
	r.parked("x")
	if c.n.Load() != 4 || len(r.payloads("x", event.StepRetrying)) != 3 {
		t.Fatalf("calls %d, retries %v", c.n.Load(), r.payloads("x", event.StepRetrying))
	}
	failed := r.payloads("x", event.StepFailed)
	if len(failed) != 1 || failed[0] != `{"error":{"message":"flaky 4"},"stepId":"fetch"}` {
		t.Fatalf("STEP_FAILED %v", failed)
	}
	var se *loom.StepError
	if _, err := o.get(); !errors.As(err, &se) || se.Err.Error() != "flaky 4" {
		t.Fatalf("step error %v", err)
	}
}

// A typed failure on a declared channel is an answer, not a fault, and the
// end of the step's context is final: neither is retried.
func TestRetryNeverRetriesATypedFailureOrACancellation(t *testing.T) {
	for name, fail := range map[string]error{
		"typed":     loom.Fail("declined", map[string]string{"why": "card"}),
		"cancelled": fmt.Errorf("upstream: %w", context.Canceled),
		"deadline":  context.DeadlineExceeded,
		"denied":    &effect.CapabilityDeniedError{ToolID: "t", By: "grants"},
	} {
		t.Run(name, func(t *testing.T) {
			c := &counted{fn: func(*effect.Context, json.RawMessage) (json.RawMessage, error) { return nil, fail }}
			flow, _ := gatedFlow("retry", &loom.Task{ID: "pay", ToolID: "pay",
				Errors: map[string]string{"declined": `{"type":"object"}`}}, nil)
			r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"pay": c.Func}),
				Middleware: []effect.Middleware{middleware.Retry(middleware.RetryPolicy{Sleep: (&sleeps{}).Sleep})}}, flow)
			r.start("retry", "x", nil)
			r.parked("x")
			if c.n.Load() != 1 || len(r.payloads("x", event.StepRetrying)) != 0 {
				t.Fatalf("retried: %d calls", c.n.Load())
			}
		})
	}
}

// A wait cut short by the step's context ends the loop with
// *RetryInterruptedError, which unwraps to what interrupted it.
func TestRetryInterruptedWhileWaiting(t *testing.T) {
	interrupt := func(context.Context, time.Duration) error { return context.Canceled }
	r, c, o := retryRig(t, (&flaky{fail: 5}).Func, middleware.RetryPolicy{Sleep: interrupt})
	r.start("retry", "x", nil)
	r.parked("x")
	var ri *middleware.RetryInterruptedError
	if _, err := o.get(); !errors.As(err, &ri) || !errors.Is(err, context.Canceled) || ri.Attempt != 1 ||
		ri.Cause.Error() != "flaky 1" {
		t.Fatalf("err %v", err)
	}
	if c.n.Load() != 1 || len(r.payloads("x", event.StepRetrying)) != 1 {
		t.Fatalf("calls %d, retries %v", c.n.Load(), r.payloads("x", event.StepRetrying))
	}
}

func TestDefaultRetryableRefusesTheRingsPermanentRefusals(t *testing.T) {
	cases := map[error]bool{
		errors.New("503"):                                                   true,
		&middleware.QuotaExceededError{}:                                    false,
		&middleware.SafetyBlockedError{}:                                    false,
		&middleware.UsageError{}:                                            false,
		&middleware.ClaimCheckError{}:                                       false,
		&middleware.RetryInterruptedError{}:                                 false,
		&middleware.SecretError{Err: middleware.ErrUnknownSecret}:           false,
		&middleware.SecretError{Err: errors.New("vault: timeout")}:          true,
		&middleware.ClaimCheckError{Reason: "put", Err: errors.New("disk")}: true,
		fmt.Errorf("wrapped: %w", &middleware.QuotaExceededError{}):         false,
		fmt.Errorf("wrapped: %w", loom.Fail("c", nil)):                      false,
		&loom.StepError{Err: context.Canceled}:                              false,
		nil:                                                                 false,
	}
	for err, want := range cases {
		if got := middleware.DefaultRetryable(err); got != want {
			t.Errorf("DefaultRetryable(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestExponentialBackoffDoublesUpToItsCapWithoutOverflow(t *testing.T) {
	b := middleware.ExponentialBackoff(100*time.Millisecond, time.Second)
	for attempt, want := range map[int64]time.Duration{0: 100 * time.Millisecond, 1: 100 * time.Millisecond,
		2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 1 << 62: time.Second} {
		if got := b(attempt); got != want {
			t.Errorf("backoff(%d) = %v, want %v", attempt, got, want)
		}
	}
}

// MaxRetryAttempts is the loop's limit, whatever the policy asks.
func TestRetryAttemptsAreBoundedByMaxRetryAttempts(t *testing.T) {
	r, c, _ := retryRig(t, (&flaky{fail: 1 << 20}).Func, middleware.RetryPolicy{MaxAttempts: 1 << 20,
		Sleep: (&sleeps{}).Sleep, Backoff: func(int64) time.Duration { return 0 }})
	r.start("retry", "x", nil)
	r.parked("x")
	if c.n.Load() != middleware.MaxRetryAttempts {
		t.Fatalf("%d attempts, want %d", c.n.Load(), middleware.MaxRetryAttempts)
	}
}

// hinted fails once with a retry-after hint.
type hinted struct {
	mu    sync.Mutex
	calls int
	hint  time.Duration
}

type hintErr struct{ d time.Duration }

func (e hintErr) Error() string             { return "slow down" }
func (e hintErr) RetryDelay() time.Duration { return e.d }

func (h *hinted) Func(*effect.Context, json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls == 1 {
		return nil, fmt.Errorf("wrapped: %w", hintErr{h.hint})
	}
	return json.RawMessage(`"ok"`), nil
}

// A failure's own hint (a Retry-After) is waited when it is longer than
// the backoff, capped at MaxRetryHint; a shorter hint leaves the backoff.
func TestRetryWaitsAtLeastTheFailuresHint(t *testing.T) {
	for _, c := range []struct {
		hint, want time.Duration
	}{
		{7 * time.Second, 7 * time.Second},
		{time.Millisecond, 100 * time.Millisecond},
		{time.Hour, middleware.MaxRetryHint},
	} {
		s := &sleeps{}
		r, _, o := retryRig(t, (&hinted{hint: c.hint}).Func, middleware.RetryPolicy{Sleep: s.Sleep})
		r.start("retry", "x", nil)
		r.parked("x")
		if got := s.got(); !reflect.DeepEqual(got, []time.Duration{c.want}) {
			t.Errorf("hint %v: slept %v, want [%v]", c.hint, got, c.want)
		}
		if out, err := o.get(); err != nil || string(out) != `"ok"` {
			t.Fatalf("step returned %s, %v", out, err)
		}
	}
}
