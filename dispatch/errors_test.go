package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
)

type verdict bool

func (v verdict) Error() string   { return "classified" }
func (v verdict) Retryable() bool { return bool(v) }

func TestIsRetryable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unknown failure", errors.New("connection reset"), true},
		{"journal error", &loom.JournalError{ExecutionID: "x", Err: errors.New("disk full")}, true},
		{"busy refusal", &loom.ResumeRefusedError{Reason: loom.RefusedBusy}, true},
		{"start in flight", &dispatch.StartInFlightError{ExecutionID: "x"}, true},
		{"Retryable true wins over a wrapped refusal", fmt.Errorf("%w: %w", verdict(true), loom.ErrUnknownFlow), true},
		{"Retryable false wins over a transient cause", fmt.Errorf("wrapped: %w", verdict(false)), false},
		{"cancelled", fmt.Errorf("post: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"gate mismatch", &loom.ResumeRefusedError{Reason: loom.RefusedGateMismatch}, false},
		{"terminal", fmt.Errorf("x: %w", &loom.ResumeRefusedError{Reason: loom.RefusedTerminal}), false},
		{"payload invalid", &loom.ResumePayloadValidationError{Gate: "g"}, false},
		{"denied", &loom.ExecutionDeniedError{Action: "start"}, false},
		{"unknown flow", fmt.Errorf("%w: %q", loom.ErrUnknownFlow, "f"), false},
		{"not found", loom.ErrExecutionNotFound, false},
		{"runtime closed", loom.ErrRuntimeClosed, false},
		{"invalid envelope", event.ValidateID("id", ""), false},
		{"invalid package", &dispatch.PackageError{Field: "x", Reason: "y"}, false},
		{"circuit open", &dispatch.CircuitOpenError{Target: "t", State: dispatch.BreakerOpen, Err: errors.New("transient")}, false},
		{"restarts exhausted", &dispatch.RestartsExhaustedError{ExecutionID: "x", Attempts: 4, Err: errors.New("transient")}, false},
	}
	for _, c := range cases {
		if got := dispatch.IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable = %v, want %v", c.name, got, c.want)
		}
	}
}
