package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// refusalExec is the execution every refusal case starts from; it holds
// refusalLength events when the refused append is tried.
const (
	refusalExec   = "exec-refuse"
	refusalLength = 3
)

// refusal is one Append the store must refuse without writing anything.
type refusal struct {
	name      string
	exec      string // executionID argument; refusalExec when empty, unless emptyExec
	emptyExec bool   // pass "" as the executionID argument
	expected  int64
	batch     func() []event.Envelope
	check     func(t *testing.T, err error)
	touched   []string // other executions that must stay empty
}

// refusals: each case appends to a store holding three events of
// refusalExec, then checks the typed error, that nothing was written, and
// that a valid append at sequence 3 still works.
func (k eventKit) refusals(t *testing.T) {
	for _, c := range k.refusalCases() {
		t.Run(c.name, func(t *testing.T) {
			s := k.open(t)
			base := batchAt(refusalExec, 0, refusalLength)
			mustAppend(t, s, refusalExec, 0, base)
			exec := c.exec
			if exec == "" && !c.emptyExec {
				exec = refusalExec
			}
			err := s.Append(context.Background(), exec, c.expected, c.batch())
			if err == nil {
				t.Fatal("Append succeeded; want a refusal")
			}
			c.check(t, err)
			assertLog(t, s, refusalExec, base)
			for _, other := range append([]string{exec}, c.touched...) {
				if other == refusalExec {
					continue
				}
				if evs, err := s.ReadFrom(context.Background(), other, 0); err == nil && len(evs) != 0 {
					t.Fatalf("refused append wrote %d events to %q", len(evs), other)
				}
			}
			assertListed(t, s, refusalExec)
			next := batchAt(refusalExec, refusalLength, 2)
			mustAppend(t, s, refusalExec, refusalLength, next)
			assertLog(t, s, refusalExec, append(base, next...))
		})
	}
}

// refusalCases lists every refusal of Append the kit checks.
func (k eventKit) refusalCases() []refusal {
	at := func(seq int64, edit func(e *event.Envelope)) func() []event.Envelope {
		return func() []event.Envelope {
			e := envelopeAt(refusalExec, seq)
			if edit != nil {
				edit(&e)
			}
			return []event.Envelope{e}
		}
	}
	over := stringPayload(k.payloadCap + 1)
	return []refusal{
		{name: "DuplicateAtOldExpected", expected: 1, batch: at(1, nil), check: conflict(refusalExec, 1, 3)},
		{name: "DuplicateAtZero", expected: 0, batch: at(0, nil), check: conflict(refusalExec, 0, 3)},
		{name: "DuplicateBatchOverlappingEnd", expected: 2, batch: func() []event.Envelope { return batchAt(refusalExec, 2, 3) },
			check: conflict(refusalExec, 2, 3)},
		{name: "GapBeyondEnd", expected: 5, batch: at(5, nil), check: conflict(refusalExec, 5, 3)},
		{name: "GapOfOne", expected: 4, batch: at(4, nil), check: conflict(refusalExec, 4, 3)},
		{name: "NonContiguousBatch", expected: 3, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt(refusalExec, 3), envelopeAt(refusalExec, 5)}
		}, check: invalidAt(1, nil)},
		{name: "RepeatedSequenceInBatch", expected: 3, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt(refusalExec, 3), envelopeAt(refusalExec, 3)}
		}, check: invalidAt(1, nil)},
		{name: "BatchNotStartingAtExpected", expected: 3, batch: at(4, nil), check: invalidAt(0, nil)},
		{name: "EnvelopeOfAnotherExecution", expected: 3, batch: at(3, func(e *event.Envelope) { e.ExecutionID = "exec-other" }),
			check: invalidAt(0, nil), touched: []string{"exec-other"}},
		{name: "MixedExecutionsInBatch", expected: 3, batch: func() []event.Envelope {
			other := envelopeAt("exec-other", 4)
			return []event.Envelope{envelopeAt(refusalExec, 3), other}
		}, check: invalidAt(1, nil), touched: []string{"exec-other"}},
		{name: "EmptyBatch", expected: 3, batch: func() []event.Envelope { return []event.Envelope{} }, check: invalidAt(-1, nil)},
		{name: "NilBatch", expected: 3, batch: func() []event.Envelope { return nil }, check: invalidAt(-1, nil)},
		{name: "NegativeExpected", expected: -1, batch: at(-1, nil), check: invalidAt(-1, nil)},
		{name: "EmptyExecutionID", emptyExec: true, expected: 0, batch: func() []event.Envelope {
			e := envelopeAt("", 0)
			return []event.Envelope{e}
		}, check: invalidField("executionId")},
		{name: "EmptyEventID", expected: 3, batch: at(3, func(e *event.Envelope) { e.ID = "" }), check: invalidField("id")},
		{name: "EmptyEventType", expected: 3, batch: at(3, func(e *event.Envelope) { e.Type = "" }), check: invalidField("eventType")},
		{name: "NULInExecutionID", exec: "exec\x00nul", expected: 0, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt("exec\x00nul", 0)}
		}, check: invalidField("executionId")},
		{name: "ControlCharInExecutionID", exec: "exec\nline", expected: 0, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt("exec\nline", 0)}
		}, check: invalidField("executionId")},
		{name: "InvalidUTF8InExecutionID", exec: "exec\xff", expected: 0, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt("exec\xff", 0)}
		}, check: invalidField("executionId")},
		{name: "OverlongExecutionID", exec: strings.Repeat("x", event.MaxIDBytes+1), expected: 0, batch: func() []event.Envelope {
			return []event.Envelope{envelopeAt(strings.Repeat("x", event.MaxIDBytes+1), 0)}
		}, check: invalidField("executionId")},
		{name: "NULInEventID", expected: 3, batch: at(3, func(e *event.Envelope) { e.ID = "evt\x00" }), check: invalidField("id")},
		{name: "DELInEventID", expected: 3, batch: at(3, func(e *event.Envelope) { e.ID = "evt\x7f" }), check: invalidField("id")},
		{name: "C1ControlInEventID", expected: 3, batch: at(3, func(e *event.Envelope) { e.ID = "evt\u0085" }), check: invalidField("id")},
		{name: "InvalidUTF8InEventID", expected: 3, batch: at(3, func(e *event.Envelope) { e.ID = "evt\xc3\x28" }), check: invalidField("id")},
		{name: "ControlCharInWorkflowID", expected: 3, batch: at(3, func(e *event.Envelope) { e.WorkflowID = "wf\t" }), check: invalidField("workflowId")},
		{name: "InvalidUTF8InEventType", expected: 3, batch: at(3, func(e *event.Envelope) { e.Type = "T\xfe" }), check: invalidField("eventType")},
		{name: "NegativeTimestamp", expected: 3, batch: at(3, func(e *event.Envelope) { e.Timestamp = -1 }), check: invalidField("timestamp")},
		{name: "InvalidUTF8InPayload", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = json.RawMessage("\"\xff\"") }),
			check: invalidField("payload")},
		{name: "MalformedJSONPayload", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = json.RawMessage(`{"a":`) }),
			check: invalidField("payload")},
		{name: "SingleQuotedJSONPayload", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = json.RawMessage(`{'a':1}`) }),
			check: invalidField("payload")},
		{name: "NaNPayload", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = json.RawMessage(`NaN`) }),
			check: invalidField("payload")},
		{name: "TrailingDataPayload", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = json.RawMessage(`{} {}`) }),
			check: invalidField("payload")},
		{name: "MalformedJSONInSecondEnvelope", expected: 3, batch: func() []event.Envelope {
			evs := batchAt(refusalExec, 3, 3)
			evs[1].Payload = json.RawMessage(`[1,`)
			return evs
		}, check: invalidAt(1, invalidField("payload"))},
		{name: "MalformedJSONMetadata", expected: 3, batch: at(3, func(e *event.Envelope) {
			e.Metadata = map[string]json.RawMessage{"k": json.RawMessage(`{`)}
		}), check: invalidField("metadata.k")},
		{name: "PayloadOverCap", expected: 3, batch: at(3, func(e *event.Envelope) { e.Payload = over }),
			check: tooLarge("payload", k.payloadCap+1, k.payloadCap)},
		{name: "MetadataOverCap", expected: 3, batch: at(3, func(e *event.Envelope) {
			e.Metadata = map[string]json.RawMessage{"big": over}
		}), check: tooLarge("metadata.big", k.payloadCap+1, k.payloadCap)},
	}
}

