package telemetry_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/telemetry"
	"github.com/loom-kernel/loom/wire"
)

// greetFlow parks on "confirm"; its start returns once it parked.
func greetFlow() *loom.Flow {
	return loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		return loom.Suspend[string](ctx, "confirm")
	})
}

// wireStart POSTs execution.start of greet as executionId id, with
// traceparent when it is not "".
func wireStart(t *testing.T, url, id, traceparent string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"greet","input":"ada","executionId":"` + id + `"}}`
	req, err := http.NewRequest(http.MethodPost, url+wire.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Error *wire.Error `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil || resp.StatusCode != http.StatusOK || res.Error != nil {
		t.Fatalf("execution.start: %s %s", resp.Status, out)
	}
}

func TestHTTPMiddlewareContinuesTheCallersTraceIntoTheRecordedStart(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	rt := r.runtime(greetFlow())
	h, err := wire.Handler(rt, wire.Options{Events: r.events, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(telemetry.HTTPMiddleware(h, telemetry.HTTPOptions{Logger: slog.New(slog.NewTextHandler(r.logs, nil))}))
	defer srv.Close()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	wireStart(t, srv.URL, "g-1", "00-"+traceID+"-00f067aa0ba902b7-01")
	if got := recordedTrace(t, r, "g-1").TraceID().String(); got != traceID {
		t.Fatalf("EXECUTION_STARTED records trace %s, want the caller's %s", got, traceID)
	}
	op := r.ended("loom.operation start")
	if len(op) != 1 || op[0].Parent().SpanID().String() != "00f067aa0ba902b7" || !op[0].Parent().IsRemote() {
		t.Fatalf("the start operation's parent is not the caller's remote span: %v", op)
	}
	if strings.Contains(r.logs.String(), "traceparent") {
		t.Fatalf("a valid traceparent was warned about: %s", r.logs.String())
	}

	// Malformed headers are ignored: the starts succeed in traces of
	// their own, and one warning is logged for the two.
	for _, id := range []string{"g-2", "g-3"} {
		wireStart(t, srv.URL, id, "00-not-a-trace-01")
		if rec := recordedTrace(t, r, id); !rec.IsValid() || rec.TraceID().String() == traceID {
			t.Fatalf("%s records trace %v, want a new valid one", id, rec)
		}
	}
	if n := strings.Count(r.logs.String(), "ignoring a traceparent header that does not parse"); n != 1 {
		t.Fatalf("%d warnings about malformed traceparents, want 1:\n%s", n, r.logs.String())
	}
}
