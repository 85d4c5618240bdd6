package fold

import "encoding/json"

// Status is an execution's lifecycle status. Only execution-level events move
// it (spec §4).
type Status string

// The execution statuses. Continued is the Wave 2 terminal status of an
// execution that handed over to its continue-as-new successor.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSuspended Status = "suspended"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusContinued Status = "continued"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusContinued:
		return true
	}
	return false
}

// FrameStatus is a step frame's lifecycle status.
type FrameStatus string

// The frame statuses. A settled frame (completed, failed, cancelled) keeps no
// input (EVENT_SCHEMA 1.26.0).
const (
	FrameRunning   FrameStatus = "running"
	FrameRetrying  FrameStatus = "retrying"
	FrameCompleted FrameStatus = "completed"
	FrameFailed    FrameStatus = "failed"
	FrameCancelled FrameStatus = "cancelled"
	FrameInDoubt   FrameStatus = "in-doubt"
)

// Settled reports whether the frame reached an outcome.
func (s FrameStatus) Settled() bool {
	return s == FrameCompleted || s == FrameFailed || s == FrameCancelled
}

// Reserved gates the kernel parks on. A null resume of either is status-only.
const (
	GateInDoubt  = "__loom_indoubt__"
	GateDiverged = "__loom_diverged__"
)

// ProtoKey is the container key the fold refuses (fold hardening, spec §4):
// an event that would create it is inert.
const ProtoKey = "__proto__"

// State is an execution's folded state, spec §2's ExecutionState. A State
// returned by Fold, Apply or Folder.State is never mutated afterwards by the
// fold; callers must treat its maps and slices as read-only too.
type State struct {
	Status    Status           `json:"status"`
	Frames    map[string]Frame `json:"frames"`
	Variables Variables        `json:"variables"`
	// Sequence is the sequence of the last folded event, -1 before any.
	Sequence  int64 `json:"sequence"`
	StartedAt int64 `json:"startedAt"`
	UpdatedAt int64 `json:"updatedAt"`
}

// Initial returns the state of an execution with no events.
func Initial() State {
	return State{Status: StatusPending, Frames: map[string]Frame{}, Sequence: -1}
}

// Frame is the folded lifecycle of one step, keyed by step id.
type Frame struct {
	StepID string      `json:"stepId"`
	Status FrameStatus `json:"status"`
	Kind   string      `json:"kind,omitempty"`
	ToolID string      `json:"toolId,omitempty"`
	// Attempt counts starts of this step id, from 1.
	Attempt int64           `json:"attempt"`
	Input   json.RawMessage `json:"input,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
	// ErrorChannel and ErrorPayload hold a typed failure (spec §4.1).
	ErrorChannel string          `json:"errorChannel,omitempty"`
	ErrorPayload json.RawMessage `json:"errorPayload,omitempty"`
	// Seq is the sequence of the event that created the frame; it orders
	// frames for display.
	Seq       int64 `json:"seq"`
	StartedAt int64 `json:"startedAt,omitempty"`
	EndedAt   int64 `json:"endedAt,omitempty"`
}

// Variables holds the fold's reserved variables. Every key starts with an
// underscore, as in the spec; absent keys are omitted from the encoding.
type Variables struct {
	Input    json.RawMessage `json:"_input,omitempty"`
	Output   json.RawMessage `json:"_output,omitempty"`
	Error    json.RawMessage `json:"_error,omitempty"`
	FlowHash string          `json:"_flowHash,omitempty"`
	CodeHash string          `json:"_codeHash,omitempty"`

	// Wave 2 start fields: the durable principal, the parent and the chain.
	Principal json.RawMessage `json:"_principal,omitempty"`
	Parent    json.RawMessage `json:"_parent,omitempty"`
	Chain     json.RawMessage `json:"_chain,omitempty"`
	ForkChain json.RawMessage `json:"_forkChain,omitempty"`
	ForkedBy  json.RawMessage `json:"_forkedBy,omitempty"`

	SuspendedOn *Suspension     `json:"_suspendedOn,omitempty"`
	Waits       json.RawMessage `json:"_waits,omitempty"`
	// ResumePayloads lists gate answers in order; ctx.suspend serves it
	// positionally (ADR 0057/0104).
	ResumePayloads    []ResumeEntry         `json:"_resumePayloads,omitempty"`
	WaitAnswers       map[string]WaitAnswer `json:"_waitAnswers,omitempty"`
	FailedWhileParked bool                  `json:"_failedWhileParked,omitempty"`

	Decisions map[string]Decision `json:"_decisions,omitempty"`
	// FlowEmits counts stamped flow-level emits per ADR 0102 digest.
	FlowEmits map[string]int64   `json:"_flowEmits,omitempty"`
	Resources *Resources         `json:"_resources,omitempty"`
	Quota     *QuotaFact         `json:"_quotaExceeded,omitempty"`
	InDoubt   map[string]InDoubt `json:"_inDoubt,omitempty"`

	Verdicts  []Verdict   `json:"_verdicts,omitempty"`
	Approvals []Approval  `json:"_approvals,omitempty"`
	Outcomes  []Outcome   `json:"_outcomes,omitempty"`
	Shredded  []Shredding `json:"_shredded,omitempty"`

	Recoveries  int64 `json:"_recoveries,omitempty"`
	TimersFired int64 `json:"_timersFired,omitempty"`

	Inbox       map[string]InboxCursor        `json:"_inbox,omitempty"`
	Quarantined map[string][]QuarantinedEntry `json:"_quarantined,omitempty"`
	Scopes      map[string]Scope              `json:"_scopes,omitempty"`
	ContinuedTo string                        `json:"_continuedTo,omitempty"`
	Lifecycle   []LifecycleFact               `json:"_lifecycle,omitempty"`
}

// Suspension records the park an execution is in: the gate (On) and what
// the ingress gate needs to check a resume against it.
type Suspension struct {
	On             string `json:"on"`
	WakeAt         *int64 `json:"wakeAt,omitempty"`
	TimeoutMs      *int64 `json:"timeoutMs,omitempty"`
	CorrelationKey string `json:"correlationKey,omitempty"`
	// StepID is set (by the kernel only) for a human step's park and for an
	// in-doubt park; Attempt for an in-doubt park.
	StepID  string `json:"stepId,omitempty"`
	Attempt *int64 `json:"attempt,omitempty"`
	Seq     int64  `json:"seq"`
}

// ResumeEntry is one gate passthrough: the resume's event type and answer.
type ResumeEntry struct {
	EventType string          `json:"eventType,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Seq       int64           `json:"seq"`
}

