package inspect

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Heartbeat is the interval of keep-alive comments on an idle live stream.
const Heartbeat = 15 * time.Second

// live streams an execution's events from a sequence on as server-sent
// events (EventSource): catch-up first, then each event as the log grows,
// through Source.Follow. Each event is "id: <sequence>", "event: envelope",
// "data: <envelope JSON>"; a read failure ends the stream with an "error"
// event, and the page reconnects from the Last-Event-ID it holds.
func (in *Inspector) live(w http.ResponseWriter, r *http.Request) {
	follow := in.src.follow()
	if follow == nil {
		in.writeError(w, http.StatusNotImplemented, "this store cannot follow a log")
		return
	}
	from, ok := in.intParam(w, r, "from", 0, -1)
	if !ok {
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if n, err := strconv.Atoi(last); err == nil && n >= 0 && n+1 > from {
			from = n + 1
		}
	}
	id := r.URL.Query().Get("id")
	if _, err := in.src.StateAt(r.Context(), id, 0); err != nil {
		in.fail(w, err)
		return
	}
	sub, err := follow(r.Context(), id, int64(from))
	if err != nil {
		in.fail(w, err)
		return
	}
	defer sub.Close()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives a WriteTimeout; unsupported writers have none
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(frame []byte) bool {
		if _, err := w.Write(frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send([]byte("retry: 1000\n\n")) {
		return
	}
	beat := time.NewTicker(Heartbeat)
	defer beat.Stop()
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					in.opts.Logger.Error("inspect: following a log", "execution", id, "error", err)
					send([]byte("event: error\ndata: {\"error\":\"reading the store failed\"}\n\n"))
				}
				return
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(e); err != nil {
				return
			}
			frame := "id: " + strconv.FormatInt(e.Sequence, 10) + "\nevent: envelope\ndata: " +
				string(bytes.TrimRight(buf.Bytes(), "\n")) + "\n\n"
			if !send([]byte(frame)) {
				return
			}
		case <-beat.C:
			if !send([]byte(": ping\n\n")) {
				return
			}
		case <-in.stop:
			return
		case <-r.Context().Done():
			return
		}
	}
}
