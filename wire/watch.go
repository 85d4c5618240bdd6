package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// WatchParams are the params of execution.watch (1.2.0), a live query of an
// execution's folded state. The response is a text/event-stream (doc.go):
// the current durable state first, then the state after each new durable
// event, each as "event: state" with the state's sequence as its id. A
// Last-Event-ID header (the sequence of the state the client holds) skips
// the first state when nothing changed since.
type WatchParams struct {
	ExecutionID string `json:"executionId"`
}

// serveWatch answers execution.watch: the durable state (loaded from the
// store, snapshot plus log), then the log followed from the next sequence
// and folded one envelope at a time (fold.Folder, the runtime's fold), each
// state sent as fold.Encode's canonical JSON. Refusals before the stream
// starts are JSON-RPC errors; later failures an "error" event, as for
// execution.subscribe.
func (h *handler) serveWatch(ctx context.Context, w http.ResponseWriter, r *http.Request, req request) {
	fail := func(err error) {
		if req.ID == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.writeJSON(w, http.StatusOK, errorResponse(req.ID, h.wireError(req.Method, err)))
	}
	var p WatchParams
	if err := decodeParams(req.Params, &p, true); err != nil {
		fail(err)
		return
	}
	if err := requireID("executionId", p.ExecutionID); err != nil {
		fail(err)
		return
	}
	held := int64(-1)
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if n, err := strconv.ParseInt(last, 10, 64); err == nil && n >= 0 {
			held = n
		}
	}
	sub, ok := h.opts.Events.(store.Subscriber)
	if !ok {
		fail(newError(CodeSubscribeUnsupported, "this server's event store cannot follow a log (no store.Subscriber); poll execution.state", nil))
		return
	}
	// The durable state: LoadStateAt reads the store (a live drive's state
	// may hold events not yet durable, which a watcher must not see).
	st, err := h.rt.LoadStateAt(ctx, p.ExecutionID, math.MaxInt64-1)
	if err != nil {
		fail(err)
		return
	}
	s, err := sub.Subscribe(ctx, p.ExecutionID, st.Sequence+1)
	if err != nil {
		fail(err)
		return
	}
	defer s.Close()

	send, ok := openStream(w, "watch")
	if !ok {
		return
	}
	if st.Sequence != held {
		frame, err := stateFrame(st)
		if err != nil {
			send(errorFrame(h.wireError(req.Method, err)))
			return
		}
		if !send(frame) {
			return
		}
	}
	f := fold.NewFolder(st)
	h.pump(ctx, req.Method, s, send, func(e event.Envelope) (string, error) {
		if err := f.ApplyChecked(e); err != nil {
			return "", err
		}
		return stateFrame(f.State())
	})
}

// stateFrame renders a state as an SSE event: its sequence as the id,
// "state" as the name, fold.Encode's canonical JSON on one data line.
func stateFrame(st fold.State) (string, error) {
	b, err := fold.Encode(st)
	if err != nil {
		return "", err
	}
	if b, err = marshalValid(json.RawMessage(b)); err != nil {
		return "", err
	}
	return "id: " + strconv.FormatInt(st.Sequence, 10) + "\nevent: state\ndata: " + string(b) + "\n\n", nil
}

// StateUpdate is one state of an execution.watch stream: the canonical
// state JSON (fold.Encode) after the event at Sequence.
type StateUpdate struct {
	Sequence int64
	State    json.RawMessage
}

// Decode decodes the update's state.
func (u StateUpdate) Decode() (fold.State, error) { return fold.Decode(u.State) }

// Watch is an execution.watch stream on the client side: the execution's
// states, the current one first, in sequence order, until it is closed,
// its context ends, or the stream fails.
type Watch struct{ s *stream[StateUpdate] }

// States is closed when the watch ends; then Err says why.
func (w *Watch) States() <-chan StateUpdate { return w.s.items }

// Err returns why the watch ended, as Subscription.Err does. Call it once
// States is closed.
func (w *Watch) Err() error {
	w.s.wait()
	return w.s.err
}

// Last returns the sequence of the last state delivered, -1 before any:
// pass it as held to Watch again to go on where it ended.
func (w *Watch) Last() int64 {
	w.s.wait()
	return w.s.last
}

// Close ends the watch and waits for its goroutine to exit.
func (w *Watch) Close() { w.s.stop() }

// Watch calls execution.watch. held is the sequence of the state the
// caller already holds (-1 for none): the server then skips the first state
// when nothing changed since. A refusal is returned here as an *Error;
// later failures end the Watch and are reported by its Err.
func (c *Client) Watch(ctx context.Context, p WatchParams, held int64) (*Watch, error) {
	var header map[string]string
	if held >= 0 {
		header = map[string]string{"Last-Event-ID": strconv.FormatInt(held, 10)}
	}
	s, err := dialStream(c, ctx, MethodWatch, p, header, "state", func(_ string, data []byte) (StateUpdate, int64, error) {
		st, err := fold.Decode(data)
		if err != nil {
			return StateUpdate{}, 0, fmt.Errorf("wire: a state on the stream: %w", err)
		}
		return StateUpdate{Sequence: st.Sequence, State: append(json.RawMessage(nil), data...)}, st.Sequence, nil
	})
	if err != nil {
		return nil, err
	}
	return &Watch{s: s}, nil
}
