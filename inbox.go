package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// The durable inbox (ADR 0110, kernel.features.inbox). A message is
// appended to a reserved stream of the EventStore, one per (chain, topic),
// before Send returns; the receiving execution records MESSAGE_CONSUMED when
// it takes one, and its _inbox cursor is the position of the next message
// in that stream. So messages are delivered in order and exactly once across
// restarts: consumption is part of the execution's own log, and the stream
// is never rewritten. A chain (continue-as-new) shares its streams.

// messageType is the event type of a message in an inbox stream.
const messageType = reservedPrefix + "message__"

// inboxWorkflow is the workflow id of the inbox streams, and inboxPrefix
// starts their execution ids.
const (
	inboxWorkflow = reservedPrefix + "inbox__"
	inboxPrefix   = store.InboxStreamPrefix // inboxWorkflow + ":", which a StatusIndex never lists
)

// MaxMessageBytes caps a message payload.
const MaxMessageBytes = 1 << 20

// streamID names the inbox stream of topic for chain: length-prefixed, so
// no pair of (chain, topic) collides.
func streamID(chain, topic string) string {
	return inboxPrefix + strconv.Itoa(len(chain)) + ":" + chain + ":" + topic
}

// chainOf is the id an execution's inbox streams are keyed by: its chain's
// first execution, or the execution itself for a fork (a fork's inbox is
// its own; Fork copies the messages its parent had consumed).
func chainOf(id string, st fold.State) string {
	var chain struct {
		ID string `json:"id"`
	}
	if len(st.Variables.ForkChain) == 0 && len(st.Variables.Chain) > 0 &&
		unmarshalRecorded(st.Variables.Chain, &chain) == nil && chain.ID != "" {
		return chain.ID
	}
	return id
}

// copyInbox gives a fork its parent's consumed messages, so its cursors
// point into its own streams at the same positions.
func (rt *Runtime) copyInbox(ctx context.Context, parent string, src fold.State, fork string) error {
	topics := make([]string, 0, len(src.Variables.Inbox))
	for topic := range src.Variables.Inbox { //loom:sorted below
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	for _, topic := range topics {
		n := src.Variables.Inbox[topic].Consumed
		if n == 0 {
			continue
		}
		from, to := streamID(chainOf(parent, src), topic), streamID(fork, topic)
		if rt.trimPoint(ctx, from) > 0 {
			// TrimInbox moved consumed messages out: a store-side copy
			// carries the trim point (and refuses a fork point before it).
			if err := rt.copyPrefix(ctx, from, to, n-1); err != nil {
				return fmt.Errorf("loom: fork of %q: copying its inbox %q: %w", parent, topic, err)
			}
			continue
		}
		evs, err := store.ReadRange(ctx, rt.cfg.Events, from, 0, n)
		if err != nil {
			return err
		}
		for i := range evs {
			evs[i].ExecutionID = to
		}
		if len(evs) > 0 {
			if err := rt.cfg.Events.Append(ctx, to, 0, evs); err != nil {
				return err
			}
		}
	}
	return nil
}

// message is one inbox message.
type message struct {
	ID      string
	Seq     int64 // position in its topic stream
	Payload json.RawMessage
}

// nextMessage returns the message at the execution's cursor on topic, if
// one was sent.
func (rt *Runtime) nextMessage(ctx context.Context, id string, st fold.State, topic string) (message, bool, error) {
	at := st.Variables.Inbox[topic].Consumed
	evs, err := store.ReadRange(ctx, rt.cfg.Events, streamID(chainOf(id, st), topic), at, at+1)
	if err != nil || len(evs) == 0 {
		return message{}, false, err
	}
	return message{ID: evs[0].ID, Seq: evs[0].Sequence, Payload: evs[0].PayloadOrNull()}, true, nil
}

func consumedPayload(w waitSpec, m message) map[string]any {
	return map[string]any{"topic": w.Topic, "messageId": m.ID, "position": m.Seq, "waitId": w.WaitID, "payload": m.Payload}
}

// Send appends payload to the inbox topic of an execution and returns once
// it is durable; a parked execution waiting on topic is then woken. A
// message to an execution that continued as new goes to its chain's live
// head; one to an ended execution is refused. With an Authorizer it is a
// "send".
func (rt *Runtime) Send(ctx context.Context, id, topic string, payload any) error {
	if !rt.cfg.Features.Inbox {
		return &NotConfiguredError{Field: "Features.Inbox", Need: "Send"}
	}
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := event.ValidateID("topic", topic); err != nil {
		return err
	}
	raw, err := marshalPayload(payload)
	if err != nil {
		return fmt.Errorf("loom: message payload: %w", err)
	}
	if len(raw) > MaxMessageBytes {
		return &event.PayloadTooLargeError{Field: "message", Size: len(raw), Limit: MaxMessageBytes}
	}
	if err := rt.authorize(ctx, "send", id, "", true); err != nil {
		return err
	}
	head, st, err := rt.chainHead(ctx, id)
	if err != nil {
		return err
	}
	stream := streamID(chainOf(head, st), topic)
	env := event.Envelope{ID: rt.cfg.NewID(), WorkflowID: inboxWorkflow, ExecutionID: stream, Type: messageType,
		Timestamp: rt.cfg.Clock.Now().UnixMilli(), Payload: orNull(raw)}
	if err := rt.appendMessage(ctx, stream, env); err != nil {
		return err
	}
	// The head may have continued as new while the message was appended:
	// its successor shares the stream, and is the one to wake.
	if now, _, err := rt.chainHead(ctx, head); err == nil {
		head = now
	}
	rt.deliver(ctx, head)
	return nil
}

// chainHead follows continue-as-new links to the chain's live execution.
func (rt *Runtime) chainHead(ctx context.Context, id string) (string, fold.State, error) {
	for hops := 0; ; hops++ {
		l, err := rt.load(ctx, id)
		if err != nil {
			return "", fold.State{}, err
		}
		st := l.state
		switch {
		case st.Status == fold.StatusContinued && st.Variables.ContinuedTo != "" && hops < maxChainHops:
			id = st.Variables.ContinuedTo
		case st.Status.Terminal():
			return "", fold.State{}, &SendRefusedError{ExecutionID: id, Reason: "the execution has ended (" + string(st.Status) + ")"}
		default:
			return id, st, nil
		}
	}
}

// maxChainHops bounds the links Send follows in one call.
const maxChainHops = 64

// streamLengths caches inbox stream lengths, so a send usually costs one
// append. The cache is only a hint: a conflicting append says where the
// stream really ends, and no lock is held across a store call.
type streamLengths struct {
	mu sync.Mutex
	n  map[string]int64
}

func (l *streamLengths) get(stream string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[stream]
}

func (l *streamLengths) advance(stream string, next int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int64{}
	}
	l.n[stream] = max(l.n[stream], next)
}

