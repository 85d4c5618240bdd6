package inspect

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// LogPage is how many events /api/log reads from the store at a time: the
// download holds one page in memory, never the whole log.
const LogPage = DefaultEventsPage

// download is /api/log: an execution's whole log as JSON lines
// (application/x-ndjson), one envelope per line in sequence order, encoded
// as /api/events encodes it, and offered as the attachment "<id>.jsonl". It
// is written as it is read, LogPage events at a time (store.ReadRange), so
// a log of any length costs one page of memory; events appended while it
// is written are included up to the read that finds the end. A bad id is
// refused (400) and an execution with no log is 404, both as JSON errors
// before anything is written; a read that fails once lines are written
// aborts the response, so a truncated download never looks complete.
func (in *Inspector) download(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	if err := event.ValidateID("execution id", id); err != nil {
		in.fail(w, err)
		return
	}
	pages := logPages{events: in.src.Events, id: id}
	first, err := pages.next(ctx)
	if err != nil {
		in.fail(w, err)
		return
	}
	if len(first) == 0 {
		in.writeError(w, http.StatusNotFound, "no such execution in this store")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", attachment(id+".jsonl"))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	out := bufio.NewWriter(w)
	for page := first; len(page) > 0; {
		for _, e := range page {
			b, err := encodeJSON(e)
			if err != nil {
				in.abort(err)
			}
			if _, err := out.Write(append(b, '\n')); err != nil {
				return // the page is gone
			}
		}
		if err := out.Flush(); err != nil {
			return
		}
		if page, err = pages.next(ctx); err != nil {
			in.abort(err)
		}
	}
}

// abort ends a response whose status is already sent: the client sees a
// broken download rather than a short one that looks whole.
func (in *Inspector) abort(err error) {
	in.opts.Logger.Error("inspect: log download failed", "error", err)
	panic(http.ErrAbortHandler)
}

// logPages reads one execution's log a page at a time. A page that ends
// short of its bound is the end of the log, unless a compaction trimmed
// the events after it (store.PrefixTrimmer: the start event stays, the
// events up to the trim point are gone), which the next page skips.
type logPages struct {
	events store.EventStore
	id     string
	from   int64
	done   bool
}

// next returns the next non-empty page, or none at the end of the log.
func (p *logPages) next(ctx context.Context) ([]event.Envelope, error) {
	for !p.done {
		to := p.from + LogPage
		page, err := store.ReadRange(ctx, p.events, p.id, p.from, to)
		if err != nil {
			return nil, err
		}
		end := p.from
		if len(page) > 0 {
			end = page[len(page)-1].Sequence + 1
		}
		if end < to {
			through, err := trimmedThrough(ctx, p.events, p.id)
			if err != nil {
				return nil, err
			}
			if end >= 1 && through >= end {
				end = through + 1
			} else {
				p.done = true
			}
		}
		p.from = end
		if len(page) > 0 {
			return page, nil
		}
	}
	return nil, nil
}

// trimmedThrough is the log's trim point, 0 for a store that never trims.
func trimmedThrough(ctx context.Context, events store.EventStore, id string) (int64, error) {
	tr, ok := events.(store.PrefixTrimmer)
	if !ok {
		return 0, nil
	}
	return tr.TrimmedThrough(ctx, id)
}

// attachment is the Content-Disposition of a download named name:
// attachment; filename="<name>" when name is plain, else a plain fallback
// (every other character an underscore) and the exact name as RFC 6266's
// filename* (RFC 8187 encoding), so no id can break out of the header.
func attachment(name string) string {
	plain := strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && fileNameByte(byte(r)) {
			return r
		}
		return '_'
	}, name)
	if plain == name {
		return `attachment; filename="` + name + `"`
	}
	var exact strings.Builder
	for _, b := range []byte(name) {
		if fileNameByte(b) {
			exact.WriteByte(b)
		} else {
			fmt.Fprintf(&exact, "%%%02X", b)
		}
	}
	return `attachment; filename="` + plain + `"; filename*=UTF-8''` + exact.String()
}

// fileNameByte reports a byte that needs no quoting in either form of a
// file name: letters, digits and - . _ ~ +.
func fileNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-._~+", b) >= 0
}
