package store

import (
	"encoding/json"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// UnfinishedStatus is the status of an entry of a StatusIndex. It is
// coarser than fold.Status on purpose: it says which recovery act may be
// due, and the caller re-folds the log before it acts.
type UnfinishedStatus string

const (
	// UnfinishedRunning: the last status-moving event is EXECUTION_STARTED
	// or EXECUTION_RESUMED, or the log has none yet (the fold's pending).
	// A process that stopped may have left it mid-run: re-drive it.
	UnfinishedRunning UnfinishedStatus = "running"
	// UnfinishedSuspended: parked by EXECUTION_SUSPENDED, waiting for a
	// resume, a timer or a message that may have arrived unheard.
	UnfinishedSuspended UnfinishedStatus = "suspended"
	// UnfinishedContinued: ended by a kernel-stamped EXECUTION_CONTINUED
	// whose successor (NextExecutionID) has no events yet: the process
	// stopped before it started the successor.
	UnfinishedContinued UnfinishedStatus = "continued"
)

// UnfinishedExecution is one entry of a StatusIndex.
type UnfinishedExecution struct {
	ExecutionID string `json:"executionId"`
	// WorkflowID is the one ListExecutions reports for the execution.
	WorkflowID string           `json:"workflowId"`
	Status     UnfinishedStatus `json:"status"`
	// Sequence and Timestamp are those of the event that set Status (the
	// first event of a log with no status-moving event).
	Sequence  int64 `json:"sequence"`
	Timestamp int64 `json:"timestamp"`
	// NextExecutionID is the successor of a continued execution. It is ""
	// for the other statuses, and for a continued entry a store migrated
	// from a log it could not read exactly (the caller's fold tells).
	NextExecutionID string `json:"nextExecutionId,omitempty"`
}

// UnfinishedPage is one page of ListUnfinished. Next is the cursor to pass
// as after for the next page, "" on the last page.
type UnfinishedPage struct {
	Executions []UnfinishedExecution `json:"executions"`
	Next       string                `json:"next,omitempty"`
}

// InboxStreamPrefix starts the execution id of every inbox stream (the
// kernel's "__loom_inbox__:" streams of ADR 0110): logs of messages, not
// executions, so a StatusIndex never lists them.
const InboxStreamPrefix = "__loom_inbox__:"

// IsInboxStream reports whether executionID names an inbox stream.
func IsInboxStream(executionID string) bool {
	return strings.HasPrefix(executionID, InboxStreamPrefix)
}

// StatusMove says what events do to their execution's StatusIndex entry.
type StatusMove int

const (
	// StatusKept: no status-moving event; the entry stays as it is.
	StatusKept StatusMove = iota
	// StatusSet: the entry becomes StatusChange.Status.
	StatusSet
	// StatusEnded: the execution ended; it has no entry.
	StatusEnded
)

// StatusChange is what an event, or a batch of them, does to its
// execution's StatusIndex entry. Status, Sequence, Timestamp and Next are
// set only with Move StatusSet (Next only for UnfinishedContinued).
type StatusChange struct {
	Move      StatusMove
	Status    UnfinishedStatus
	Sequence  int64
	Timestamp int64
	Next      string
}

// EventStatus returns what e alone does to its execution's entry, by the
// fold's rule of which events move status (fold/handlers_execution.go):
// EXECUTION_STARTED and EXECUTION_RESUMED set running, EXECUTION_SUSPENDED
// suspended; EXECUTION_COMPLETED, EXECUTION_FAILED and EXECUTION_CANCELLED
// end it; a kernel-stamped EXECUTION_CONTINUED sets continued with the
// successor its payload names (nextExecutionId, read with exact member
// names as the fold reads it), or ends it when it names none; every other
// event, a CONTINUED without the kernel stamp and EXECUTION_RECOVERED and
// EXECUTION_MIGRATED included, keeps the entry. A start or a resume the
// fold would ignore (a second start, an inert resume) still sets running:
// the index may list too much, never too little.
func EventStatus(e event.Envelope) StatusChange {
	set := func(s UnfinishedStatus) StatusChange {
		return StatusChange{Move: StatusSet, Status: s, Sequence: e.Sequence, Timestamp: e.Timestamp}
	}
	switch e.Type {
	case event.ExecutionStarted, event.ExecutionResumed:
		return set(UnfinishedRunning)
	case event.ExecutionSuspended:
		return set(UnfinishedSuspended)
	case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
		return StatusChange{Move: StatusEnded}
	case event.ExecutionContinued:
		if !e.Kernel() {
			return StatusChange{}
		}
		next := successorOf(e.Payload)
		if next == "" {
			// Nothing to start: the fold's continued with no successor.
			return StatusChange{Move: StatusEnded}
		}
		c := set(UnfinishedContinued)
		c.Next = next
		return c
	}
	return StatusChange{}
}

// successorOf reads nextExecutionId from a CONTINUED payload exactly as the
// fold does: "" when the payload is not an object with exact, unique member
// names, or the member is absent or not a string.
func successorOf(payload json.RawMessage) string {
	var m map[string]json.RawMessage
	if len(payload) == 0 || event.UnmarshalExact(payload, &m) != nil {
		return ""
	}
	raw, ok := m["nextExecutionId"]
	if !ok {
		return ""
	}
	var next string
	if event.UnmarshalExact(raw, &next) != nil {
		return ""
	}
	return next
}

// StatusChangeOf returns what appending events at expected (a batch
// store.ValidateAppend accepted, or a copied prefix with expected 0) does
// to the execution's entry: that of its last status-moving event; for the
// first batch of a log (expected 0) with none, running at its first event.
// A store calls it for every execution IsInboxStream does not name.
func StatusChangeOf(expected int64, events []event.Envelope) StatusChange {
	for i := len(events) - 1; i >= 0; i-- {
		if c := EventStatus(events[i]); c.Move != StatusKept {
			return c
		}
	}
	if expected == 0 && len(events) > 0 {
		return StatusChange{Move: StatusSet, Status: UnfinishedRunning,
			Sequence: events[0].Sequence, Timestamp: events[0].Timestamp}
	}
	return StatusChange{}
}

// StatusTypes are the event types EventStatus may move an entry on, for a
// store that looks for the last status-moving event of a log in SQL (and
// then applies EventStatus to what it finds).
func StatusTypes() []string {
	return []string{
		event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed,
		event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled,
		event.ExecutionContinued,
	}
}
