package inspect_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// world is a runtime over memory stores with one completed and one parked
// execution of a flow with two steps, a decision and a gate.
type world struct {
	rt     *loom.Runtime
	src    inspect.Source
	events *memstore.EventStore
}

func newWorld(t *testing.T) *world {
	t.Helper()
	step := func(id string) *loom.Step[int, int] {
		return loom.NewStep(id, func(_ context.Context, n int) (int, error) { return n + 1, nil })
	}
	a, b := step("a"), step("b")
	flow := loom.NewFlow("two", func(ctx *loom.Context, n int) (int, error) {
		n, err := loom.Run(ctx, a, n)
		if err != nil {
			return 0, err
		}
		pick, err := loom.Decide(ctx, "pick", func() (string, error) { return "left", nil })
		if err != nil || pick != "left" {
			return 0, err
		}
		more, err := loom.Suspend[int](ctx, "more")
		if err != nil {
			return 0, err
		}
		return loom.Run(ctx, b, n+more)
	})
	w := &world{events: memstore.NewEventStore()}
	snaps, refs := memstore.NewSnapshotStore(), memstore.NewBranchRegistry()
	rt, err := loom.New(loom.Config{Events: w.events, Snapshots: snaps, Branches: refs, Flows: []*loom.Flow{flow}, SnapshotEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	w.rt = rt
	w.src = inspect.Source{Events: w.events, Snapshots: snaps, Branches: refs}
	ctx := context.Background()
	for _, id := range []string{"done", "parked"} {
		if _, err := rt.Start(ctx, "two", 1, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Resume(ctx, "done", loom.ResumeEvent{EventType: "more", Payload: json.RawMessage("5")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Promote(ctx, "main", "done"); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestStateAtIsTheFold: at every sequence, StateAt (snapshot + tail) equals
// folding the log prefix from scratch, byte for byte.
func TestStateAtIsTheFold(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	log, err := store.Read(ctx, w.events, "done")
	if err != nil {
		t.Fatal(err)
	}
	for at := range log {
		got, err := w.src.StateAt(ctx, "done", int64(at))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := fold.Encode(got)
		b, _ := fold.Encode(fold.Fold(log[:at+1]))
		if !bytes.Equal(a, b) {
			t.Fatalf("state at #%d differs from the fold of the prefix:\n%s\n%s", at, a, b)
		}
	}
	latest, err := w.src.StateAt(ctx, "done", -1)
	if err != nil || latest.Status != fold.StatusCompleted {
		t.Fatalf("latest: %v %v", latest.Status, err)
	}
	var se *inspect.SequenceError
	if _, err := w.src.StateAt(ctx, "done", int64(len(log))); !errors.As(err, &se) || se.Last != int64(len(log)-1) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := w.src.StateAt(ctx, "nope", -1); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	// A snapshot ahead of the log is ignored: the log is authoritative.
	ahead, _ := snapshot.Encode(fold.Fold(log))
	snaps := memstore.NewSnapshotStore()
	if err := snaps.Save(ctx, store.Snapshot{ExecutionID: "parked", Sequence: 99, SchemaVersion: "1.26.0", State: ahead}); err != nil {
		t.Fatal(err)
	}
	st, err := inspect.Source{Events: w.events, Snapshots: snaps}.StateAt(ctx, "parked", -1)
	if err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("with a snapshot ahead of the log: %v %v", st.Status, err)
	}
}

// TestAPI exercises the JSON API and the live stream in process.
func TestAPI(t *testing.T) {
	w := newWorld(t)
	in, err := inspect.New(w.src, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	defer in.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, `<input type="range" id="seq"`) {
		t.Fatalf("page: %d", code)
	}
	if code, body := get("/assets/app.js"); code != 200 || !strings.Contains(body, "EventSource") {
		t.Fatalf("app.js: %d", code)
	}
	code, body := get("/api/executions")
	if code != 200 || !strings.Contains(body, `"executionId":"done"`) || !strings.Contains(body, `"status":"completed"`) ||
		!strings.Contains(body, `"suspendedOn":"more"`) {
		t.Fatalf("executions: %d %s", code, body)
	}
	if code, body := get("/api/events?id=done&from=1&limit=2"); code != 200 || strings.Count(body, `"eventType"`) != 2 || !strings.Contains(body, `"next":3`) {
		t.Fatalf("events: %d %s", code, body)
	}
	if code, body := get("/api/state?id=done&at=0"); code != 200 || !strings.Contains(body, `"status":"running"`) {
		t.Fatalf("state at 0: %d %s", code, body)
	}
	if code, _ := get("/api/state?id=nope"); code != 404 {
		t.Fatalf("unknown execution: %d", code)
	}
	if code, _ := get("/api/state?id=done&at=x"); code != 400 {
		t.Fatalf("bad at: %d", code)
	}
	if code, body := get("/api/refs"); code != 200 || !strings.Contains(body, `"name":"main","executionId":"done"`) {
		t.Fatalf("refs: %d %s", code, body)
	}
	resp, err := http.Post(srv.URL+"/api/state?id=done", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/refs", nil)
	req.Host = "evil.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host: %d", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	parked, _ := store.Read(ctx, w.events, "parked")
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/live?id=parked&from="+itoa(len(parked)), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := w.rt.Resume(ctx, "parked", loom.ResumeEvent{EventType: "more", Payload: json.RawMessage("1")}); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"eventType":"EXECUTION_COMPLETED"`) {
			break
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
