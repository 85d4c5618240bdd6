package loom

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
)

// Flow is a registered flow: plain Go orchestration whose durable steps,
// decisions and gates go through *Context (P4). Build one with NewFlow.
type Flow struct {
	// ID names the flow in the log (envelope workflowId) and in Start.
	ID string
	// Body is the untyped core: input is the recorded input, the result is
	// recorded as JSON.
	Body func(ctx *Context, input json.RawMessage) (any, error)
	// ResumeSchemas maps a gate (the resume's event type) to the JSON Schema
	// its payload must satisfy (ADR 0077). Parsed before anything is
	// appended; the parsed value is what is recorded.
	ResumeSchemas map[string]string
	// CodeFingerprint, when set, is recorded as codeHash at start (K11, ADR
	// 0113); bump it when the body's step sequence changes.
	CodeFingerprint string
	// CompatibleFingerprints are earlier code pins this code still replays
	// correctly: an execution recorded under one of them is driven instead
	// of refused with *FlowCodeMismatchError. "" names executions started
	// with no fingerprint.
	CompatibleFingerprints []string

	// in and out are the Go types NewFlow was given (nil for a Flow built
	// by hand): Start refuses an input that is not an In.
	in, out reflect.Type
}

// FlowOption configures NewFlow.
type FlowOption func(*Flow)

// WithResumeSchema declares the JSON Schema a resume of gate must satisfy.
// A gate ending in "*" declares a family: the schema of every gate with
// that prefix (an agent's per-call approval gates, "approve.deploy:*"). An
// exact gate wins over a family, and a longer family over a shorter one.
func WithResumeSchema(gate, jsonSchema string) FlowOption {
	return func(f *Flow) {
		if f.ResumeSchemas == nil {
			f.ResumeSchemas = map[string]string{}
		}
		f.ResumeSchemas[gate] = jsonSchema
	}
}

// WithCodeFingerprint records fp as the flow's codeHash at start.
func WithCodeFingerprint(fp string) FlowOption {
	return func(f *Flow) { f.CodeFingerprint = fp }
}

// WithCompatibleFingerprints declares earlier code pins this flow's code
// still replays correctly (K11), so executions recorded under them resume,
// recover and wake under it. Declare one only once the new code issues the
// same steps, decisions and gates as the old for every recorded log — the
// golden-history test of your flows is where to prove it. Use "" for
// executions started before the flow had a fingerprint.
func WithCompatibleFingerprints(fps ...string) FlowOption {
	return func(f *Flow) { f.CompatibleFingerprints = append(f.CompatibleFingerprints, fps...) }
}

// NewFlow defines a typed flow. The input is decoded from the recorded input
// on every run (the first and every replay), the output encoded as JSON.
func NewFlow[In, Out any](id string, body func(ctx *Context, in In) (Out, error), opts ...FlowOption) *Flow {
	f := &Flow{ID: id, Body: func(ctx *Context, raw json.RawMessage) (any, error) {
		var in In
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("loom: flow %q: decoding input: %w", id, err)
			}
		}
		return body(ctx, in)
	}}
	for _, o := range opts {
		o(f)
	}
	f.in, f.out = reflect.TypeFor[In](), reflect.TypeFor[Out]()
	return f
}

// checkInput refuses, before anything is appended, an input the flow's
// body could not decode into its In (NewFlow's type parameter): in is the
// input as it will be recorded.
func (f *Flow) checkInput(in json.RawMessage) error {
	if f.in == nil || isNullJSON(in) {
		return nil
	}
	if err := json.Unmarshal(in, reflect.New(f.in).Interface()); err != nil {
		return &InputTypeError{FlowID: f.ID, Want: f.in.String(), Got: "an input that does not decode into it (" + err.Error() + ")"}
	}
	return nil
}

// compile checks the flow's id and compiles its resume schemas, in New.
// It writes nothing into f: one *Flow may be given to runtimes built
// concurrently, each compiling its own.
func (f *Flow) compile() (map[string]*schema.Schema, error) {
	if f == nil || f.Body == nil {
		return nil, fmt.Errorf("loom: flow without a body")
	}
	if err := event.ValidateID("flow id", f.ID); err != nil {
		return nil, err
	}
	resume := map[string]*schema.Schema{}
	for gate, src := range f.ResumeSchemas { //loom:order-independent map into map
		s, err := schema.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("loom: flow %q: resume schema for %q: %w", f.ID, gate, err)
		}
		resume[gate] = s
	}
	return resume, nil
}

// flowHash identifies the flow definition a start ran (K11).
func (f *Flow) flowHash() string {
	return event.SHA256([]byte(f.ID + "\n" + f.CodeFingerprint))
}

// checkCodePin refuses to drive an execution of st under flow when its
// recorded code pin is neither the flow's fingerprint nor one the flow
// declares compatible (K11). It reads nothing but its arguments.
func checkCodePin(id string, st fold.State, flow *Flow) error {
	recorded := st.Variables.CodeHash
	if recorded == flow.CodeFingerprint || slices.Contains(flow.CompatibleFingerprints, recorded) {
		return nil
	}
	return &FlowCodeMismatchError{ExecutionID: id, FlowID: flow.ID, Recorded: recorded, Registered: flow.CodeFingerprint}
}

// FlowInfo describes a registered flow to tools (the wire handshake, `loom
// gate`): its id, its code pins, and the JSON Schema each gate's answer
// must satisfy (gates without one take any JSON).
type FlowInfo struct {
	ID                     string                     `json:"id"`
	CodeFingerprint        string                     `json:"codeFingerprint,omitempty"`
	CompatibleFingerprints []string                   `json:"compatibleFingerprints,omitempty"`
	ResumeSchemas          map[string]json.RawMessage `json:"resumeSchemas,omitempty"`
}

// Flows lists the registered flows, by id.
func (rt *Runtime) Flows() []FlowInfo {
	out := make([]FlowInfo, 0, len(rt.flows))
	for _, f := range rt.flows { //loom:sorted below
		info := FlowInfo{ID: f.ID, CodeFingerprint: f.CodeFingerprint,
			CompatibleFingerprints: slices.Clone(f.CompatibleFingerprints)}
		for gate, src := range f.ResumeSchemas { //loom:order-independent map into map
			if info.ResumeSchemas == nil {
				info.ResumeSchemas = map[string]json.RawMessage{}
			}
			info.ResumeSchemas[gate] = json.RawMessage(src)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b FlowInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}
