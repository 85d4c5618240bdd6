package fold

import (
	"encoding/json"

	"github.com/loom-kernel/loom/event"
)

// Fold folds a whole log from the initial state. It is linear in the number
// of events: containers are copied at most once per pass and then grown in
// place (structural sharing within one pass, spec §3).
func Fold(events []event.Envelope) State {
	return FoldFrom(Initial(), events)
}

// FoldFrom folds events onto s, for example a snapshot's state and its tail.
// s is not modified.
func FoldFrom(s State, events []event.Envelope) State {
	f := NewFolder(s)
	for _, e := range events {
		f.Apply(e)
	}
	return f.State()
}

// Apply returns the state after e. It never mutates s: the containers e
// changes are copied first (copy-on-write), everything else is shared. To fold
// many events use Fold or a Folder, which copy each container once.
func Apply(s State, e event.Envelope) State {
	f := NewFolder(s)
	f.Apply(e)
	return f.State()
}

// Folder folds events one at a time in amortized constant time per event.
// It owns the containers it copied; State hands out a frozen view, after
// which the next Apply copies again what it touches. A Folder is not safe for
// concurrent use.
type Folder struct {
	s   State
	own owned
}

// owned says which containers of s this Folder may mutate in place.
type owned struct {
	frames, decisions, flowEmits, resume, waitAnswers, inDoubt bool
	verdicts, approvals, outcomes, shredded, lifecycle         bool
	inbox, quarantined, scopes                                 bool
}

// NewFolder starts folding from s (which it never mutates).
func NewFolder(s State) *Folder {
	if s.Frames == nil {
		s.Frames = map[string]Frame{}
	}
	return &Folder{s: s}
}

// State returns the current state. The result is frozen: later Apply calls
// on this Folder do not change it.
func (f *Folder) State() State {
	f.own = owned{}
	return f.s
}

// Peek returns the current state without freezing it. The result is valid
// only until the next Apply and must not be retained or modified.
func (f *Folder) Peek() *State { return &f.s }

// Apply folds one event. Unknown types are inert; every event advances
// Sequence and UpdatedAt.
func (f *Folder) Apply(e event.Envelope) {
	if d, ok := e.FlowEmit(); ok && d != ProtoKey {
		m := f.flowEmits()
		m[d]++
	}
	if h, ok := handlers[e.Type]; ok {
		h(f, e)
	}
	if e.Kernel() {
		if v, ok := e.Metadata["forkChain"]; ok {
			f.s.Variables.ForkChain = v
		}
		if v, ok := e.Metadata["forkedBy"]; ok {
			f.s.Variables.ForkedBy = v
		}
	}
	f.s.Sequence = e.Sequence
	f.s.UpdatedAt = e.Timestamp
}

type handler func(f *Folder, e event.Envelope)

// handlers has one entry per known event type; a test checks it covers
// event.KnownTypes exactly.
var handlers = map[string]handler{
	event.ExecutionStarted:   onExecutionStarted,
	event.ExecutionSuspended: onExecutionSuspended,
	event.ExecutionResumed:   onExecutionResumed,
	event.ExecutionCompleted: onExecutionCompleted,
	event.ExecutionFailed:    onExecutionFailed,
	event.ExecutionCancelled: onExecutionCancelled,
	event.ExecutionContinued: onExecutionContinued,
	event.ExecutionRecovered: onExecutionRecovered,
	event.ExecutionMigrated:  onExecutionMigrated,
	event.ExecutionDenied:    onVerdict,
	event.StepStarted:        onStepStarted,
	event.StepCompleted:      onStepCompleted,
	event.StepFailed:         onStepFailed,
	event.StepRetrying:       onStepRetrying,
	event.StepCancelled:      onStepCancelled,
	event.DecisionRecorded:   onDecisionRecorded,
	event.TimerFired:         onTimerFired,
	event.EffectInDoubt:      onEffectInDoubt,
	event.EffectDenied:       onVerdict,
	event.EgressDenied:       onVerdict,
	event.SafetyBlocked:      onVerdict,
	event.ResourceMetered:    onResourceMetered,
	event.QuotaExceeded:      onQuotaExceeded,
	event.OutcomeRecorded:    onOutcomeRecorded,
	event.ApprovalGranted:    onApprovalGranted,
	event.PayloadShredded:    onPayloadShredded,
	event.MessageConsumed:    onMessageConsumed,
	event.ParallelCompleted:  onParallelCompleted,
	event.EventsRehomed:      onEventsRehomed,
	event.InboxQuarantined:   onInboxQuarantined,
	event.InboxReleased:      onInboxReleased,
}

// HasHandler reports whether the fold has a handler for event type t.
func HasHandler(t string) bool {
	_, ok := handlers[t]
	return ok
}

// decode unmarshals the payload into p with exact member names
// (event.UnmarshalExact); false (the event is inert) when the payload is
// absent, has the wrong shape or is malformed: a member name given twice, a
// string that is not valid UTF-8 or holds a lone surrogate escape. p is zero
// after a false.
func decode(e event.Envelope, p any) bool {
	if len(e.Payload) == 0 {
		return false
	}
	return event.UnmarshalExact(e.Payload, p) == nil
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case 'n':
			return true
		default:
			return false
		}
	}
	return true
}

// orNull returns raw, or the JSON null when it is absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m { //loom:order-independent copying a map into a map
		out[k] = v
	}
	return out
}

func cloneSlice[T any](s []T) []T {
	out := make([]T, len(s), len(s)+4)
	copy(out, s)
	return out
}

// ownedMap returns *m for in-place mutation, copying the caller-visible map
// first unless this pass already owns it.
func ownedMap[K comparable, V any](m *map[K]V, owned *bool) map[K]V {
	if !*owned {
		*m = cloneMap(*m)
		*owned = true
	}
	return *m
}

// Container accessors: each returns a container this Folder may mutate.

func (f *Folder) frames() map[string]Frame { return ownedMap(&f.s.Frames, &f.own.frames) }

func (f *Folder) decisions() map[string]Decision {
	return ownedMap(&f.s.Variables.Decisions, &f.own.decisions)
}

func (f *Folder) flowEmits() map[string]int64 {
	return ownedMap(&f.s.Variables.FlowEmits, &f.own.flowEmits)
}

func (f *Folder) waitAnswers() map[string]WaitAnswer {
	return ownedMap(&f.s.Variables.WaitAnswers, &f.own.waitAnswers)
}

func (f *Folder) inDoubt() map[string]InDoubt {
	return ownedMap(&f.s.Variables.InDoubt, &f.own.inDoubt)
}

func (f *Folder) inbox() map[string]InboxCursor { return ownedMap(&f.s.Variables.Inbox, &f.own.inbox) }

// quarantined returns the topic map; its queues are never mutated in place
// (they are small and bounded), only replaced.
func (f *Folder) quarantined() map[string][]QuarantinedEntry {
	return ownedMap(&f.s.Variables.Quarantined, &f.own.quarantined)
}

func (f *Folder) scopes() map[string]Scope { return ownedMap(&f.s.Variables.Scopes, &f.own.scopes) }

// appendOwned appends to a slice, copying it first unless this pass owns it.
func appendOwned[T any](s []T, owned *bool, v T) []T {
	if !*owned {
		s = cloneSlice(s)
		*owned = true
	}
	return append(s, v)
}
