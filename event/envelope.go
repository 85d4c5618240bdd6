package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Envelope is one entry of an execution's log, with the JSON field names of
// the spec (§4): { id, workflowId, executionId, eventType, sequence,
// timestamp, payload, metadata? }. Sequences start at 0 and are contiguous;
// Timestamp is epoch milliseconds stamped by the writer's injected clock and is
// only ever read back as recorded data.
type Envelope struct {
	ID          string          `json:"id"`
	WorkflowID  string          `json:"workflowId"`
	ExecutionID string          `json:"executionId"`
	Type        string          `json:"eventType"`
	Sequence    int64           `json:"sequence"`
	Timestamp   int64           `json:"timestamp"`
	Payload     json.RawMessage `json:"payload"`
	// Metadata values stay raw JSON so numbers keep their digits. Keys the
	// fold reads: kernel (true on kernel-written Wave 2 facts), flowEmit
	// (ADR 0102 digest), forkChain, forkedBy; seal is carried and ignored.
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}

// Limits bounds what an envelope may carry. The zero value means the defaults.
type Limits struct {
	// MaxPayloadBytes caps the payload and, separately, the metadata
	// (default DefaultMaxPayloadBytes).
	MaxPayloadBytes int
}

const (
	// DefaultMaxPayloadBytes is the default payload cap: 16 MiB.
	DefaultMaxPayloadBytes = 16 << 20
	// MaxIDBytes caps ids (event, workflow, execution) and event types.
	MaxIDBytes = 512
)

func (l Limits) payloadCap() int {
	if l.MaxPayloadBytes > 0 {
		return l.MaxPayloadBytes
	}
	return DefaultMaxPayloadBytes
}

// Kernel reports whether the envelope carries metadata.kernel: true, the
// stamp that Wave 2 kinds require before the fold reads them.
func (e Envelope) Kernel() bool {
	v, ok := e.Metadata["kernel"]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("true"))
}

// FlowEmit returns the ADR 0102 digest stamped in metadata.flowEmit, if any.
func (e Envelope) FlowEmit() (string, bool) {
	v, ok := e.Metadata["flowEmit"]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || s == "" {
		return "", false
	}
	return s, true
}

// PayloadOrNull returns the payload, or the JSON null for an absent one.
func (e Envelope) PayloadOrNull() json.RawMessage {
	if len(e.Payload) == 0 {
		return json.RawMessage("null")
	}
	return e.Payload
}

// Validate refuses an envelope a store must not write: empty or oversized
// ids, ids with control characters or invalid UTF-8, a negative sequence, a
// payload or metadata that is not valid UTF-8 JSON, or one over the cap.
func Validate(e Envelope, lim Limits) error {
	if err := ValidateID("id", e.ID); err != nil {
		return err
	}
	if err := ValidateID("executionId", e.ExecutionID); err != nil {
		return err
	}
	if e.WorkflowID != "" {
		if err := ValidateID("workflowId", e.WorkflowID); err != nil {
			return err
		}
	}
	if err := ValidateID("eventType", e.Type); err != nil {
		return err
	}
	if e.Sequence < 0 {
		return &InvalidEnvelopeError{Field: "sequence", Reason: "negative"}
	}
	if e.Timestamp < 0 {
		return &InvalidEnvelopeError{Field: "timestamp", Reason: "negative"}
	}
	if err := validateJSON("payload", e.Payload, lim.payloadCap(), true); err != nil {
		return err
	}
	size := 0
	for k, v := range e.Metadata {
		if k == "" || !utf8.ValidString(k) || len(k) > MaxIDBytes {
			return &InvalidEnvelopeError{Field: "metadata", Reason: "key is empty, too long or not UTF-8"}
		}
		if err := validateJSON("metadata."+k, v, lim.payloadCap(), false); err != nil {
			return err
		}
		size += len(k) + len(v)
	}
	if size > lim.payloadCap() {
		return &PayloadTooLargeError{Field: "metadata", Size: size, Limit: lim.payloadCap()}
	}
	return nil
}

