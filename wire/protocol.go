package wire

import (
	"encoding/json"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Version is the wire ABI version (WIRE_ABI_VERSION in the spec, ADR 0026).
// It versions the protocol itself — the method names, the param and result
// field names, the error codes and the event-stream framing — not the kernel
// behind it, which the handshake advertises separately (kernelAbiVersion,
// syscalls, eventSchemaVersion). Adding a method, an optional param or a
// result field is a MINOR bump; removing or renaming one, or moving an error
// code, is MAJOR. TestVersionPinsProtocol fails when they change apart.
//
// 1.1.0 added execution.resolve and execution.gate, the handshake's flows,
// the codes CodeFlowCodeMismatch and CodeNotConfigured, and structured data
// on refusals (violations, owner and expiresAt, recorded and registered,
// field and need, flows); nothing was renamed or removed. 1.2.0 added
// execution.watch, a live query of an execution's folded state. 1.3.0 added
// readmodel.query and readmodel.watch, one page of read models and its live
// form. 1.4.0 added execution.send (a message to an execution's inbox),
// execution.resumeAs (re-open an execution, onto another flow or input),
// runtime.recover (one recovery pass) and the code CodeSendRefused. 1.5.0
// added execution.list, one page of the app's executions with their folded
// status, scoped to the caller's tenant and authorization. 1.6.0 added
// execution.checkReplay, an execution's stored log judged against the
// app's registered code (loom.Runtime.CheckExecution).
const Version = "1.6.0"

// Path is where Handler answers when an app mounts it at the root: every
// JSON-RPC request, including the subscribe stream, is a POST to Path.
const Path = "/rpc"

// The methods of wire ABI 1.6.0: one per syscall-ABI entry point a client
// outside the process may call, the handshake, and the read-model queries.
// Resolve and Gate came with 1.1.0, Watch with 1.2.0, ReadModelQuery and
// ReadModelWatch with 1.3.0, Send, ResumeAs and Recover with 1.4.0, List
// with 1.5.0, CheckReplay with 1.6.0.
const (
	MethodHandshake = "loom.handshake"
	MethodStart     = "execution.start"
	MethodResume    = "execution.resume"
	MethodCancel    = "execution.cancel"
	MethodFork      = "execution.fork"
	MethodState     = "execution.state"
	MethodEvents    = "execution.events"
	MethodSubscribe = "execution.subscribe"
	MethodResolve   = "execution.resolve"
	MethodGate      = "execution.gate"
	MethodWatch     = "execution.watch"
	MethodSend      = "execution.send"
	MethodResumeAs  = "execution.resumeAs"
	MethodRecover   = "runtime.recover"
	MethodList      = "execution.list"
	MethodCheck     = "execution.checkReplay"

	MethodReadModelQuery = "readmodel.query"
	MethodReadModelWatch = "readmodel.watch"
)

// Methods lists every method of this wire ABI version, in the order of the
// protocol table (doc.go). The handshake advertises it.
func Methods() []string {
	return []string{MethodHandshake, MethodStart, MethodResume, MethodCancel, MethodFork,
		MethodState, MethodEvents, MethodSubscribe, MethodResolve, MethodGate, MethodWatch,
		MethodReadModelQuery, MethodReadModelWatch, MethodSend, MethodResumeAs, MethodRecover, MethodList, MethodCheck}
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
	// Flows are the flows the app registered, by id, each with the JSON
	// Schema of every gate that declares one (resumeSchemas: gate → schema)
	// and its code fingerprints (1.1.0).
	Flows []loom.FlowInfo `json:"flows"`
}

func currentHandshake(maxBody int64, flows []loom.FlowInfo) Handshake {
	if flows == nil {
		flows = []loom.FlowInfo{}
	}
	return Handshake{
		Flows:              flows,
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

// SendParams are the params of execution.send (1.4.0).
type SendParams struct {
	ExecutionID string `json:"executionId"`
	// Topic is the inbox topic the flow receives or selects on.
	Topic string `json:"topic"`
	// Payload is the message (any JSON; absent is null).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// SendResult is the result of execution.send: the message is durable in
// the inbox of ExecutionID, the chain's live head (a message to an
// execution that continued as new goes to its successor).
type SendResult struct {
	ExecutionID string `json:"executionId"`
}

// ResumeAsParams are the params of execution.resumeAs (1.4.0): re-open
// ExecutionID (loom.Runtime.ResumeAs), onto FlowID when given
// (loom.OntoFlow), with Input replacing the recorded input when given
// (recorded as EXECUTION_MIGRATED first). A crashed execution is
// re-driven, an ended one re-opened; a parked one needs EventType and
// Payload, its gate's answer under the target flow's schema.
type ResumeAsParams struct {
	ExecutionID string          `json:"executionId"`
	FlowID      string          `json:"flowId,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	EventType   string          `json:"eventType,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Credentials json.RawMessage `json:"credentials,omitempty"`
	// Wait: as StartParams.Wait.
	Wait bool `json:"wait,omitempty"`
}

// ResumeAsResult is the result of execution.resumeAs: the re-opening is
// durable.
type ResumeAsResult struct {
	ExecutionID string          `json:"executionId"`
	State       json.RawMessage `json:"state,omitempty"`
}

// RecoverResult is the result of runtime.recover (1.4.0): how many
// executions the pass re-drove or started.
type RecoverResult struct {
	Recovered int `json:"recovered"`
}

// ListParams are the params of execution.list (1.5.0): one page of the
// app's event store, in id order after After, keeping the executions of
// FlowID and in Status when given (loom.Runtime.List).
type ListParams struct {
	// After is the cursor: the Next of the previous page ("" for the first).
	After string `json:"after,omitempty"`
	// Limit is how many entries of the store's listing the page reads
	// (default loom.DefaultListLimit, at most loom.MaxListLimit).
	Limit int `json:"limit,omitempty"`
	// FlowID keeps only the executions of this flow.
	FlowID string `json:"flowId,omitempty"`
	// Status keeps only the executions with this folded status.
	Status fold.Status `json:"status,omitempty"`
}

// ListResult is the result of execution.list: the executions of one store
// page that pass the filters, the caller's tenant and the app's
// Authorizer (a "list" of each; a denied one is left out, and nothing is
// recorded). A page may hold fewer executions than Limit, none even, while
// Next is set: Next continues where the store page ended, and is absent on
// the last page.
type ListResult struct {
	Executions []loom.ExecutionSummary `json:"executions"`
	Next       string                  `json:"next,omitempty"`
}

// CheckReplayParams are the params of execution.checkReplay (1.6.0).
type CheckReplayParams struct {
	ExecutionID string `json:"executionId"`
}

// CheckReplayResult is the result of execution.checkReplay: the verdict on
// the execution's whole stored log (its archived events in their place)
// under the flows the app has registered now (loom.Runtime.CheckExecution).
// Nothing is appended or run.
type CheckReplayResult struct {
	ExecutionID string            `json:"executionId"`
	Report      loom.ReplayReport `json:"report"`
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

// ResolveParams are the params of execution.resolve (1.1.0): an operator's
// verdict on an execution parked in doubt — a step with side effects whose
// start is durable and whose outcome is not, because the process driving it
// stopped. Done says the effect happened, with Output as the step's output
// (absent means null); otherwise the step runs again as a new attempt.
// StepID and Attempt must name the attempt the park is in doubt about
// (execution.gate shows it), so a verdict never lands on another one.
type ResolveParams struct {
	ExecutionID string `json:"executionId"`
	StepID      string `json:"stepId"`
	Attempt     *int64 `json:"attempt"`
	Done        bool   `json:"done,omitempty"`
	// Output is the step's output when Done; refused without Done.
	Output json.RawMessage `json:"output,omitempty"`
	// Wait: as StartParams.Wait.
	Wait bool `json:"wait,omitempty"`
}

// ResolveResult is the result of execution.resolve: the verdict is durable
// (a kernel DECISION_RECORDED beside EXECUTION_RESUMED) and the execution
// goes on.
type ResolveResult struct {
	ExecutionID string          `json:"executionId"`
	State       json.RawMessage `json:"state,omitempty"`
}

// GateParams are the params of execution.gate (1.1.0).
type GateParams struct {
	ExecutionID string `json:"executionId"`
}

// GateResult is the result of execution.gate: where an execution stands and,
// when it is parked, what it is parked on and what answers it.
type GateResult struct {
	ExecutionID string      `json:"executionId"`
	FlowID      string      `json:"flowId"`
	Status      fold.Status `json:"status"`
	// Sequence is the last event's.
	Sequence int64 `json:"sequence"`
	// Gate is the park; absent when the execution is not parked.
	Gate *Gate `json:"gate,omitempty"`
}

// The kinds of park a Gate describes.
const (
	// GateNamed is a gate of the flow: execution.resume answers it with
	// eventType = On and a payload its Schema (if any) accepts.
	GateNamed = "gate"
	// GateInDoubt is a step with side effects whose outcome is unknown:
	// only execution.resolve, for StepID and Attempt, answers it.
	GateInDoubt = "in-doubt"
	// GateDiverged is a replay that diverged from its log: once the code is
	// fixed, execution.resume with eventType = On lets it go on.
	GateDiverged = "diverged"
	// GateSleep is a timed wait: its timer (WakeAt) answers it.
	GateSleep = "sleep"
	// GateSelect waits for the first of Waits.
	GateSelect = "select"
	// GateKernel is another gate the kernel reserves (a name starting with
	// "__loom_"): no caller answers it.
	GateKernel = "kernel"
)

// Gate is the park of an execution.
type Gate struct {
	// On is the gate's name as recorded (a kernel name for the kinds other
	// than GateNamed).
	On string `json:"on"`
	// Kind is one of GateNamed, GateInDoubt, GateDiverged, GateSleep,
	// GateSelect, GateKernel.
	Kind string `json:"kind"`
	// Since is the sequence of the EXECUTION_SUSPENDED that parked it.
	Since int64 `json:"since"`
	// WakeAt is when its timeout (or timer) fires, epoch ms; absent: never.
	WakeAt *int64 `json:"wakeAt,omitempty"`
	// TimeoutMs is the timeout the flow gave, when it gave one.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// StepID and Attempt name the step of a human step's park, and the
	// attempt an in-doubt park is about.
	StepID  string `json:"stepId,omitempty"`
	Attempt *int64 `json:"attempt,omitempty"`
	// Schema is the JSON Schema an answer's payload must satisfy, when the
	// flow declares one for On.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Waits are the cases of a GateSelect park, in recorded order.
	Waits []Wait `json:"waits,omitempty"`
}

// Wait is one case of a select park: a gate (answered by execution.resume
// with eventType = On), a message on Topic, or a timer at WakeAt.
type Wait struct {
	WaitID string          `json:"waitId"`
	Kind   string          `json:"kind"`
	On     string          `json:"on,omitempty"`
	Topic  string          `json:"topic,omitempty"`
	WakeAt *int64          `json:"wakeAt,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
}
