package event_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

const validEnvelope = `{"id":"ev-1","workflowId":"wf","executionId":"ex-1","eventType":"STEP_COMPLETED",` +
	`"sequence":3,"timestamp":1700000000000,"payload":{"b":1,"a":"<&>"},"metadata":{"kernel":true,"flowEmit":"abc"}}`

// withField returns validEnvelope with field set to the raw JSON value, or
// removed when value is "".
func withField(t *testing.T, field, value string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validEnvelope), &m); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(value)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecodeValidEnvelope(t *testing.T) {
	e, err := event.Decode([]byte(validEnvelope), event.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := event.Envelope{
		ID: "ev-1", WorkflowID: "wf", ExecutionID: "ex-1", Type: event.StepCompleted,
		Sequence: 3, Timestamp: 1700000000000, Payload: json.RawMessage(`{"b":1,"a":"<&>"}`),
		Metadata: map[string]json.RawMessage{"kernel": json.RawMessage(`true`), "flowEmit": json.RawMessage(`"abc"`)},
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("Decode:\n got %+v\nwant %+v", e, want)
	}
}

func TestDecodeOptionalFields(t *testing.T) {
	minimal := `{"id":"e","executionId":"x","eventType":"T","sequence":0}`
	e, err := event.Decode([]byte(minimal), event.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if e.WorkflowID != "" || e.Timestamp != 0 || e.Payload != nil || e.Metadata != nil {
		t.Fatalf("absent optional fields decoded as %+v", e)
	}
	if string(e.PayloadOrNull()) != "null" {
		t.Fatalf("PayloadOrNull of an absent payload = %s", e.PayloadOrNull())
	}
	nulls := `{"id":"e","workflowId":null,"executionId":"x","eventType":"T","sequence":0,"timestamp":null,"payload":null,"metadata":null}`
	e, err = event.Decode([]byte(nulls), event.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if e.WorkflowID != "" || e.Timestamp != 0 || string(e.Payload) != "null" || e.Metadata != nil {
		t.Fatalf("null optional fields decoded as %+v", e)
	}
}

// TestDecodeRefusesBadInput: bad input is refused at the edge with a typed
// error naming the field (DESIGN "Errors").
func TestDecodeRefusesBadInput(t *testing.T) {
	long := `"` + strings.Repeat("x", event.MaxIDBytes+1) + `"`
	for _, tc := range []struct {
		name, in, field string
	}{
		{"empty input", ``, "envelope"},
		{"not an object", `["id"]`, "envelope"},
		{"a string", `"x"`, "envelope"},
		{"malformed", `{"id":`, "envelope"},
		{"unknown field", withField(t, "extra", `1`), "envelope"},
		{"field in another case", strings.Replace(validEnvelope, `"id"`, `"ID"`, 1), "envelope"},
		{"repeated field", strings.Replace(validEnvelope, `{"id":"ev-1"`, `{"id":"ev-1","id":"ev-2"`, 1), "id"},
		{"missing id", withField(t, "id", ""), "id"},
		{"missing executionId", withField(t, "executionId", ""), "executionId"},
		{"missing eventType", withField(t, "eventType", ""), "eventType"},
		{"missing sequence", withField(t, "sequence", ""), "sequence"},
		{"null id", withField(t, "id", `null`), "id"},
		{"trailing object", validEnvelope + ` {}`, "envelope"},
		{"trailing bracket", validEnvelope + `]`, "envelope"},
		{"trailing brace", validEnvelope + `}`, "envelope"},
		{"trailing garbage", validEnvelope + `x`, "envelope"},
		{"id not a string", withField(t, "id", `5`), "id"},
		{"workflowId not a string", withField(t, "workflowId", `{}`), "workflowId"},
		{"sequence a string", withField(t, "sequence", `"3"`), "sequence"},
		{"sequence a fraction", withField(t, "sequence", `1.5`), "sequence"},
		{"sequence past int64", withField(t, "sequence", `99999999999999999999`), "sequence"},
		{"timestamp a string", withField(t, "timestamp", `"now"`), "timestamp"},
		{"metadata an array", withField(t, "metadata", `[]`), "metadata"},
		{"invalid UTF-8", strings.Replace(validEnvelope, "ev-1", "ev-\xff", 1), "envelope"},
		{"NUL in id", withField(t, "id", `"a\u0000b"`), "id"},
		{"NUL in executionId", withField(t, "executionId", `"x\u0000"`), "executionId"},
		{"control in eventType", withField(t, "eventType", `"T\n"`), "eventType"},
		{"DEL in workflowId", withField(t, "workflowId", `"w\u007f"`), "workflowId"},
		{"C1 control in id", withField(t, "id", `"a\u0085"`), "id"},
		{"empty id", withField(t, "id", `""`), "id"},
		{"empty executionId", withField(t, "executionId", `""`), "executionId"},
		{"id too long", withField(t, "id", long), "id"},
		{"negative sequence", withField(t, "sequence", `-1`), "sequence"},
		{"negative timestamp", withField(t, "timestamp", `-1`), "timestamp"},
		{"empty metadata key", withField(t, "metadata", `{"":1}`), "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := event.Decode([]byte(tc.in), event.Limits{})
			if !errors.Is(err, event.ErrInvalidEnvelope) {
				t.Fatalf("Decode = %+v, %v; want ErrInvalidEnvelope", e, err)
			}
			var ie *event.InvalidEnvelopeError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v (%T) is not *InvalidEnvelopeError", err, err)
			}
			if ie.Field != tc.field {
				t.Fatalf("Field = %q, want %q (%v)", ie.Field, tc.field, err)
			}
			if errors.Is(err, event.ErrPayloadTooLarge) {
				t.Fatalf("%v matches ErrPayloadTooLarge", err)
			}
		})
	}
}

func TestDecodeRefusesOversizeInput(t *testing.T) {
	lim := event.Limits{MaxPayloadBytes: 16}
	small := `{"id":"e","executionId":"x","eventType":"T","sequence":0,"payload":1`
	for _, tc := range []struct {
		name, in, field string
	}{
		{"payload", withField(t, "payload", `"`+strings.Repeat("p", 40)+`"`), "payload"},
		{"one metadata value", small + `,"metadata":{"k":"` + strings.Repeat("m", 40) + `"}}`, "metadata.k"},
		{"metadata in total", small + `,"metadata":{"a":"123456","b":"123456"}}`, "metadata"},
		{"whole envelope", `{"id":"` + strings.Repeat("x", 2*16+64*1024) + `"}`, "envelope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := event.Decode([]byte(tc.in), lim)
			if !errors.Is(err, event.ErrPayloadTooLarge) || !errors.Is(err, event.ErrInvalidEnvelope) {
				t.Fatalf("err = %v; want ErrPayloadTooLarge and ErrInvalidEnvelope", err)
			}
			var pe *event.PayloadTooLargeError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not *PayloadTooLargeError", err, err)
			}
			if pe.Field != tc.field || pe.Size <= pe.Limit {
				t.Fatalf("got %+v, want field %q over its limit", pe, tc.field)
			}
		})
	}
	// The same payload fits under the default cap.
	if _, err := event.Decode([]byte(withField(t, "payload", `"`+strings.Repeat("p", 40)+`"`)), event.Limits{}); err != nil {
		t.Fatalf("default limits: %v", err)
	}
}

