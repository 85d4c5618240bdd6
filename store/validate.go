package store

import (
	"context"

	"github.com/loom-kernel/loom/event"
)

// ValidateAppend checks a batch before any byte is written: non-empty, every
// envelope valid under lim and of executionID, sequences contiguous from
// expected. Every store calls it first, so bad input never half-appends.
func ValidateAppend(executionID string, expected int64, events []event.Envelope, lim event.Limits) error {
	if err := event.ValidateID("executionId", executionID); err != nil {
		return &InvalidAppendError{Index: -1, Reason: "bad execution id", Err: err}
	}
	if expected < 0 {
		return &InvalidAppendError{Index: -1, Reason: "negative expected sequence"}
	}
	if len(events) == 0 {
		return &InvalidAppendError{Index: -1, Reason: "empty batch"}
	}
	for i, e := range events {
		if e.ExecutionID != executionID {
			return &InvalidAppendError{Index: i, Reason: "envelope belongs to another execution"}
		}
		if e.Sequence != expected+int64(i) {
			return &InvalidAppendError{Index: i, Reason: "sequences must be contiguous from the expected sequence"}
		}
		if err := event.Validate(e, lim); err != nil {
			return &InvalidAppendError{Index: i, Reason: "envelope refused", Err: err}
		}
	}
	return nil
}

// ValidateRefName refuses an empty ref name, one with control characters,
// invalid UTF-8, or longer than event.MaxIDBytes.
func ValidateRefName(name string) error { return event.ValidateID("ref", name) }

// Read returns the whole log of executionID.
func Read(ctx context.Context, s EventStore, executionID string) ([]event.Envelope, error) {
	return s.ReadFrom(ctx, executionID, 0)
}

// ReadRange returns the events with from <= sequence < to, using the store's
// RangeReader when it has one.
func ReadRange(ctx context.Context, s EventStore, executionID string, from, to int64) ([]event.Envelope, error) {
	if rr, ok := s.(RangeReader); ok {
		return rr.ReadRange(ctx, executionID, from, to)
	}
	evs, err := s.ReadFrom(ctx, executionID, from)
	if err != nil {
		return nil, err
	}
	for i, e := range evs {
		if e.Sequence >= to {
			return evs[:i], nil
		}
	}
	return evs, nil
}
