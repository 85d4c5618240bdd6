package inspect

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Heartbeat is the interval of keep-alive comments on an idle live stream.
const Heartbeat = 15 * time.Second

// streamErrorFrame is the event that ends a stream on a read failure; the
// page's EventSource then reconnects with the Last-Event-ID it holds.
const streamErrorFrame = "event: error\ndata: {\"error\":\"reading the store failed\"}\n\n"

// eventStream is one server-sent-events response (EventSource), shared by
// /api/live, /api/watch and /api/executions/live: "retry: 1000" first, so a
// page reconnects a second after a drop, and every frame flushed at once.
type eventStream struct {
	w  io.Writer
	rc *http.ResponseController
}

// openStream starts an event stream, or refuses it (503) once the
// Inspector is closed. It lifts the write deadline: a stream outlives a
// server's WriteTimeout (writers without deadlines have none to lift). It
// returns false when there is nothing to stream: the page is already gone,
// or r is a HEAD request, answered with the stream's headers alone (its
// writes would be discarded, holding the connection until the client
// closed it).
func (in *Inspector) openStream(w http.ResponseWriter, r *http.Request) (*eventStream, bool) {
	select {
	case <-in.stop:
		in.writeError(w, http.StatusServiceUnavailable, "the inspector is closing")
		return nil, false
	default:
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // unsupported: no deadline to lift
	w.WriteHeader(http.StatusOK)
	s := &eventStream{w: w, rc: rc}
	return s, s.send("retry: 1000\n\n")
}

// send writes one frame and flushes it; false means the page is gone.
func (s *eventStream) send(frame string) bool {
	if _, err := io.WriteString(s.w, frame); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// errMultiLine refuses data that would split an event: SSE ends a data
// line at CR or LF, and every payload here is compact JSON, which has none.
var errMultiLine = errors.New("inspect: an event's data holds a line break")

// sseFrame renders one event: "id: <id>", "event: <name>", and data on one
// line.
func sseFrame(id, name string, data []byte) (string, error) {
	if bytes.ContainsAny(data, "\r\n") {
		return "", errMultiLine
	}
	return "id: " + id + "\nevent: " + name + "\ndata: " + string(data) + "\n\n", nil
}

// pump sends one frame per event of sub, as render makes it, and a
// heartbeat comment every Heartbeat, until sub ends (a read failure is
// logged and sent as an error event), render fails (the same), the page
// goes, or the Inspector closes.
func (in *Inspector) pump(ctx context.Context, s *eventStream, id string, sub *store.Subscription, render func(event.Envelope) (string, error)) {
	beat := time.NewTicker(Heartbeat)
	defer beat.Stop()
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					in.opts.Logger.Error("inspect: following a log", "execution", id, "error", err)
					s.send(streamErrorFrame)
				}
				return
			}
			frame, err := render(e)
			if err != nil {
				in.opts.Logger.Error("inspect: rendering a live event", "execution", id, "sequence", e.Sequence, "error", err)
				s.send(streamErrorFrame)
				return
			}
			if !s.send(frame) {
				return
			}
		case <-beat.C:
			if !s.send(": ping\n\n") {
				return
			}
		case <-in.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}
