package store

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// MaxTimerPayloadBytes caps a timer's payload in every TimerStore:
// event.DefaultMaxPayloadBytes, whatever limits a store applies to appends
// (a timer payload is written by the kernel and is small; the cap only
// bounds a bad caller).
const MaxTimerPayloadBytes = event.DefaultMaxPayloadBytes

// ValidateTimer refuses a timer TimerStore.Put must not store, before
// anything is written: a key event.ValidateID refuses, or a non-empty
// execution id it refuses (its *event.InvalidEnvelopeError, Field "key" or
// "executionId"); a payload over MaxTimerPayloadBytes (an
// *event.PayloadTooLargeError, Field "payload"); a non-empty payload that
// is not valid UTF-8 JSON (an *event.InvalidEnvelopeError, Field
// "payload"). An empty payload is valid: it is stored as absent.
func ValidateTimer(t Timer) error {
	if err := event.ValidateID("key", t.Key); err != nil {
		return err
	}
	if t.ExecutionID != "" {
		if err := event.ValidateID("executionId", t.ExecutionID); err != nil {
			return err
		}
	}
	switch p := t.Payload; {
	case len(p) == 0:
		return nil
	case len(p) > MaxTimerPayloadBytes:
		return &event.PayloadTooLargeError{Field: "payload", Size: len(p), Limit: MaxTimerPayloadBytes}
	case !utf8.Valid(p):
		return &event.InvalidEnvelopeError{Field: "payload", Reason: "not valid UTF-8"}
	case !json.Valid(p):
		return &event.InvalidEnvelopeError{Field: "payload", Reason: "not valid JSON"}
	}
	return nil
}

// ValidateLeaseIDs refuses, with the *event.InvalidEnvelopeError of
// event.ValidateID (Field "executionId" or "owner"), a lease's execution
// id or owner: what LeaseStore.Release checks before it changes anything.
func ValidateLeaseIDs(executionID, owner string) error {
	if err := event.ValidateID("executionId", executionID); err != nil {
		return err
	}
	return event.ValidateID("owner", owner)
}

// ValidateLeaseGrant refuses what ValidateLeaseIDs refuses, and, with an
// *event.InvalidEnvelopeError of Field "ttlMs", a ttlMs below 1 or a
// now+ttlMs that int64 cannot hold: what LeaseStore.Acquire and Renew
// check before they change anything.
func ValidateLeaseGrant(executionID, owner string, now, ttlMs int64) error {
	if err := ValidateLeaseIDs(executionID, owner); err != nil {
		return err
	}
	if ttlMs < 1 {
		return &event.InvalidEnvelopeError{Field: "ttlMs", Reason: "not positive"}
	}
	if now > math.MaxInt64-ttlMs {
		return &event.InvalidEnvelopeError{Field: "ttlMs", Reason: "now+ttlMs overflows int64"}
	}
	return nil
}