// maxSendAttempts bounds the conflicts one Send rides out.
const maxSendAttempts = 100

// appendMessage appends env at the end of stream, finding the end again
// after a conflict with another sender.
func (rt *Runtime) appendMessage(ctx context.Context, stream string, env event.Envelope) error {
	next := rt.streams.get(stream)
	for range maxSendAttempts {
		env.Sequence = next
		err := rt.cfg.Events.Append(ctx, stream, next, []event.Envelope{env})
		var conflict *store.SequenceConflictError
		if errors.As(err, &conflict) {
			next = conflict.Actual
			continue
		}
		if err == nil {
			rt.streams.advance(stream, next+1)
		}
		return err
	}
	return fmt.Errorf("loom: inbox stream %q: more than %d concurrent senders in a row; retry the send", stream, maxSendAttempts)
}

// deliver wakes an execution parked on a message wait whose message is
// now in its inbox: in place when this process holds its sticky park,
// otherwise through a gate transaction and a drive. Best effort: a running
// execution finds its messages itself, and a park re-checks after it is
// durable.
func (rt *Runtime) deliver(ctx context.Context, id string) {
	if rt.deliverInPlace(ctx, id, rt.messageAnswer) {
		return
	}
	err := rt.answerTx(ctx, id, "send", rt.messageAnswer)
	if err != nil && !errors.Is(err, errNothingToAnswer) && !isRefusal(err) && ctx.Err() == nil {
		// Best effort: the message is durable, and Recover delivers it.
		rt.cfg.Logger.Warn("loom: message not delivered now; Recover delivers it", "execution", id, "error", err)
	}
}

// awaitsMessage says whether the execution is parked on a select.
func awaitsMessage(st fold.State) bool {
	return st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil && st.Variables.SuspendedOn.On == gateSelect
}

// messageAnswer is the answer of st's select park once a message it waits
// for has arrived (nil before): MESSAGE_CONSUMED and the wait-addressed
// resume of its first message wait, or the resume alone when the message
// was consumed and its wake-up lost (a crash or a fork between the two).
func (rt *Runtime) messageAnswer(ctx context.Context, id string, st fold.State) ([]pendingEvent, error) {
	if !awaitsMessage(st) {
		return nil, nil
	}
	waits := parkWaits(st)
	for _, w := range waits {
		if answered(st, w.WaitID) {
			return []pendingEvent{{typ: event.ExecutionResumed, payload: map[string]any{"eventType": messageType, "waitId": w.WaitID}, meta: kernelStamp()}}, nil
		}
	}
	for _, w := range waits {
		if w.Kind != waitMessage {
			continue
		}
		m, ok, err := rt.nextMessage(ctx, id, st, w.Topic)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		return []pendingEvent{
			{typ: event.MessageConsumed, payload: consumedPayload(w, m), meta: kernelStamp()},
			{typ: event.ExecutionResumed, payload: map[string]any{"eventType": messageType, "waitId": w.WaitID}, meta: kernelStamp()},
		}, nil
	}
	return nil, nil
}
