package store_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// invalidField returns a check that err is an *event.InvalidEnvelopeError
// of field.
func invalidField(field string) func(error) bool {
	return func(err error) bool {
		var ie *event.InvalidEnvelopeError
		return errors.As(err, &ie) && ie.Field == field
	}
}

func TestValidateTimer(t *testing.T) {
	ok := func(err error) bool { return err == nil }
	atCap := json.RawMessage(`"` + strings.Repeat("x", store.MaxTimerPayloadBytes-2) + `"`)
	over := json.RawMessage(`"` + strings.Repeat("x", store.MaxTimerPayloadBytes-1) + `"`)
	cases := []struct {
		name  string
		timer store.Timer
		check func(error) bool
	}{
		{"minimal", store.Timer{Key: "k"}, ok},
		{"full", store.Timer{Key: "k", ExecutionID: "e", WakeAt: -5, Payload: json.RawMessage(`{"a":1}`)}, ok},
		{"payload at the cap", store.Timer{Key: "k", Payload: atCap}, ok},
		{"empty key", store.Timer{}, invalidField("key")},
		{"control in key", store.Timer{Key: "k\x00"}, invalidField("key")},
		{"bad execution id", store.Timer{Key: "k", ExecutionID: "e\xff"}, invalidField("executionId")},
		{"payload not UTF-8", store.Timer{Key: "k", Payload: json.RawMessage("\"\xff\"")}, invalidField("payload")},
		{"payload not JSON", store.Timer{Key: "k", Payload: json.RawMessage(`{`)}, invalidField("payload")},
		{"payload over the cap", store.Timer{Key: "k", Payload: over}, func(err error) bool {
			var pe *event.PayloadTooLargeError
			return errors.As(err, &pe) && pe.Field == "payload" && pe.Size == len(over) && pe.Limit == store.MaxTimerPayloadBytes
		}},
	}
	for _, c := range cases {
		if err := store.ValidateTimer(c.timer); !c.check(err) {
			t.Errorf("%s: ValidateTimer = %v", c.name, err)
		}
	}
}

func TestValidateLease(t *testing.T) {
	if err := store.ValidateLeaseIDs("e", "o"); err != nil {
		t.Fatalf("ValidateLeaseIDs(e, o) = %v", err)
	}
	if err := store.ValidateLeaseGrant("e", "o", math.MaxInt64-10, 10); err != nil {
		t.Fatalf("ValidateLeaseGrant at the int64 edge = %v", err)
	}
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"ids: empty execution id", store.ValidateLeaseIDs("", "o"), "executionId"},
		{"ids: bad owner", store.ValidateLeaseIDs("e", "o\n"), "owner"},
		{"grant: empty owner", store.ValidateLeaseGrant("e", "", 0, 1), "owner"},
		{"grant: zero ttl", store.ValidateLeaseGrant("e", "o", 0, 0), "ttlMs"},
		{"grant: negative ttl", store.ValidateLeaseGrant("e", "o", 0, -1), "ttlMs"},
		{"grant: overflow", store.ValidateLeaseGrant("e", "o", math.MaxInt64-9, 10), "ttlMs"},
	}
	for _, c := range cases {
		if !invalidField(c.field)(c.err) {
			t.Errorf("%s: %v, want an *event.InvalidEnvelopeError of %q", c.name, c.err, c.field)
		}
	}
}