// ValidateID refuses an id that is empty, longer than MaxIDBytes, not valid
// UTF-8, or holds a control character (NUL included).
func ValidateID(field, s string) error {
	switch {
	case s == "":
		return &InvalidEnvelopeError{Field: field, Reason: "empty"}
	case len(s) > MaxIDBytes:
		return &InvalidEnvelopeError{Field: field, Reason: "longer than " + strconv.Itoa(MaxIDBytes) + " bytes"}
	case !utf8.ValidString(s):
		return &InvalidEnvelopeError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return &InvalidEnvelopeError{Field: field, Reason: "contains a control character"}
		}
	}
	return nil
}

func validateJSON(field string, raw json.RawMessage, limit int, allowEmpty bool) error {
	if len(raw) == 0 {
		if allowEmpty {
			return nil
		}
		return &InvalidEnvelopeError{Field: field, Reason: "empty"}
	}
	if len(raw) > limit {
		return &PayloadTooLargeError{Field: field, Size: len(raw), Limit: limit}
	}
	if !utf8.Valid(raw) {
		return &InvalidEnvelopeError{Field: field, Reason: "not valid UTF-8"}
	}
	if !json.Valid(raw) {
		return &InvalidEnvelopeError{Field: field, Reason: "not valid JSON"}
	}
	return nil
}

// wireEnvelope detects missing required fields on decode.
type wireEnvelope struct {
	ID          *string                    `json:"id"`
	WorkflowID  *string                    `json:"workflowId"`
	ExecutionID *string                    `json:"executionId"`
	Type        *string                    `json:"eventType"`
	Sequence    *int64                     `json:"sequence"`
	Timestamp   *int64                     `json:"timestamp"`
	Payload     json.RawMessage            `json:"payload"`
	Metadata    map[string]json.RawMessage `json:"metadata"`
}

// Decode parses one envelope from outside input, strictly: unknown fields,
// missing required fields (id, executionId, eventType, sequence), trailing
// data and anything Validate refuses are errors of type *InvalidEnvelopeError
// or *PayloadTooLargeError.
func Decode(data []byte, lim Limits) (Envelope, error) {
	if len(data) > lim.payloadCap()*2+64*1024 {
		return Envelope{}, &PayloadTooLargeError{Field: "envelope", Size: len(data), Limit: lim.payloadCap()*2 + 64*1024}
	}
	if !utf8.Valid(data) {
		return Envelope{}, &InvalidEnvelopeError{Field: "envelope", Reason: "not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireEnvelope
	if err := dec.Decode(&w); err != nil {
		return Envelope{}, &InvalidEnvelopeError{Field: "envelope", Reason: decodeReason(err)}
	}
	if dec.More() {
		return Envelope{}, &InvalidEnvelopeError{Field: "envelope", Reason: "trailing data"}
	}
	var missing string
	switch {
	case w.ID == nil:
		missing = "id"
	case w.ExecutionID == nil:
		missing = "executionId"
	case w.Type == nil:
		missing = "eventType"
	case w.Sequence == nil:
		missing = "sequence"
	}
	if missing != "" {
		return Envelope{}, &InvalidEnvelopeError{Field: missing, Reason: "missing"}
	}
	e := Envelope{ID: *w.ID, ExecutionID: *w.ExecutionID, Type: *w.Type, Sequence: *w.Sequence,
		Payload: w.Payload, Metadata: w.Metadata}
	if w.WorkflowID != nil {
		e.WorkflowID = *w.WorkflowID
	}
	if w.Timestamp != nil {
		e.Timestamp = *w.Timestamp
	}
	if err := Validate(e, lim); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// decodeReason keeps the decoder's complaint short and free of input bytes.
func decodeReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case asErr(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	return "malformed JSON: " + truncate(err.Error(), 120)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Encode renders an envelope as persisted JSON, without HTML escaping, so
// the stored bytes of a payload are the bytes the writer gave.
func Encode(e Envelope) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if len(e.Payload) == 0 {
		e.Payload = json.RawMessage("null")
	}
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
