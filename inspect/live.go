package inspect

import (
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

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
	s, ok := in.openStream(w, r)
	if !ok {
		return
	}
	in.pump(r.Context(), s, id, sub, func(e event.Envelope) (string, error) {
		b, err := encodeJSON(e)
		if err != nil {
			return "", err
		}
		return sseFrame(strconv.FormatInt(e.Sequence, 10), "envelope", b)
	})
}