// conflict checks a *store.SequenceConflictError with the given fields.
func conflict(exec string, expected, actual int64) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrSequenceConflict) {
			t.Fatalf("error %v does not match store.ErrSequenceConflict", err)
		}
		var ce *store.SequenceConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *store.SequenceConflictError", err)
		}
		if ce.ExecutionID != exec || ce.Expected != expected || ce.Actual != actual {
			t.Fatalf("SequenceConflictError{%q, Expected %d, Actual %d}, want {%q, %d, %d}",
				ce.ExecutionID, ce.Expected, ce.Actual, exec, expected, actual)
		}
	}
}

// invalidAt checks a *store.InvalidAppendError at index (-1: the batch),
// then runs more, if any, on the same error.
func invalidAt(index int, more func(*testing.T, error)) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalidAppend) {
			t.Fatalf("error %v does not match store.ErrInvalidAppend", err)
		}
		var ie *store.InvalidAppendError
		if !errors.As(err, &ie) {
			t.Fatalf("error %v is not a *store.InvalidAppendError", err)
		}
		if ie.Index != index {
			t.Fatalf("InvalidAppendError.Index = %d, want %d (%v)", ie.Index, index, err)
		}
		if more != nil {
			more(t, err)
		}
	}
}

// invalidField checks a *store.InvalidAppendError wrapping an
// *event.InvalidEnvelopeError about field.
func invalidField(field string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalidAppend) || !errors.Is(err, event.ErrInvalidEnvelope) {
			t.Fatalf("error %v does not match both store.ErrInvalidAppend and event.ErrInvalidEnvelope", err)
		}
		var ie *event.InvalidEnvelopeError
		if !errors.As(err, &ie) {
			t.Fatalf("error %v does not wrap an *event.InvalidEnvelopeError", err)
		}
		if ie.Field != field {
			t.Fatalf("InvalidEnvelopeError.Field = %q, want %q (%v)", ie.Field, field, err)
		}
	}
}

// tooLarge checks a *store.InvalidAppendError wrapping an
// *event.PayloadTooLargeError about field, with its size and limit.
func tooLarge(field string, size, limit int) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalidAppend) || !errors.Is(err, event.ErrPayloadTooLarge) {
			t.Fatalf("error %v does not match both store.ErrInvalidAppend and event.ErrPayloadTooLarge", err)
		}
		var pe *event.PayloadTooLargeError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v does not wrap an *event.PayloadTooLargeError", err)
		}
		if pe.Field != field || pe.Size != size || pe.Limit != limit {
			t.Fatalf("PayloadTooLargeError{%q, %d, %d}, want {%q, %d, %d}", pe.Field, pe.Size, pe.Limit, field, size, limit)
		}
	}
}
