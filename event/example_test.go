package event_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
)

func ExampleCanonical() {
	out, err := event.Canonical([]byte(`{ "b": [1.0, 2e-3, "<\u00e9>"], "a": 12345678901234567890 }`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"a":12345678901234567890,"b":[1,0.002,"<é>"]}
}

func ExampleFormatJSNumber() {
	fmt.Println(event.FormatJSNumber(1e21), event.FormatJSNumber(1e-7), event.FormatJSNumber(0.1))
	// Output: 1e+21 1e-7 0.1
}

func ExampleDecode() {
	data := []byte(`{"id":"ev-7","workflowId":"order","executionId":"ex-1","eventType":"STEP_COMPLETED",` +
		`"sequence":7,"timestamp":1700000000000,"payload":{"total": 12.50},"metadata":{"kernel":true}}`)
	e, err := event.Decode(data, event.Limits{})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Type, e.Sequence, string(e.Payload), e.Kernel())

	_, err = event.Decode([]byte(`{"id":"ev-8","executionId":"ex-1","eventType":"NOTE"}`), event.Limits{})
	var invalid *event.InvalidEnvelopeError
	fmt.Println(errors.Is(err, event.ErrInvalidEnvelope), errors.As(err, &invalid) && invalid.Field == "sequence")
	fmt.Println(err)
	// Output:
	// STEP_COMPLETED 7 {"total": 12.50} true
	// true true
	// event: invalid envelope: sequence: missing
}

func ExampleEncode() {
	b, err := event.Encode(event.Envelope{
		ID: "ev-1", ExecutionID: "ex-1", Type: event.ExecutionStarted,
		Payload: json.RawMessage(`{"input": "<a&b>"}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output: {"id":"ev-1","workflowId":"","executionId":"ex-1","eventType":"EXECUTION_STARTED","sequence":0,"timestamp":0,"payload":{"input": "<a&b>"}}
}

func ExampleValidate() {
	ok := event.Envelope{ID: "ev-1", ExecutionID: "ex-1", Type: "NOTE", Payload: json.RawMessage(`{"n":1}`)}
	fmt.Println(event.Validate(ok, event.Limits{}))

	bad := ok
	bad.ExecutionID = "ex\x00"
	fmt.Println(event.Validate(bad, event.Limits{}))

	big := ok
	big.Payload = json.RawMessage(`"0123456789abcdef"`)
	err := event.Validate(big, event.Limits{MaxPayloadBytes: 8})
	fmt.Println(errors.Is(err, event.ErrPayloadTooLarge), err)
	// Output:
	// <nil>
	// event: invalid envelope: executionId: contains a control character
	// true event: payload is 18 bytes, over the 8-byte cap
}

func ExampleFlowEmitDigest() {
	a, _ := event.FlowEmitDigest(0, "NOTE_TAKEN", json.RawMessage(`{"text":"hi","n":1}`))
	b, _ := event.FlowEmitDigest(0, "NOTE_TAKEN", json.RawMessage(`{ "n": 1.0, "text": "hi" }`))
	c, _ := event.FlowEmitDigest(1, "NOTE_TAKEN", json.RawMessage(`{"text":"hi","n":1}`))
	fmt.Println(a == b, a == c)
	fmt.Println(a == event.FNV1a64([]byte(`0|["NOTE_TAKEN",{"n":1,"text":"hi"}]`)))

	_, err := event.FlowEmitDigest(0, "NOTE_TAKEN", json.RawMessage(`{"text":`))
	fmt.Println(errors.Is(err, event.ErrNotCanonicalizable))
	// Output:
	// true false
	// true
	// true
}

func ExampleFNV1a64() {
	fmt.Println(event.FNV1a64([]byte("a")))
	// Output: af63dc4c8601ec8c
}

func ExampleDigestCanonical() {
	d, _ := event.DigestCanonical([]byte(`{"b":2,"a":1}`))
	fmt.Println(d == event.SHA256([]byte(`{"a":1,"b":2}`)))
	// Output: true
}

func ExampleKnownTypes() {
	fmt.Println(event.SchemaVersion, len(event.KnownTypes()), event.IsKnown(event.StepCompleted), event.IsKnown("NOTE_TAKEN"))
	// Output: 1.26.0 31 true false
}

func ExampleIsUserspaceEmittable() {
	fmt.Println(event.IsUserspaceEmittable("NOTE_TAKEN"), event.IsUserspaceEmittable(event.ResourceMetered),
		event.IsUserspaceEmittable(event.StepCompleted))
	// Output: true true false
}

func ExampleUnmarshalExact() {
	var p struct {
		DecisionID string          `json:"decisionId"`
		Choice     json.RawMessage `json:"choice"`
	}
	// Another spelling is an unknown member: the field stays absent.
	err := event.UnmarshalExact([]byte(`{"DecisionId":"x1","choice":1}`), &p)
	fmt.Printf("%q %s %v\n", p.DecisionID, p.Choice, err)

	// The exact spelling wins over a look-alike, in any order.
	_ = event.UnmarshalExact([]byte(`{"DecisionId":"x3","decisionId":"x2","choice":2}`), &p)
	fmt.Printf("%q\n", p.DecisionID)

	// A repeated member is refused; inside an opaque value it is carried.
	err = event.UnmarshalExact([]byte(`{"decisionId":"a","decisionId":"b"}`), &p)
	fmt.Println(errors.Is(err, event.ErrInexactJSON), err)
	err = event.UnmarshalExact([]byte(`{"decisionId":"a","choice":{"k":1,"k":2}}`), &p)
	fmt.Println(err, string(p.Choice))

	// So are invalid UTF-8 and lone surrogate escapes, anywhere.
	err = event.UnmarshalExact([]byte(`{"decisionId":"a","choice":"\ud800"}`), &p)
	fmt.Println(err)
	// Output:
	// "" 1 <nil>
	// "x2"
	// true event: inexact JSON: duplicate member name at byte 17
	// <nil> {"k":1,"k":2}
	// event: inexact JSON: lone surrogate escape at byte 28
}
