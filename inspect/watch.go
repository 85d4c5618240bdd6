package inspect

import (
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// watch is /api/watch, a live query of an execution's folded durable
// state framed as the wire ABI's execution.watch: server-sent events, the
// current state first (Source.StateAt: the nearest snapshot plus the log),
// then the state after each new event as Source.Follow delivers it, folded
// one envelope at a time (fold.Folder.ApplyChecked, so a gap in what the
// follower delivers ends the stream rather than skipping an event). Each
// frame is "id: <the state's sequence>", "event: state", "data:
// <fold.Encode's canonical JSON>". A Last-Event-ID equal to the current
// sequence (the state the page holds) skips the first frame. Refusals
// before the stream starts are the JSON errors of /api/state; a read
// failure later ends the stream with an "error" event.
func (in *Inspector) watch(w http.ResponseWriter, r *http.Request) {
	follow := in.src.follow()
	if follow == nil {
		in.writeError(w, http.StatusNotImplemented, "this store cannot follow a log")
		return
	}
	held := int64(-1)
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if n, err := strconv.ParseInt(last, 10, 64); err == nil && n >= 0 {
			held = n
		}
	}
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	st, err := in.src.StateAt(ctx, id, -1)
	if err != nil {
		in.fail(w, err)
		return
	}
	first, err := stateFrame(st)
	if err != nil {
		in.fail(w, err)
		return
	}
	sub, err := follow(ctx, id, st.Sequence+1)
	if err != nil {
		in.fail(w, err)
		return
	}
	defer sub.Close()
	s, ok := in.openStream(w, r)
	if !ok {
		return
	}
	if st.Sequence != held && !s.send(first) {
		return
	}
	f := fold.NewFolder(st)
	in.pump(ctx, s, id, sub, func(e event.Envelope) (string, error) {
		if err := f.ApplyChecked(e); err != nil {
			return "", err
		}
		return stateFrame(f.State())
	})
}

// stateFrame renders a state as execution.watch does: its sequence as the
// id, "state" as the name, fold.Encode's canonical JSON as the data.
func stateFrame(st fold.State) (string, error) {
	b, err := fold.Encode(st)
	if err != nil {
		return "", err
	}
	return sseFrame(strconv.FormatInt(st.Sequence, 10), "state", b)
}