// TestDecodeErrorsDoNotEchoInput: a refusal says what and why, never the
// refused bytes (they may hold secrets).
func TestDecodeErrorsDoNotEchoInput(t *testing.T) {
	for _, in := range []string{
		withField(t, "s3cr3t", `1`),
		withField(t, "id", `"s3cr3t\u0000"`),
		strings.Replace(validEnvelope, `"payload":{`, `"payload":"s3cr3t`, 1),
		validEnvelope + `"s3cr3t"`,
		withField(t, "sequence", `"s3cr3t"`),
	} {
		_, err := event.Decode([]byte(in), event.Limits{})
		if err == nil {
			t.Fatalf("Decode accepted %s", in)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error echoes the input: %v", err)
		}
	}
}

func TestEncodeDecodeRoundTripKeepsPayloadBytes(t *testing.T) {
	for _, payload := range []string{
		`{"b":1,"a":"<&>"}`,
		"{ \"b\" : [1, 2],\n \"a\" : \"\u2028\" }",
		`12345678901234567890`,
		`1.0`,
		`"\u00e9\/"`,
		`null`,
	} {
		in := event.Envelope{ID: "e<1>", ExecutionID: "x&y", Type: "NOTE", Sequence: 7, Timestamp: 42,
			Payload:  json.RawMessage(payload),
			Metadata: map[string]json.RawMessage{"z": json.RawMessage(`[1.50]`), "kernel": json.RawMessage(`true`)}}
		b, err := event.Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"payload":`+payload) {
			t.Errorf("Encode changed the payload %q: %s", payload, b)
		}
		out, err := event.Decode(b, event.Limits{})
		if err != nil {
			t.Fatalf("Decode(Encode(e)) = %v for %s", err, b)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
		}
	}
}

func TestEncodeLayout(t *testing.T) {
	e, err := event.Decode([]byte(validEnvelope), event.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := event.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	// Field order of the spec, no HTML escaping, metadata keys sorted.
	want := `{"id":"ev-1","workflowId":"wf","executionId":"ex-1","eventType":"STEP_COMPLETED",` +
		`"sequence":3,"timestamp":1700000000000,"payload":{"b":1,"a":"<&>"},"metadata":{"flowEmit":"abc","kernel":true}}`
	if string(b) != want {
		t.Fatalf("Encode:\n got %s\nwant %s", b, want)
	}
	b, err = event.Encode(event.Envelope{ID: "e", ExecutionID: "x", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"e","workflowId":"","executionId":"x","eventType":"T","sequence":0,"timestamp":0,"payload":null}`; string(b) != want {
		t.Fatalf("Encode of an absent payload:\n got %s\nwant %s", b, want)
	}
}

func TestEncodeRefusesInvalidJSON(t *testing.T) {
	for _, e := range []event.Envelope{
		{ID: "e", ExecutionID: "x", Type: "T", Payload: json.RawMessage(`{`)},
		{ID: "e", ExecutionID: "x", Type: "T", Payload: json.RawMessage(`1,2`)},
		{ID: "e", ExecutionID: "x", Type: "T", Metadata: map[string]json.RawMessage{"k": nil}},
	} {
		b, err := event.Encode(e)
		if !errors.Is(err, event.ErrInvalidEnvelope) {
			t.Errorf("Encode(%+v) = %s, %v; want ErrInvalidEnvelope", e, b, err)
		}
	}
}

func TestKernelStamp(t *testing.T) {
	for _, tc := range []struct {
		meta map[string]json.RawMessage
		want bool
	}{
		{nil, false},
		{map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}, true},
		{map[string]json.RawMessage{"kernel": json.RawMessage(` true `)}, true},
		{map[string]json.RawMessage{"kernel": json.RawMessage(`false`)}, false},
		{map[string]json.RawMessage{"kernel": json.RawMessage(`"true"`)}, false},
		{map[string]json.RawMessage{"kernel": json.RawMessage(`1`)}, false},
		{map[string]json.RawMessage{"Kernel": json.RawMessage(`true`)}, false},
	} {
		if got := (event.Envelope{Metadata: tc.meta}).Kernel(); got != tc.want {
			t.Errorf("Kernel() with metadata %s = %v, want %v", tc.meta, got, tc.want)
		}
	}
}

