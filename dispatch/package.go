package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// MaxPayloadBytes caps the data one ExecutionPackage carries: its Input, its
// resume Payload and its resume Credentials together. It leaves room for the
// ids and the JSON around them, so a valid package always fits the 1 MiB
// request body a worker server accepts by default (plugins/workerhttp).
const MaxPayloadBytes = 960 << 10

// ExecutionPackage is what a Dispatcher hands a WorkerRuntime: the
// coordinates of one execution and what to do with it (spec §6). It carries
// data only, never code: the worker resolves FlowID in its own statically
// wired registry and reconstructs the execution from the shared stores.
//
// Exactly one of three shapes is valid:
//
//   - a start: Resume is nil; Input (optional, JSON) is the flow's input.
//     The execution is started under ExecutionID; if it exists already the
//     package is taken as a duplicate and the execution's state is reported.
//   - a gate answer: Resume.EventType names the gate, Resume.Payload answers
//     it, through the runtime's ingress gate (spec §5).
//   - a re-drive: Resume.Recover re-drives a crashed execution
//     (EXECUTION_RECOVERED); on a parked or ended one it reports the state.
//
// Field names are the stable JSON of the placement seam; see the package doc.
type ExecutionPackage struct {
	// ExecutionID names the execution (required, an event id).
	ExecutionID string `json:"executionId"`
	// FlowID names the registered flow (required, an event id). A worker
	// without it refuses the package with loom.ErrUnknownFlow; a resume is
	// driven by the flow its log records.
	FlowID string `json:"flowId"`
	// Input is the start input, as JSON; empty means null. Only a start
	// carries one.
	Input json.RawMessage `json:"input,omitempty"`
	// Principal, on a start, is recorded as the starting principal (as
	// loom.WithPrincipal records one): its "tenant" member is the
	// execution's tenant. A worker trusts the dispatcher it authenticated
	// to name it; a queue names {"id": "queue:<name>", "tenant": …} for a
	// tenant's item.
	Principal json.RawMessage `json:"principal,omitempty"`
	// Resume, when set, resumes an existing execution instead of starting
	// one.
	Resume *ResumeHint `json:"resume,omitempty"`
}

// ResumeHint says how a package resumes its execution: either Recover, or a
// gate answer (EventType with an optional Payload and Credentials).
type ResumeHint struct {
	// Recover re-drives a crashed execution with EXECUTION_RECOVERED; it
	// excludes every other field.
	Recover bool `json:"recover,omitempty"`
	// EventType is the gate the answer is for (a loom.ResumeEvent's event
	// type). Kernel event types are refused by the runtime's ingress gate;
	// EXECUTION_RECOVERED is refused here: use Recover.
	EventType string `json:"eventType,omitempty"`
	// Payload is the gate's answer, as JSON; empty means none.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Credentials go to the runtime's ResumeAuthenticator and are never
	// recorded. A dispatcher that queues packages stores them: prefer
	// short-lived tokens.
	Credentials json.RawMessage `json:"credentials,omitempty"`
}

// Kind names what the package asks for: "start", "resume" or "recover".
func (p ExecutionPackage) Kind() string {
	switch {
	case p.Resume == nil:
		return "start"
	case p.Resume.Recover:
		return "recover"
	default:
		return "resume"
	}
}

// LogValue logs a package by its coordinates only: ids, kind and gate,
// never the input, the payload or the credentials.
func (p ExecutionPackage) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("executionId", p.ExecutionID),
		slog.String("flowId", p.FlowID),
		slog.String("kind", p.Kind()),
	}
	if p.Resume != nil && p.Resume.EventType != "" {
		attrs = append(attrs, slog.String("eventType", p.Resume.EventType))
	}
	return slog.GroupValue(attrs...)
}

