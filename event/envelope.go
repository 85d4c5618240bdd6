package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
	for _, k := range metadataKeys(e.Metadata) {
		v := e.Metadata[k]
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

// metadataKeys returns the keys of m sorted, so that which bad key an error
// names, and the order Encode writes them in, never depend on map order.
func metadataKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m { //loom:sorted keys are sorted before use
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

// ValidateCarried refuses a value the kernel carries inside a payload (a
// step's input or output, an execution's input or output) that no reader
// of the log could read alike: invalid UTF-8 or a lone surrogate escape.
// Member names may repeat inside it; readers take the last, as JSON.parse
// and Canonical do.
func ValidateCarried(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var ie *InexactJSONError
	if err := UnmarshalExact(raw, new(json.RawMessage)); errors.As(err, &ie) {
		return &InvalidEnvelopeError{Field: field, Reason: "is not exact JSON (" + string(ie.Reason) + "): every reader of the log must read it alike"}
	} else if err != nil {
		return err
	}
	return nil
}

// ValidateExact refuses a payload (or metadata value) that the fold would
// read as malformed: a member name repeated at the top of an object, a
// lone surrogate escape, anything UnmarshalExact refuses at that level.
// The kernel's journal applies it to everything it appends, so what this
// kernel writes, every reader of the log reads alike; stores stay faithful
// to whatever bytes they are given.
func ValidateExact(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var err error
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		err = UnmarshalExact(raw, new(map[string]json.RawMessage))
	} else {
		err = UnmarshalExact(raw, new(json.RawMessage))
	}
	var ie *InexactJSONError
	if errors.As(err, &ie) {
		return &InvalidEnvelopeError{Field: field, Reason: "is not exact JSON (" + string(ie.Reason) + "): every reader of the log must read it alike"}
	}
	return err
}

// Decode parses one envelope from outside input, strictly: a field name
// that is unknown, repeated or not spelled exactly as the spec spells it,
// a missing required field (id, executionId, eventType, sequence), a value of
// the wrong type, trailing data and anything Validate refuses are errors of
// type *InvalidEnvelopeError or *PayloadTooLargeError. A null optional field
// (workflowId, timestamp, metadata) reads as absent; a null required one as
// missing. The payload and metadata values keep the bytes of the input.
func Decode(data []byte, lim Limits) (Envelope, error) {
	if limit := lim.payloadCap()*2 + 64*1024; len(data) > limit {
		return Envelope{}, &PayloadTooLargeError{Field: "envelope", Size: len(data), Limit: limit}
	}
	if !utf8.Valid(data) {
		return Envelope{}, &InvalidEnvelopeError{Field: "envelope", Reason: "not valid UTF-8"}
	}
	fields, err := decodeFields(data)
	if err != nil {
		return Envelope{}, err
	}
	var e Envelope
	for _, f := range []struct {
		name     string
		dst      any
		required bool
	}{
		{"id", &e.ID, true},
		{"workflowId", &e.WorkflowID, false},
		{"executionId", &e.ExecutionID, true},
		{"eventType", &e.Type, true},
		{"sequence", &e.Sequence, true},
		{"timestamp", &e.Timestamp, false},
		{"metadata", &e.Metadata, false},
	} {
		raw, ok := fields[f.name]
		if !ok || string(raw) == "null" {
			if f.required {
				return Envelope{}, &InvalidEnvelopeError{Field: f.name, Reason: "missing"}
			}
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return Envelope{}, &InvalidEnvelopeError{Field: f.name, Reason: "wrong type"}
		}
	}
	if raw, ok := fields["payload"]; ok {
		e.Payload = raw
	}
	if err := Validate(e, lim); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// envelopeFields are the field names of the wire envelope, spelled exactly.
var envelopeFields = map[string]bool{
	"id": true, "workflowId": true, "executionId": true, "eventType": true,
	"sequence": true, "timestamp": true, "payload": true, "metadata": true,
}

// decodeFields splits one JSON object into its raw field values. It refuses
// what encoding/json would let through: a field name in another case
// ("ID"), a repeated field, and trailing data of any kind.
func decodeFields(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	malformed := func(err error) error {
		return &InvalidEnvelopeError{Field: "envelope", Reason: decodeReason(err)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	if tok != json.Delim('{') {
		return nil, &InvalidEnvelopeError{Field: "envelope", Reason: "not a JSON object"}
	}
	fields := make(map[string]json.RawMessage, len(envelopeFields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(err)
		}
		name, _ := tok.(string)
		if !envelopeFields[name] {
			return nil, &InvalidEnvelopeError{Field: "envelope", Reason: "unknown field"}
		}
		if _, dup := fields[name]; dup {
			return nil, &InvalidEnvelopeError{Field: name, Reason: "repeated"}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed(err)
		}
		fields[name] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, malformed(err)
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, &InvalidEnvelopeError{Field: "envelope", Reason: "trailing data"}
	}
	return fields, nil
}

// decodeReason keeps the decoder's complaint short and free of input bytes.
func decodeReason(err error) string {
	var se *json.SyntaxError
	if asErr(err, &se) {
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	}
	return "malformed JSON: " + truncate(err.Error(), 120)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Encode renders an envelope as persisted JSON, without HTML escaping. The
// payload and metadata values are written as the writer gave them (less
// surrounding whitespace), never re-encoded, so Decode gives them back byte
// for byte; metadata keys are written sorted. A payload or metadata value
// that is not valid JSON is refused with *InvalidEnvelopeError.
func Encode(e Envelope) ([]byte, error) { return encode(e, true) }

// EncodeValid is Encode for an envelope Validate has already accepted: the
// same bytes, without checking the payload and metadata values again. On
// an envelope Validate would refuse its output is unspecified.
func EncodeValid(e Envelope) []byte {
	b, _ := encode(e, false)
	return b
}

func encode(e Envelope, check bool) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(128 + len(e.Payload))
	buf.WriteString(`{"id":`)
	writeJSONString(&buf, e.ID)
	buf.WriteString(`,"workflowId":`)
	writeJSONString(&buf, e.WorkflowID)
	buf.WriteString(`,"executionId":`)
	writeJSONString(&buf, e.ExecutionID)
	buf.WriteString(`,"eventType":`)
	writeJSONString(&buf, e.Type)
	buf.WriteString(`,"sequence":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), e.Sequence, 10))
	buf.WriteString(`,"timestamp":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), e.Timestamp, 10))
	buf.WriteString(`,"payload":`)
	if err := writeRaw(&buf, "payload", e.PayloadOrNull(), check); err != nil {
		return nil, err
	}
	if len(e.Metadata) > 0 {
		buf.WriteString(`,"metadata":{`)
		for i, k := range metadataKeys(e.Metadata) {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(&buf, k)
			buf.WriteByte(':')
			if err := writeRaw(&buf, "metadata."+k, e.Metadata[k], check); err != nil {
				return nil, err
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// writeJSONString writes s as encoding/json does without HTML escaping: a
// printable ASCII string without '"' or '\\' as it is, anything else
// through the encoder (its escapes, U+2028 and invalid UTF-8 included).
func writeJSONString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			enc := json.NewEncoder(buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)           // a string always encodes
			buf.Truncate(buf.Len() - 1) // "\n"
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

func writeRaw(buf *bytes.Buffer, field string, raw json.RawMessage, check bool) error {
	if check && !json.Valid(raw) {
		return &InvalidEnvelopeError{Field: field, Reason: "not valid JSON"}
	}
	buf.Write(bytes.TrimSpace(raw))
	return nil
}
