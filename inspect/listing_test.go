package inspect_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
)

// listFrame is one frame of /api/executions/live, checked: its data is a
// page of /api/executions and its id the digest of that data.
type listFrame struct {
	data string
	page struct {
		Executions []inspect.Listing `json:"executions"`
		Next       string            `json:"next"`
	}
}

func readListFrame(t *testing.T, s *sseStream) listFrame {
	t.Helper()
	e := s.mustNext(t, "executions")
	sum := sha256.Sum256([]byte(e.data))
	if e.id != hex.EncodeToString(sum[:16]) {
		t.Fatalf("frame id %q is not the digest of its data", e.id)
	}
	f := listFrame{data: e.data}
	if err := json.Unmarshal([]byte(e.data), &f.page); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f listFrame) status(id string) (fold.Status, bool) {
	for _, l := range f.page.Executions {
		if l.ExecutionID == id {
			return l.Status, true
		}
	}
	return "", false
}

// waitListFrame reads frames until one satisfies ok; every frame must
// differ from the one before it (a list is sent only when it changed).
func waitListFrame(t *testing.T, s *sseStream, prev string, ok func(listFrame) bool) listFrame {
	t.Helper()
	for {
		f := readListFrame(t, s)
		if f.data == prev {
			t.Fatalf("the same list sent twice: %s", f.data)
		}
		if ok(f) {
			return f
		}
		prev = f.data
	}
}

// TestLiveListFollowsTheStore: /api/executions/live sends the page
// /api/executions?counts=1 answers, byte for byte, then the page again whenever it
// changes: a newly started execution appears, and its status moves as it
// is resumed and completes. A page reconnecting with the digest of an
// unchanged list gets no first frame: its first is the changed list.
func TestLiveListFollowsTheStore(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w.src, inspect.Options{ListPoll: inspect.MinListPoll})
	ctx := testContext(t)
	code, body := getBody(t, srv, "/api/executions?counts=1")
	if code != http.StatusOK {
		t.Fatalf("/api/executions: %d %s", code, body)
	}
	s := openSSE(t, ctx, srv, "/api/executions/live", "")
	first := readListFrame(t, s)
	if first.data != strings.TrimSuffix(body, "\n") {
		t.Fatalf("the first list is not /api/executions:\n%s\n%s", first.data, body)
	}
	digest := hex.EncodeToString(func() []byte { b := sha256.Sum256([]byte(first.data)); return b[:16] }())
	held := openSSE(t, ctx, srv, "/api/executions/live", digest)

	if _, err := w.rt.Start(ctx, "two", 1, loom.WithExecutionID("fresh")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForSuspend(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	listed := func(f listFrame) bool { _, ok := f.status("fresh"); return ok }
	if f := readListFrame(t, held); !listed(f) {
		t.Fatalf("a page holding the unchanged list was sent it again: %s", f.data)
	}
	parked := func(f listFrame) bool { st, _ := f.status("fresh"); return st == fold.StatusSuspended }
	last := waitListFrame(t, s, first.data, parked)

	if err := w.rt.Resume(ctx, "fresh", loom.ResumeEvent{EventType: "more", Payload: json.RawMessage("2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	_, now := getBody(t, srv, "/api/executions?counts=1")
	end := waitListFrame(t, s, last.data, func(f listFrame) bool { return f.data == strings.TrimSuffix(now, "\n") })
	if st, _ := end.status("fresh"); st != fold.StatusCompleted {
		t.Fatalf("fresh is %s in the settled list", st)
	}
}

// TestLiveListQuery: the live list takes /api/executions's query (a page
// size, a cursor, an id prefix, a flow, a tenant, a status), and a page
// holding a digest that is not the current list's gets the list at once.
// A malformed limit, status or cursor is refused with /api/executions's
// JSON error, no stream, and the store as it was.
func TestLiveListQuery(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w.src, inspect.Options{ListPoll: inspect.MinListPoll})
	ctx := testContext(t)
	_, before := getBody(t, srv, "/api/executions?counts=1")
	_, first := getBody(t, srv, "/api/executions?limit=1")
	var page struct{ Next string }
	if err := json.Unmarshal([]byte(first), &page); err != nil || page.Next == "" {
		t.Fatalf("a first page of one has no next: %s %v", first, err)
	}
	for _, q := range []string{"?limit=1", "?after=" + page.Next, "?tenant=nobody", "?q=par", "?flow=two", "?status=suspended"} {
		_, body := getBody(t, srv, "/api/executions?counts=1&"+q[1:])
		if f := readListFrame(t, openSSE(t, ctx, srv, "/api/executions/live"+q, "")); f.data != strings.TrimSuffix(body, "\n") {
			t.Fatalf("%s: the live list %s, /api/executions %s", q, f.data, body)
		}
	}
	if f := readListFrame(t, openSSE(t, ctx, srv, "/api/executions/live", "0123456789abcdef")); f.data != strings.TrimSuffix(before, "\n") {
		t.Fatalf("holding another digest: the live list %s, /api/executions %s", f.data, before)
	}
	for _, q := range []string{"?limit=x", "?limit=-1", "?limit=1.5", "?status=done", "?after=done"} {
		code, body := getBody(t, srv, "/api/executions/live"+q)
		if wantCode, wantBody := getBody(t, srv, "/api/executions"+q); code != http.StatusBadRequest || code != wantCode || body != wantBody {
			t.Fatalf("%s: %d %s, /api/executions: %d %s", q, code, body, wantCode, wantBody)
		}
	}
	if _, after := getBody(t, srv, "/api/executions?counts=1"); after != before {
		t.Fatalf("the refusals changed the list:\n%s\n%s", before, after)
	}
}

// countingEvents counts the reads of each execution's log.
type countingEvents struct {
	store.EventStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingEvents) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.EventStore.ReadFrom(ctx, id, from)
}

func (c *countingEvents) readsOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// TestLiveListRefoldsOnlyWhatGrew: re-listing reads the log of an
// execution only when the store lists it with a new length; a settled
// execution is folded once per live list, however often it re-lists.
func TestLiveListRefoldsOnlyWhatGrew(t *testing.T) {
	w := newWorld(t)
	events := &countingEvents{EventStore: w.events, reads: map[string]int{}}
	_, srv := serve(t, inspect.Source{Events: events, Snapshots: w.src.Snapshots}, inspect.Options{ListPoll: inspect.MinListPoll})
	ctx := testContext(t)
	getBody(t, srv, "/api/executions")
	perFold := events.readsOf("done") // the reads of one fold of it
	s := openSSE(t, ctx, srv, "/api/executions/live", "")
	first := readListFrame(t, s)
	if err := w.rt.Resume(ctx, "parked", loom.ResumeEvent{EventType: "more", Payload: json.RawMessage("3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "parked"); err != nil {
		t.Fatal(err)
	}
	_, now := getBody(t, srv, "/api/executions?counts=1")
	// The list follows parked to its end, refolding it as it grows...
	waitListFrame(t, s, first.data, func(f listFrame) bool { return f.data == strings.TrimSuffix(now, "\n") })
	// ...and folded done once: its reads are three folds, the live list's
	// first and each /api/executions.
	if n := events.readsOf("done"); perFold < 1 || n != 3*perFold {
		t.Fatalf("the settled execution's log was read %d times, want %d (three folds of %d reads)", n, 3*perFold, perFold)
	}
}