func TestFlowEmitStamp(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"af63dc4c8601ec8c"`, "af63dc4c8601ec8c", true},
		{`""`, "", false},
		{`123`, "", false},
		{`null`, "", false},
		{`{"d":"x"}`, "", false},
	} {
		e := event.Envelope{Metadata: map[string]json.RawMessage{"flowEmit": json.RawMessage(tc.raw)}}
		got, ok := e.FlowEmit()
		if got != tc.want || ok != tc.ok {
			t.Errorf("FlowEmit() with %s = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (event.Envelope{}).FlowEmit(); ok {
		t.Error("FlowEmit() without metadata reported a stamp")
	}
}

func TestValidate(t *testing.T) {
	ok := event.Envelope{ID: "e", ExecutionID: "x", Type: "T"}
	if err := event.Validate(ok, event.Limits{}); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
	for _, tc := range []struct {
		name  string
		e     event.Envelope
		field string
	}{
		{"payload not JSON", event.Envelope{ID: "e", ExecutionID: "x", Type: "T", Payload: json.RawMessage(`{`)}, "payload"},
		{"payload not UTF-8", event.Envelope{ID: "e", ExecutionID: "x", Type: "T", Payload: json.RawMessage("\"\xff\"")}, "payload"},
		{"empty metadata value", event.Envelope{ID: "e", ExecutionID: "x", Type: "T", Metadata: map[string]json.RawMessage{"k": nil}}, "metadata.k"},
		{"metadata key not UTF-8", event.Envelope{ID: "e", ExecutionID: "x", Type: "T", Metadata: map[string]json.RawMessage{"\xff": json.RawMessage(`1`)}}, "metadata"},
		{"id not UTF-8", event.Envelope{ID: "\xff", ExecutionID: "x", Type: "T"}, "id"},
	} {
		err := event.Validate(tc.e, event.Limits{})
		var ie *event.InvalidEnvelopeError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: Validate = %v, want *InvalidEnvelopeError on %q", tc.name, err, tc.field)
		}
	}
}

// TestValidateNamesTheFirstBadMetadataKey: with several bad metadata values
// the error names the first key in sorted order, never one chosen by map
// iteration order.
func TestValidateNamesTheFirstBadMetadataKey(t *testing.T) {
	meta := map[string]json.RawMessage{}
	for _, k := range []string{"m", "c", "x", "a", "q", "f"} {
		meta[k] = json.RawMessage(`{`)
	}
	e := event.Envelope{ID: "e", ExecutionID: "x", Type: "T", Metadata: meta}
	for range 50 {
		var ie *event.InvalidEnvelopeError
		if err := event.Validate(e, event.Limits{}); !errors.As(err, &ie) || ie.Field != "metadata.a" {
			t.Fatalf("Validate = %v, want the error on metadata.a", err)
		}
	}
}

func TestValidateIDRefusals(t *testing.T) {
	for _, s := range []string{"", "a\x00", "\x1b[31m", "a\u2028"[:2], strings.Repeat("i", event.MaxIDBytes+1)} {
		if err := event.ValidateID("id", s); !errors.Is(err, event.ErrInvalidEnvelope) {
			t.Errorf("ValidateID(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"a", "exec-1/branch:2", "é€😀", strings.Repeat("i", event.MaxIDBytes)} {
		if err := event.ValidateID("id", s); err != nil {
			t.Errorf("ValidateID(%q) = %v", s, err)
		}
	}
}
