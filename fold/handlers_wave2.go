package fold

import (
	"encoding/json"

	"github.com/loom-kernel/loom/event"
)

// Wave 2 handlers (EVENT_SCHEMA 1.23.0, 1.25.0). The new kinds fold only
// from a kernel-stamped envelope, so an application event that happens to
// carry one of these names stays the no-op it always was.

type messagePayload struct {
	Topic     string          `json:"topic"`
	MessageID string          `json:"messageId"`
	WaitID    string          `json:"waitId"`
	Payload   json.RawMessage `json:"payload"`
}

// MESSAGE_CONSUMED { topic, messageId, waitId?, payload? } advances the
// topic's _inbox cursor, answers a wait when it names one, and drops the
// released head of the topic's quarantine queue when it is that message.
func onMessageConsumed(f *Folder, e event.Envelope) {
	var p messagePayload
	if !e.Kernel() || !decode(e, &p) || p.Topic == "" || p.Topic == ProtoKey || p.WaitID == ProtoKey {
		return
	}
	cur := f.s.Variables.Inbox[p.Topic]
	cur.Consumed++
	cur.LastMessageID = p.MessageID
	cur.Seq = e.Sequence
	f.inbox()[p.Topic] = cur
	if _, done := f.s.Variables.WaitAnswers[p.WaitID]; p.WaitID != "" && !done {
		f.waitAnswers()[p.WaitID] = WaitAnswer{Topic: p.Topic, MessageID: p.MessageID,
			Payload: present(p.Payload), Seq: e.Sequence}
	}
	if q := f.s.Variables.Quarantined[p.Topic]; len(q) > 0 && q[0].Released && q[0].MessageID == p.MessageID {
		if len(q) == 1 {
			delete(f.quarantined(), p.Topic)
		} else {
			f.quarantined()[p.Topic] = append([]QuarantinedEntry(nil), q[1:]...)
		}
	}
}

type scopePayload struct {
	ScopeID  string `json:"scopeId"`
	Status   string `json:"status"`
	Branches int64  `json:"branches"`
	Failed   int64  `json:"failed"`
}

// PARALLEL_COMPLETED { scopeId, status, branches, failed? } records a
// structured-concurrency scope's outcome in _scopes (kernel-stamped only; an
// unstamped PARALLEL_COMPLETED stays the legacy no-op).
func onParallelCompleted(f *Folder, e event.Envelope) {
	var p scopePayload
	if !e.Kernel() || !decode(e, &p) || p.ScopeID == "" || p.ScopeID == ProtoKey {
		return
	}
	f.scopes()[p.ScopeID] = Scope{Status: bounded(p.Status), Branches: p.Branches, Failed: p.Failed, Seq: e.Sequence}
}

// EVENTS_REHOMED { fromExecutionId, count } is pure audit into _lifecycle
// (1.22.0).
func onEventsRehomed(f *Folder, e event.Envelope) {
	var p struct {
		FromExecutionID string `json:"fromExecutionId"`
		Count           int64  `json:"count"`
	}
	if !decode(e, &p) {
		return
	}
	v := &f.s.Variables
	v.Lifecycle = appendOwned(v.Lifecycle, &f.own.lifecycle,
		LifecycleFact{Type: e.Type, FromExecutionID: bounded(p.FromExecutionID), Count: p.Count, Seq: e.Sequence})
}

type quarantinePayload struct {
	Topic     string `json:"topic"`
	MessageID string `json:"messageId"`
	Operator  string `json:"operator"`
	Auto      bool   `json:"auto"`
	Deliver   bool   `json:"deliver"`
}

// INBOX_QUARANTINED { topic, messageId } (kernel-stamped only) holds a
// message at the tail of the topic's queue, at most MaxQuarantinedPerTopic.
func onInboxQuarantined(f *Folder, e event.Envelope) {
	var p quarantinePayload
	if !e.Kernel() || !decode(e, &p) || p.Topic == "" || p.Topic == ProtoKey || p.MessageID == "" {
		return
	}
	q := f.s.Variables.Quarantined[p.Topic]
	if len(q) >= MaxQuarantinedPerTopic {
		return
	}
	for _, entry := range q {
		if entry.MessageID == p.MessageID {
			return
		}
	}
	next := make([]QuarantinedEntry, len(q), len(q)+1)
	copy(next, q)
	f.quarantined()[p.Topic] = append(next, QuarantinedEntry{MessageID: p.MessageID})
}

// INBOX_RELEASED { topic, messageId, operator | auto (+ deliver) }
// (kernel-stamped only) releases the held head of the queue, keeping order:
// the queue's shape is released? held*. A fact with both or neither of
// operator and auto, or auto without deliver, is ignored.
func onInboxReleased(f *Folder, e event.Envelope) {
	var p quarantinePayload
	if !e.Kernel() || !decode(e, &p) || p.Topic == "" || p.Topic == ProtoKey {
		return
	}
	if (p.Operator != "") == p.Auto || (p.Auto && !p.Deliver) {
		return
	}
	q := f.s.Variables.Quarantined[p.Topic]
	if len(q) == 0 || q[0].Released || q[0].MessageID != p.MessageID {
		return
	}
	next := append([]QuarantinedEntry(nil), q...)
	next[0].Released = true
	f.quarantined()[p.Topic] = next
}
