package inspect_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
)

// TestWatchIsTheFoldOfEachDurablePrefix: /api/watch sends the latest
// durable state, then one state per new event, each framed as the wire
// ABI's execution.watch (the sequence as the id, "state", fold.Encode's
// canonical JSON) and each byte for byte the fold of the log up to its
// sequence. A page holding the current state (Last-Event-ID) gets no
// first frame: its first is the next state, and at the end of the log
// nothing until Close ends the stream.
func TestWatchIsTheFoldOfEachDurablePrefix(t *testing.T) {
	w := newWorld(t)
	in, srv := serve(t, w.src, inspect.Options{})
	ctx := testContext(t)
	parked, err := w.src.StateAt(ctx, "parked", -1)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openSSE(t, ctx, srv, "/api/watch?id=parked", "")
	held := openSSE(t, ctx, srv, "/api/watch?id=parked", strconv.FormatInt(parked.Sequence, 10))
	stale := openSSE(t, ctx, srv, "/api/watch?id=parked", strconv.FormatInt(parked.Sequence-1, 10))
	malformed := openSSE(t, ctx, srv, "/api/watch?id=parked", "x")

	if err := w.rt.Resume(ctx, "parked", loom.ResumeEvent{EventType: "more", Payload: json.RawMessage("1")}); err != nil {
		t.Fatal(err)
	}
	end, err := w.rt.WaitForCompletion(ctx, "parked")
	if err != nil {
		t.Fatal(err)
	}
	durable, err := w.src.StateAt(ctx, "parked", -1)
	if err != nil || durable.Status != fold.StatusCompleted {
		t.Fatalf("the durable end: %v %v (%v)", durable.Status, err, end)
	}
	log, err := store.Read(ctx, w.events, "parked")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		s     *sseStream
		first int64
	}{{"no Last-Event-ID", fresh, parked.Sequence}, {"holding the current state", held, parked.Sequence + 1},
		{"holding an older state", stale, parked.Sequence}, {"a malformed Last-Event-ID", malformed, parked.Sequence}} {
		for seq := c.first; seq <= durable.Sequence; seq++ {
			e := c.s.mustNext(t, "state")
			want, err := fold.Encode(fold.Fold(log[:seq+1]))
			if err != nil {
				t.Fatal(err)
			}
			if e.id != strconv.FormatInt(seq, 10) || e.data != string(want) {
				t.Fatalf("%s: frame %s, want the state at #%d:\n%s\n%s", c.name, e.id, seq, e.data, want)
			}
		}
	}
	// Holding the end of a settled execution: nothing until the stream ends.
	upToDate := openSSE(t, ctx, srv, "/api/watch?id=parked", strconv.FormatInt(durable.Sequence, 10))
	in.Close()
	upToDate.mustEnd(t)
}

// TestWatchRefusals: an unknown execution and a malformed id are refused
// with the JSON errors /api/state gives, before any stream starts; a store
// that cannot follow a log is refused (501) with a JSON error. No refusal
// creates what it was asked about or changes the list.
func TestWatchRefusals(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w.src, inspect.Options{})
	_, before := getBody(t, srv, "/api/executions")
	for _, id := range []string{"nope", "", "a%0Ab"} {
		code, body := getBody(t, srv, "/api/watch?id="+id)
		wantCode, wantBody := getBody(t, srv, "/api/state?id="+id)
		if code != wantCode || body != wantBody || code < 400 {
			t.Fatalf("watch %q: %d %s; /api/state: %d %s", id, code, body, wantCode, wantBody)
		}
	}
	if code, _ := getBody(t, srv, "/api/watch?id=nope"); code != http.StatusNotFound {
		t.Fatalf("an unknown execution: %d", code)
	}
	// An EventStore that is not a store.Subscriber, with no Follow.
	type logOnly struct{ store.EventStore }
	_, plain := serve(t, inspect.Source{Events: logOnly{w.events}}, inspect.Options{})
	var refusal struct{ Error string }
	if code, body := getBody(t, plain, "/api/watch?id=parked"); code != http.StatusNotImplemented || json.Unmarshal([]byte(body), &refusal) != nil || refusal.Error == "" {
		t.Fatalf("a store that cannot follow: %d %s", code, body)
	}
	if _, after := getBody(t, srv, "/api/executions"); after != before {
		t.Fatalf("the refusals changed the list:\n%s\n%s", before, after)
	}
}

// TestWatchEndsWithThePage: a watch ends when its request does, leaving no
// follower behind (TestMain's goleak checks).
func TestWatchEndsWithThePage(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w.src, inspect.Options{})
	ctx := testContext(t)
	done, err := w.src.StateAt(ctx, "done", -1)
	if err != nil {
		t.Fatal(err)
	}
	s := openSSE(t, ctx, srv, "/api/watch?id=done", strconv.FormatInt(done.Sequence, 10))
	s.resp.Body.Close()
	if _, err := s.next(); err == nil {
		t.Fatal("read an event from a closed watch")
	}
}
