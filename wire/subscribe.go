package wire

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// serveSubscribe answers execution.subscribe with a server-sent event
// stream. A refusal before the stream starts (bad params, unknown
// execution, denied, a store that cannot follow) is an ordinary JSON-RPC
// error response; after it starts, a failure is an "error" event and the
// stream ends. A Last-Event-ID header (the sequence of the last envelope the
// client holds) resumes after it, so a reconnecting client misses nothing.
func (h *handler) serveSubscribe(ctx context.Context, w http.ResponseWriter, r *http.Request, req request) {
	fail := func(err error) {
		if req.ID == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.writeJSON(w, http.StatusOK, errorResponse(req.ID, h.wireError(req.Method, err)))
	}
	var p SubscribeParams
	if err := decodeParams(req.Params, &p, true); err != nil {
		fail(err)
		return
	}
	if err := requireID("executionId", p.ExecutionID); err != nil {
		fail(err)
		return
	}
	if p.From < 0 {
		fail(invalidParams("from must be 0 or more"))
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		// n+1 is written without overflow: no log reaches math.MaxInt64.
		if n, err := strconv.ParseInt(last, 10, 64); err == nil && n >= p.From && n < math.MaxInt64 {
			p.From = n + 1
		}
	}
	sub, ok := h.opts.Events.(store.Subscriber)
	if !ok {
		fail(newError(CodeSubscribeUnsupported, "this server's event store cannot follow a log (no store.Subscriber); page with execution.events", nil))
		return
	}
	if err := h.admitRead(ctx, p.ExecutionID); err != nil {
		fail(err)
		return
	}
	s, err := sub.Subscribe(ctx, p.ExecutionID, p.From)
	if err != nil {
		fail(err)
		return
	}
	defer s.Close()

	send, ok := openStream(w, "subscription")
	if !ok {
		return
	}
	h.pump(ctx, req.Method, s, send, func(e event.Envelope) (string, error) { return envelopeFrame(e) })
}

// openStream starts a text/event-stream response (no write deadline: a
// stream outlives a server's WriteTimeout) with a comment naming what it
// is, and returns how to send a frame (false once the client is gone).
func openStream(w http.ResponseWriter, what string) (func(frame string) bool, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // unsupported writers have none
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(frame string) bool {
		if _, err := w.Write([]byte(frame)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	return send, send(": loom wire " + Version + " " + what + "\n\n")
}

// pump sends a frame per envelope of s (frame renders it): pumpItems over
// the subscription.
func (h *handler) pump(ctx context.Context, method string, s *store.Subscription, send func(string) bool, frame func(event.Envelope) (string, error)) {
	pumpItems(ctx, h, method, s.Events(), s.Err, send, frame)
}

// pumpItems sends a frame per item of items (frame renders it), a ping
// every Options.Heartbeat, and ends the stream with an error event when
// items closes with errOf() set, a frame does not render, or the server
// stops.
func pumpItems[T any](ctx context.Context, h *handler, method string, items <-chan T, errOf func() error,
	send func(string) bool, frame func(T) (string, error)) {
	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	stopping := stopSignal(ctx)
	for {
		select {
		case e, ok := <-items:
			if !ok {
				if err := errOf(); err != nil {
					send(errorFrame(h.wireError(method, err)))
				}
				return
			}
			f, err := frame(e)
			if err != nil {
				send(errorFrame(h.wireError(method, err)))
				return
			}
			if !send(f) {
				return
			}
		case <-beat.C:
			if !send(": ping\n\n") {
				return
			}
		case <-stopping:
			send(errorFrame(newError(CodeUnavailable, "the server is stopping; reconnect with Last-Event-ID", nil)))
			return
		case <-ctx.Done():
			return
		}
	}
}

// envelopeFrame renders one envelope as an SSE event: its sequence as the
// event id, "envelope" as the event name, its JSON on one data line.
// An envelope that does not encode as valid JSON in UTF-8 (a store holding
// bytes it should have refused) is an error: the stream then ends with an
// internal-error event rather than carry invalid JSON.
func envelopeFrame(e event.Envelope) (string, error) {
	b, err := marshalValid(e)
	if err != nil {
		return "", err
	}
	return "id: " + strconv.FormatInt(e.Sequence, 10) + "\nevent: envelope\ndata: " + string(b) + "\n\n", nil
}

// errorFrame renders a JSON-RPC error object as the stream's last event.
func errorFrame(e *Error) string {
	b, err := marshalValid(e)
	if err != nil { // never for the errors this package builds
		b = []byte(`{"code":-32603,"message":"internal error"}`)
	}
	return "event: error\ndata: " + string(b) + "\n\n"
}

type stopKey struct{}

// stopSignal returns the channel Serve closes when the server starts
// shutting down, nil (never ready) outside Serve.
func stopSignal(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopKey{}).(chan struct{})
	return ch
}