// Validate refuses a package no worker may run, with a *PackageError naming
// the field: an id or event type that event.ValidateID refuses, JSON that is
// not valid UTF-8 JSON, data over MaxPayloadBytes, an input on a resume, a
// recover with a gate answer, a resume hint with neither.
func (p ExecutionPackage) Validate() error {
	if err := event.ValidateID("executionId", p.ExecutionID); err != nil {
		return &PackageError{Field: "executionId", Reason: "not a valid id", Err: err}
	}
	if err := event.ValidateID("flowId", p.FlowID); err != nil {
		return &PackageError{Field: "flowId", Reason: "not a valid id", Err: err}
	}
	size := len(p.Input)
	if err := validJSON("input", p.Input); err != nil {
		return err
	}
	if err := validJSON("principal", p.Principal); err != nil {
		return err
	}
	size += len(p.Principal)
	if len(p.Principal) > 0 {
		if err := store.ValidateTenant(principalTenant(p.Principal)); err != nil {
			return &PackageError{Field: "principal", Reason: "names an invalid tenant", Err: err}
		}
	}
	if h := p.Resume; h != nil {
		if len(p.Input) > 0 && !bytes.Equal(bytes.TrimSpace(p.Input), []byte("null")) {
			return &PackageError{Field: "input", Reason: "only a start carries an input"}
		}
		if len(p.Principal) > 0 {
			return &PackageError{Field: "principal", Reason: "only a start carries a principal (a resume's is its credentials')"}
		}
		if err := h.validate(); err != nil {
			return err
		}
		size += len(h.Payload) + len(h.Credentials)
	}
	if size > MaxPayloadBytes {
		return &PackageError{Field: "input/payload/credentials", Reason: "over the package cap",
			Err: &event.PayloadTooLargeError{Field: "package", Size: size, Limit: MaxPayloadBytes}}
	}
	return nil
}

// principalTenant reads the "tenant" member of a principal object.
func principalTenant(raw json.RawMessage) string {
	var p struct {
		Tenant string `json:"tenant"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && json.Unmarshal(raw, &p) == nil {
		return p.Tenant
	}
	return ""
}

// executionRecovered is the kernel's re-drive event type, carried only as
// Recover.
const executionRecovered = "EXECUTION_RECOVERED"

func (h *ResumeHint) validate() error {
	if h.Recover {
		if h.EventType != "" || len(h.Payload) > 0 || len(h.Credentials) > 0 {
			return &PackageError{Field: "resume", Reason: "a recover carries no event type, payload or credentials"}
		}
		return nil
	}
	if h.EventType == "" {
		return &PackageError{Field: "resume.eventType", Reason: "a resume hint needs an event type or recover"}
	}
	if err := event.ValidateID("resume.eventType", h.EventType); err != nil {
		return &PackageError{Field: "resume.eventType", Reason: "not a valid event type", Err: err}
	}
	if h.EventType == executionRecovered {
		return &PackageError{Field: "resume.eventType", Reason: "re-drive with recover, not with the kernel's event type"}
	}
	if err := validJSON("resume.payload", h.Payload); err != nil {
		return err
	}
	return validJSON("resume.credentials", h.Credentials)
}

// validJSON refuses raw bytes that are not one valid UTF-8 JSON value.
// Empty means absent and passes.
func validJSON(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return &PackageError{Field: field, Reason: "not valid UTF-8 JSON"}
	}
	return nil
}

// DecodePackage reads one package from its JSON form strictly — unknown
// fields, field names in another case (encoding/json would accept
// "executionID") and trailing data are refused, so a misspelled field never
// goes unnoticed — and validates it. Every refusal is a *PackageError.
func DecodePackage(b []byte) (ExecutionPackage, error) {
	notPackage := &PackageError{Field: "body", Reason: "not an execution package (executionId, flowId, input, resume)"}
	var p ExecutionPackage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return ExecutionPackage{}, notPackage
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ExecutionPackage{}, &PackageError{Field: "body", Reason: "trailing data after the package"}
	}
	var keys struct {
		top    map[string]json.RawMessage
		resume map[string]json.RawMessage
	}
	if json.Unmarshal(b, &keys.top) != nil || !onlyKeys(keys.top, packageKeys) {
		return ExecutionPackage{}, notPackage
	}
	if r := keys.top["resume"]; p.Resume != nil {
		if json.Unmarshal(r, &keys.resume) != nil || !onlyKeys(keys.resume, hintKeys) {
			return ExecutionPackage{}, &PackageError{Field: "resume", Reason: "not a resume hint (recover, eventType, payload, credentials)"}
		}
	}
	if err := p.Validate(); err != nil {
		return ExecutionPackage{}, err
	}
	return p, nil
}

// The exact JSON field names, case included.
var (
	packageKeys = []string{"executionId", "flowId", "input", "principal", "resume"}
	hintKeys    = []string{"recover", "eventType", "payload", "credentials"}
)

func onlyKeys(m map[string]json.RawMessage, allowed []string) bool {
	for k := range m { //loom:order-independent a membership test: the order is never observed
		if !slices.Contains(allowed, k) {
			return false
		}
	}
	return true
}