// WaitAnswer answers one Wave 2 wait by id (a gate, a message or a timer).
type WaitAnswer struct {
	EventType string          `json:"eventType,omitempty"`
	Topic     string          `json:"topic,omitempty"`
	MessageID string          `json:"messageId,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Seq       int64           `json:"seq"`
}

// Decision is a recorded non-deterministic choice. Seq is the sequence of
// the first record of the id (1.24.0); a snapshot from an older fold may lack
// it and it is never invented.
type Decision struct {
	Choice     json.RawMessage `json:"choice"`
	Seq        *int64          `json:"seq,omitempty"`
	Context    json.RawMessage `json:"context,omitempty"`
	Policy     json.RawMessage `json:"policy,omitempty"`
	InnerSteps json.RawMessage `json:"innerSteps,omitempty"`
}

// Resources is the fixed-size accumulator of RESOURCE_METERED (spec §8). A
// dimension is present only once an effect measured it: no false zeros.
type Resources struct {
	Tokens   *float64           `json:"tokens,omitempty"`
	CostUSD  *float64           `json:"costUsd,omitempty"`
	Ms       *float64           `json:"ms,omitempty"`
	MemBytes *float64           `json:"memBytes,omitempty"`
	WallMs   *float64           `json:"wallMs,omitempty"`
	NetBytes *float64           `json:"netBytes,omitempty"`
	Custom   map[string]float64 `json:"custom,omitempty"`
}

// QuotaFact is the latest QUOTA_EXCEEDED: admission control denies the next
// effect while it is set.
type QuotaFact struct {
	Dimension string `json:"dimension,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Seq       int64  `json:"seq"`
}

// InDoubt is an EFFECT_INDOUBT fact: the step attempt whose outcome is
// unknown. An operator verdict is honoured only beside such a fact.
type InDoubt struct {
	StepID  string `json:"stepId"`
	Attempt int64  `json:"attempt"`
	Seq     int64  `json:"seq"`
}

// Verdict is a denial or block recorded by a ring (EXECUTION_DENIED,
// EFFECT_DENIED, EGRESS_DENIED, SAFETY_BLOCKED).
type Verdict struct {
	Type   string `json:"type"`
	StepID string `json:"stepId,omitempty"`
	Reason string `json:"reason,omitempty"`
	Seq    int64  `json:"seq"`
}

// Approval is an APPROVAL_GRANTED fact: who a ResumeAuthenticator verified.
type Approval struct {
	Principal json.RawMessage `json:"principal,omitempty"`
	Gate      string          `json:"gate,omitempty"`
	Seq       int64           `json:"seq"`
}

// Outcome is an OUTCOME_RECORDED fact.
type Outcome struct {
	Outcome    json.RawMessage `json:"outcome"`
	RecordedBy json.RawMessage `json:"recordedBy,omitempty"`
	Late       bool            `json:"late,omitempty"`
	Seq        int64           `json:"seq"`
}

// Shredding is a PAYLOAD_SHREDDED fact: a subject whose key was destroyed.
type Shredding struct {
	Subject string `json:"subject"`
	Seq     int64  `json:"seq"`
}

// InboxCursor is how far the execution consumed one inbox topic.
type InboxCursor struct {
	Consumed      int64  `json:"consumed"`
	LastMessageID string `json:"lastMessageId,omitempty"`
	Seq           int64  `json:"seq"`
}

// QuarantinedEntry is a held (or released, at the head) inbox message.
type QuarantinedEntry struct {
	MessageID string `json:"messageId"`
	Released  bool   `json:"released,omitempty"`
}

// Scope is the outcome of a structured-concurrency scope (PARALLEL_COMPLETED).
type Scope struct {
	Status   string `json:"status"`
	Branches int64  `json:"branches"`
	Failed   int64  `json:"failed,omitempty"`
	Seq      int64  `json:"seq"`
}

// LifecycleFact is an EVENTS_REHOMED audit entry.
type LifecycleFact struct {
	Type            string `json:"type"`
	FromExecutionID string `json:"fromExecutionId,omitempty"`
	Count           int64  `json:"count,omitempty"`
	Seq             int64  `json:"seq"`
}

// Limits of the fold's bounded containers.
const (
	// MaxQuarantinedPerTopic bounds _quarantined per topic (ADR 0130).
	MaxQuarantinedPerTopic = 1024
	// MaxMeteredValue is the sanity ceiling of one metered amount; larger,
	// negative or non-finite amounts are ignored.
	MaxMeteredValue = 1e15
	// MaxReasonBytes bounds a reason string copied into the state.
	MaxReasonBytes = 512
)
