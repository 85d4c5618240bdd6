package wire

import (
	"encoding/json"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// Version is the wire ABI version (WIRE_ABI_VERSION in the spec, ADR 0026).
// It versions the protocol itself — the method names, the param and result
// field names, the error codes and the event-stream framing — not the kernel
// behind it, which the handshake advertises separately (kernelAbiVersion,
// syscalls, eventSchemaVersion). Adding a method, an optional param or a
// result field is a MINOR bump; removing or renaming one, or moving an error
// code, is MAJOR. TestVersionPinsProtocol fails when they change apart.
const Version = "1.0.0"

// Path is where Handler answers when an app mounts it at the root: every
// JSON-RPC request, including the subscribe stream, is a POST to Path.
const Path = "/rpc"

// The methods of wire ABI 1.0.0: one per syscall-ABI entry point a client
// outside the process may call, plus the handshake.
const (
	MethodHandshake = "loom.handshake"
	MethodStart     = "execution.start"
	MethodResume    = "execution.resume"
	MethodCancel    = "execution.cancel"
	MethodFork      = "execution.fork"
	MethodState     = "execution.state"
	MethodEvents    = "execution.events"
	MethodSubscribe = "execution.subscribe"
)

// Methods lists every method of this wire ABI version, in the order of the
// protocol table (doc.go). The handshake advertises it.
func Methods() []string {
	return []string{MethodHandshake, MethodStart, MethodResume, MethodCancel, MethodFork,
		MethodState, MethodEvents, MethodSubscribe}
}

// Handshake is the result of loom.handshake: what a client feature-detects
// against. A syscall is available iff it is listed in Syscalls (spec §2);
// never infer one from KernelABIVersion.
type Handshake struct {
	WireABIVersion     string   `json:"wireAbiVersion"`
	KernelABIVersion   string   `json:"kernelAbiVersion"`
	Syscalls           []string `json:"syscalls"`
	EventSchemaVersion string   `json:"eventSchemaVersion"`
	Methods            []string `json:"methods"`
	// MaxRequestBytes is the request body cap the server enforces.
	MaxRequestBytes int64 `json:"maxRequestBytes"`
	// MaxEventsPage is the most events one execution.events call returns.
	MaxEventsPage int `json:"maxEventsPage"`
}

func currentHandshake(maxBody int64) Handshake {
	return Handshake{
		WireABIVersion:     Version,
		KernelABIVersion:   loom.KernelABIVersion,
		Syscalls:           append([]string{}, loom.KernelSyscalls...),
		EventSchemaVersion: event.SchemaVersion,
		Methods:            Methods(),
		MaxRequestBytes:    maxBody,
		MaxEventsPage:      MaxEventsPage,
	}
}

// StartParams are the params of execution.start.
type StartParams struct {
	// FlowID is the registered flow to run. Required.
	FlowID string `json:"flowId"`
	// Input is the flow's input, any JSON value (absent means null).
	Input json.RawMessage `json:"input,omitempty"`
	// ExecutionID, when set, is the caller-chosen id; a duplicate is refused
	// (CodeExecutionExists) before anything runs.
	ExecutionID string `json:"executionId,omitempty"`
	// Wait makes the call return only once the execution has parked or
	// ended, or the server's timeout passed; see StartResult.State.
	Wait bool `json:"wait,omitempty"`
}

// StartResult is the result of execution.start.
type StartResult struct {
	ExecutionID string `json:"executionId"`
	// State is the canonical folded state once the execution settled
	// (parked or ended). It is present only when Wait was set and the
	// execution settled within the server's timeout: a missing State means
	// the execution is still running, not that it failed.
	State json.RawMessage `json:"state,omitempty"`
}

// ResumeParams are the params of execution.resume: a loom.ResumeEvent
// addressed to an execution. The event goes through the runtime's ingress
// gate (spec §5) like any in-process Resume.
type ResumeParams struct {
	ExecutionID string `json:"executionId"`
	// EventType names the gate the execution is parked on.
	EventType string `json:"eventType"`
	// Payload is the gate's answer (absent means null).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Credentials are handed to the runtime's ResumeAuthenticator and never
	// recorded or echoed.
	Credentials json.RawMessage `json:"credentials,omitempty"`
	// Wait: as StartParams.Wait.
	Wait bool `json:"wait,omitempty"`
}

// ResumeResult is the result of execution.resume: the answer is durable.
type ResumeResult struct {
	ExecutionID string          `json:"executionId"`
	State       json.RawMessage `json:"state,omitempty"`
}

// CancelParams are the params of execution.cancel.
type CancelParams struct {
	ExecutionID string `json:"executionId"`
	// Reason is recorded on EXECUTION_CANCELLED (cut to 512 bytes).
	Reason string `json:"reason,omitempty"`
}

// CancelResult is the result of execution.cancel: the cancel is durable.
type CancelResult struct {
	ExecutionID string `json:"executionId"`
}

// ForkParams are the params of execution.fork.
type ForkParams struct {
	ExecutionID string `json:"executionId"`
	// At is the last sequence copied into the fork. Required.
	At *int64 `json:"at"`
	// ForkID names the new execution (default: a fresh id).
	ForkID string `json:"forkId,omitempty"`
	// Simulate drives the fork in simulate mode.
	Simulate bool `json:"simulate,omitempty"`
	// Wait: as StartParams.Wait, for the fork.
	Wait bool `json:"wait,omitempty"`
}

// ForkResult is the result of execution.fork.
type ForkResult struct {
	// ExecutionID is the new execution's id.
	ExecutionID string          `json:"executionId"`
	State       json.RawMessage `json:"state,omitempty"`
}

// StateParams are the params of execution.state.
type StateParams struct {
	ExecutionID string `json:"executionId"`
	// At, when set, asks for the state after the event at that sequence
	// (time travel); absent means the current state.
	At *int64 `json:"at,omitempty"`
}

// StateResult is the result of execution.state. State is fold.Encode's
// canonical JSON: byte-identical on every conforming kernel.
type StateResult struct {
	ExecutionID string          `json:"executionId"`
	State       json.RawMessage `json:"state"`
}

// EventsParams are the params of execution.events.
type EventsParams struct {
	ExecutionID string `json:"executionId"`
	// From is the first sequence to return (default 0).
	From int64 `json:"from,omitempty"`
	// Limit caps the page (default DefaultEventsPage, at most MaxEventsPage).
	Limit int `json:"limit,omitempty"`
}

// Page sizes of execution.events.
const (
	DefaultEventsPage = 100
	MaxEventsPage     = 1000
)

// EventsResult is one page of an execution's log, in sequence order, each
// envelope as stored. Next is the From of the following page, absent on the
// last page.
type EventsResult struct {
	Events []event.Envelope `json:"events"`
	Next   *int64           `json:"next,omitempty"`
}

// SubscribeParams are the params of execution.subscribe. The response is a
// text/event-stream (see doc.go): every envelope with sequence >= From,
// those already stored first, then each new one once it is durable.
type SubscribeParams struct {
	ExecutionID string `json:"executionId"`
	From        int64  `json:"from,omitempty"`
}
