package crypto

import (
	"slices"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// WholePayload, as a member name in a FieldTable, seals the whole payload
// of the event type as one field.
const WholePayload = "$payload"

// inboxMessageType is the event type of a message in an inbox stream (the
// kernel's reserved "__loom_message__").
const inboxMessageType = "__loom_message__"

// reservedTypePrefix starts the kernel's reserved event types.
const reservedTypePrefix = "__loom_"

// FieldTable says which payload members of each event type are data (the
// application's or a subject's values, sealed) rather than frame (ids,
// gate names, attempts, counters the kernel folds by structure, kept
// readable). Only top-level members of an object payload are sealed, and a
// member whose value is JSON null is never sealed: null is structure (a
// null resume answers no gate), and there is nothing in it to protect.
type FieldTable struct {
	// ByType maps an event type to its sealed members; WholePayload among
	// them seals the whole payload, whatever its JSON type.
	ByType map[string][]string
	// AppEvents seals the whole payload of every event type that is not a
	// kernel type (event.IsKnown) nor reserved (a "__loom_" prefix): the
	// domain events flows emit and the agent loop's records.
	AppEvents bool
}

// DefaultFields returns the table derived from docs/events.md (EVENT_SCHEMA
// 1.26.0):
//
//	EXECUTION_STARTED    input            (principal, parent, chain, carry stay: tenancy and authorization read them)
//	EXECUTION_RESUMED    payload          (eventType, waitId stay)
//	EXECUTION_COMPLETED  output
//	EXECUTION_FAILED     error
//	EXECUTION_MIGRATED   migratedInput
//	STEP_STARTED         input            (stepId, attempt, kind, toolId stay)
//	STEP_COMPLETED       output
//	STEP_FAILED          error, payload   (channel stays; payload is the errorPayload)
//	STEP_RETRYING        error
//	DECISION_RECORDED    choice, context  (decisionId, policy, innerSteps stay)
//	OUTCOME_RECORDED     outcome, recordedBy
//	MESSAGE_CONSUMED     payload          (topic, messageId, waitId stay)
//	__loom_message__     the whole payload (an inbox message body)
//	any application type the whole payload (emitted domain events, agent.turn …)
//
// Every other kernel type (suspends, cancels, verdicts, metering, timers,
// approvals, PAYLOAD_SHREDDED …) carries only frame and stays readable; the
// free-text reason members (EXECUTION_CANCELLED.reason and the verdicts')
// are operator text, not sealed.
func DefaultFields() FieldTable {
	return FieldTable{
		ByType: map[string][]string{
			event.ExecutionStarted:   {"input"},
			event.ExecutionResumed:   {"payload"},
			event.ExecutionCompleted: {"output"},
			event.ExecutionFailed:    {"error"},
			event.ExecutionMigrated:  {"migratedInput"},
			event.StepStarted:        {"input"},
			event.StepCompleted:      {"output"},
			event.StepFailed:         {"error", "payload"},
			event.StepRetrying:       {"error"},
			event.DecisionRecorded:   {"choice", "context"},
			event.OutcomeRecorded:    {"outcome", "recordedBy"},
			event.MessageConsumed:    {"payload"},
			inboxMessageType:         {WholePayload},
		},
		AppEvents: true,
	}
}

// For returns the sealed members of eventType (nil for none).
func (t FieldTable) For(eventType string) []string {
	if m, ok := t.ByType[eventType]; ok {
		return m
	}
	if t.AppEvents && !event.IsKnown(eventType) && !strings.HasPrefix(eventType, reservedTypePrefix) {
		return wholePayloadOnly
	}
	return nil
}

var wholePayloadOnly = []string{WholePayload}

// clone returns a deep copy, so a caller's later change to its table does
// not reach a store.
func (t FieldTable) clone() FieldTable {
	out := FieldTable{ByType: make(map[string][]string, len(t.ByType)), AppEvents: t.AppEvents}
	for k, v := range t.ByType { //loom:sorted copy, order-free
		out.ByType[k] = slices.Clone(v)
	}
	return out
}
