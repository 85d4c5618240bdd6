package event

import "sort"

// SchemaVersion is the version of the event schema the fold understands
// (spec §4, K5). It moves together with KnownTypes: adding a type or an
// optional payload field is a MINOR bump, removing or renaming one is MAJOR.
// TestSchemaVersionPinsKnownTypes fails when one changes without the other.
const SchemaVersion = "1.26.0"

// Execution-level events: the only ones that move ExecutionState.status.
const (
	ExecutionStarted   = "EXECUTION_STARTED"
	ExecutionSuspended = "EXECUTION_SUSPENDED"
	ExecutionResumed   = "EXECUTION_RESUMED"
	ExecutionCompleted = "EXECUTION_COMPLETED"
	ExecutionFailed    = "EXECUTION_FAILED"
	ExecutionCancelled = "EXECUTION_CANCELLED"
	// ExecutionContinued is the Wave 2 terminal "continued" status; folded
	// only from a kernel-stamped envelope.
	ExecutionContinued = "EXECUTION_CONTINUED"
)

// Execution-level facts that do not move the status.
const (
	ExecutionRecovered = "EXECUTION_RECOVERED"
	ExecutionMigrated  = "EXECUTION_MIGRATED"
	ExecutionDenied    = "EXECUTION_DENIED"
)

// Step events fold into their frame only (a STEP_FAILED never fails the
// execution, ADR 0105).
const (
	StepStarted   = "STEP_STARTED"
	StepCompleted = "STEP_COMPLETED"
	StepFailed    = "STEP_FAILED"
	StepRetrying  = "STEP_RETRYING"
	StepCancelled = "STEP_CANCELLED"
)

// Decisions, time and the effect ring's durable verdicts.
const (
	DecisionRecorded = "DECISION_RECORDED"
	TimerFired       = "TIMER_FIRED"
	EffectInDoubt    = "EFFECT_INDOUBT"
	EffectDenied     = "EFFECT_DENIED"
	ResourceMetered  = "RESOURCE_METERED"
	QuotaExceeded    = "QUOTA_EXCEEDED"
	SafetyBlocked    = "SAFETY_BLOCKED"
	EgressDenied     = "EGRESS_DENIED"
	OutcomeRecorded  = "OUTCOME_RECORDED"
	ApprovalGranted  = "APPROVAL_GRANTED"
	PayloadShredded  = "PAYLOAD_SHREDDED"
)

// Wave 2 and lifecycle kinds. MessageConsumed, InboxQuarantined,
// InboxReleased and the ParallelCompleted payload fold only from a
// kernel-stamped envelope (metadata.kernel: true).
const (
	MessageConsumed   = "MESSAGE_CONSUMED"
	ParallelCompleted = "PARALLEL_COMPLETED"
	EventsRehomed     = "EVENTS_REHOMED"
	InboxQuarantined  = "INBOX_QUARANTINED"
	InboxReleased     = "INBOX_RELEASED"
)

var knownTypes = []string{
	ExecutionStarted, ExecutionSuspended, ExecutionResumed, ExecutionCompleted,
	ExecutionFailed, ExecutionCancelled, ExecutionContinued,
	ExecutionRecovered, ExecutionMigrated, ExecutionDenied,
	StepStarted, StepCompleted, StepFailed, StepRetrying, StepCancelled,
	DecisionRecorded, TimerFired, EffectInDoubt, EffectDenied, ResourceMetered,
	QuotaExceeded, SafetyBlocked, EgressDenied, OutcomeRecorded, ApprovalGranted,
	PayloadShredded,
	MessageConsumed, ParallelCompleted, EventsRehomed, InboxQuarantined, InboxReleased,
}

var knownSet = func() map[string]bool {
	m := make(map[string]bool, len(knownTypes))
	for _, t := range knownTypes {
		m[t] = true
	}
	return m
}()

// KnownTypes returns the event types the fold understands, sorted. It is the
// kernel namespace: a resume or a userspace emit of one of these is refused
// unless the spec names it as allowed (spec §5).
func KnownTypes() []string {
	out := append([]string(nil), knownTypes...)
	sort.Strings(out)
	return out
}

// IsKnown reports whether t is a kernel event type.
func IsKnown(t string) bool { return knownSet[t] }

// userspaceEmittable are the kernel types a flow or an effect may emit
// (spec §5, ADR 0104); they are validated before they are appended.
var userspaceEmittable = map[string]bool{
	ResourceMetered: true, QuotaExceeded: true, SafetyBlocked: true, EgressDenied: true,
	EffectDenied: true, OutcomeRecorded: true, DecisionRecorded: true,
}

// IsUserspaceEmittable reports whether a userspace emit of type t may be
// appended: any non-kernel type, or one of the allowed kernel types.
func IsUserspaceEmittable(t string) bool { return !knownSet[t] || userspaceEmittable[t] }

// IsStatusEvent reports whether t may move the execution status (spec §4).
func IsStatusEvent(t string) bool {
	switch t {
	case ExecutionStarted, ExecutionSuspended, ExecutionResumed, ExecutionCompleted,
		ExecutionFailed, ExecutionCancelled, ExecutionContinued:
		return true
	}
	return false
}
