package inspect_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// Divergence and code pins (issue 20, point 2): an execution recorded
// under one version of a flow, then an app running another, and an
// inspector over the same store asking the app — over the wire ABI or in
// the app's process — whether the log replays under its code.

// checkedFlow is "order": steps, then the gate "g", under code pin pin.
func checkedFlow(pin string, steps ...string) *loom.Flow {
	return loom.NewFlow("order", func(ctx *loom.Context, in string) (string, error) {
		out := in
		for _, id := range steps {
			var err error
			if out, err = loom.Run(ctx, loom.NewStep(id, func(_ context.Context, s string) (string, error) { return s + id, nil }), out); err != nil {
				return "", err
			}
		}
		_, err := ctx.Suspend("g")
		return out, err
	}, loom.WithCodeFingerprint(pin))
}

func checkedRuntime(t *testing.T, events store.EventStore, flow *loom.Flow) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}, StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// recordOrder parks "o1" under pin v1 with steps a and b, and returns its log.
func recordOrder(t *testing.T, events store.EventStore) []event.Envelope {
	t.Helper()
	rt := checkedRuntime(t, events, checkedFlow("v1", "a", "b"))
	ctx := actCtx(t)
	if _, err := rt.Start(ctx, "order", "x", loom.WithExecutionID("o1")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := store.Read(ctx, events, "o1")
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// serveInspector serves an inspector over events with opts.
func serveInspector(t *testing.T, events store.EventStore, opts inspect.Options) string {
	t.Helper()
	in, err := inspect.New(inspect.Source{Events: events}, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close)
	return srv.URL
}

func getAnswer(t *testing.T, url string) answer {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

type checkAnswer struct {
	ExecutionID string            `json:"executionId"`
	Report      loom.ReplayReport `json:"report"`
	Error       string            `json:"error"`
}

func TestCheckMarksWhereTheAppsCodePartsFromTheLog(t *testing.T) {
	events := memstore.NewEventStore()
	before := recordOrder(t, events)
	renamed := slices.IndexFunc(before, func(e event.Envelope) bool {
		return e.Type == event.StepStarted && strings.Contains(string(e.Payload), `"stepId":"b"`)
	})

	// The app runs the next version, b renamed b2, behind the wire ABI.
	app := checkedRuntime(t, events, checkedFlow("v1", "a", "b2"))
	h, err := wire.Handler(app, wire.Options{Events: events, Authenticate: wire.BearerToken(appToken, "inspector")})
	if err != nil {
		t.Fatal(err)
	}
	appSrv := httptest.NewServer(h)
	t.Cleanup(appSrv.Close)
	client, err := wire.NewClient(appSrv.URL, wire.WithToken(appToken))
	if err != nil {
		t.Fatal(err)
	}
	overWire := serveInspector(t, events, inspect.Options{Check: client})

	var got checkAnswer
	if a := getAnswer(t, overWire+"/api/check?id=o1"); a.status != http.StatusOK {
		t.Fatalf("check: %d %s", a.status, a.body)
	} else {
		a.json(t, &got)
	}
	if rep := got.Report; rep.Verdict != loom.ReplayDiverged || rep.Sequence == nil || *rep.Sequence != int64(renamed) ||
		!strings.Contains(rep.Expected, `"b"`) || !strings.Contains(rep.Got, `"b2"`) {
		t.Fatalf("over the wire: %+v, want diverged at #%d", rep, renamed)
	}
	var session map[string]any
	if a := getAnswer(t, overWire+"/api/session"); a.status != http.StatusOK {
		t.Fatalf("session: %d %s", a.status, a.body)
	} else {
		a.json(t, &session)
	}
	if session["check"] != true || session["actions"] != false {
		t.Fatalf("session %v, want check without actions", session)
	}

	// In the app's own process, under a new code pin.
	repinned := checkedRuntime(t, events, checkedFlow("v2", "a", "b"))
	inApp := serveInspector(t, events, inspect.Options{Check: inspect.RuntimeChecker(repinned)})
	getAnswer(t, inApp+"/api/check?id=o1").json(t, &got)
	if rep := got.Report; rep.Verdict != loom.ReplayPinMismatch || rep.RecordedPin != "v1" || rep.RegisteredPin != "v2" {
		t.Fatalf("in the app: %+v, want a code-pin mismatch v1 → v2", rep)
	}

	for _, c := range []struct {
		url, why string
		status   int
	}{
		{overWire + "/api/check", "no id", http.StatusBadRequest},
		{overWire + "/api/check?id=nobody", "an unknown execution, over the wire", http.StatusNotFound},
		{inApp + "/api/check?id=nobody", "an unknown execution, in the app", http.StatusNotFound},
		{inApp + "/api/check?id=b%00d", "a malformed id", http.StatusBadRequest},
		{serveInspector(t, events, inspect.Options{}) + "/api/check?id=o1", "no Check", http.StatusNotImplemented},
	} {
		a := getAnswer(t, c.url)
		var e checkAnswer
		a.json(t, &e)
		if a.status != c.status || e.Error == "" {
			t.Errorf("%s: %d %s, want %d with an error", c.why, a.status, a.body, c.status)
		}
	}
	after, err := store.Read(actCtx(t), events, "o1")
	if err != nil {
		t.Fatal(err)
	}
	if b1, b2 := mustJSON(t, before), mustJSON(t, after); b1 != b2 {
		t.Fatalf("a check changed the log:\n%s\nwas\n%s", b2, b1)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
