package inspect_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// readSpy is a memory store that records the reads made of it.
type readSpy struct {
	*memstore.EventStore
	mu     sync.Mutex
	ranges [][2]int64 // ReadRange's from and to
	froms  int        // ReadFrom calls
}

func (s *readSpy) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2]int64{from, to})
	s.mu.Unlock()
	return s.EventStore.ReadRange(ctx, id, from, to)
}

func (s *readSpy) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	s.mu.Lock()
	s.froms++
	s.mu.Unlock()
	return s.EventStore.ReadFrom(ctx, id, from)
}

// appendLog writes n envelopes of execution id straight into events: the
// download reads a log, whoever wrote it. Payloads carry bytes an HTML
// escaper would change and non-ASCII text; some envelopes carry metadata.
func appendLog(t *testing.T, events store.EventStore, id string, n int) []event.Envelope {
	t.Helper()
	evs := make([]event.Envelope, n)
	for i := range evs {
		evs[i] = event.Envelope{ID: fmt.Sprintf("%s-%d", id, i), WorkflowID: "bulk", ExecutionID: id, Type: "STEP_COMPLETED",
			Sequence: int64(i), Timestamp: 1767603600000 + int64(i)*250,
			Payload: json.RawMessage(fmt.Sprintf(`{"stepId":"s%d","output":"<a&b> é %d"}`, i, i))}
		if i%7 == 0 {
			evs[i].Metadata = map[string]json.RawMessage{"kernel": json.RawMessage("true")}
		}
	}
	evs[0].Type = "EXECUTION_STARTED"
	if err := events.Append(context.Background(), id, 0, evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func serveLog(t *testing.T, events store.EventStore) *httptest.Server {
	t.Helper()
	in, err := inspect.New(inspect.Source{Events: events}, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: the server's Close waits for streams
	return srv
}

func download(t *testing.T, srv *httptest.Server, id string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/api/log?id=" + url.QueryEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// decodeLines decodes JSON lines, failing on a line that is not one
// envelope.
func decodeLines(t *testing.T, body []byte) ([]event.Envelope, [][]byte) {
	t.Helper()
	var evs []event.Envelope
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e event.Envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d is not an envelope: %v: %s", len(evs), err, sc.Bytes())
		}
		evs = append(evs, e)
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs, lines
}

// TestLogDownload: /api/log answers a log of several pages as JSON lines,
// one envelope per line, exactly the stored envelopes in order, in the
// bytes /api/events gives them, as an attachment named after the id; and
// it reads the log a page at a time, never whole.
func TestLogDownload(t *testing.T) {
	spy := &readSpy{EventStore: memstore.NewEventStore()}
	want := appendLog(t, spy, "big-1", 3*inspect.LogPage+17)
	srv := serveLog(t, spy)

	resp, body := download(t, srv, "big-1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="big-1.jsonl"` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		t.Fatal("the last line is not terminated")
	}
	got, lines := decodeLines(t, body)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the download holds %d envelopes that differ from the %d stored", len(got), len(want))
	}
	spy.mu.Lock()
	ranges, froms := spy.ranges, spy.froms
	spy.mu.Unlock()
	if froms != 0 || len(ranges) < 4 {
		t.Fatalf("the download read the log whole (%d ReadFrom) or in %d ranges", froms, len(ranges))
	}
	for _, r := range ranges {
		if r[1]-r[0] > inspect.LogPage {
			t.Fatalf("a read of %d events, more than a page (%d)", r[1]-r[0], inspect.LogPage)
		}
	}

	// The same bytes as /api/events, envelope by envelope.
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	resp, err := http.Get(srv.URL + "/api/events?id=big-1&from=0&limit=40")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Events {
		if !bytes.Equal(e, lines[i]) {
			t.Fatalf("line %d differs from /api/events:\n%s\n%s", i, lines[i], e)
		}
	}
}

// TestLogDownloadCompacted: a log whose middle a compaction trimmed
// downloads as what the store holds: the start event, then the events
// after the trim point.
func TestLogDownloadCompacted(t *testing.T) {
	events := memstore.NewEventStore()
	all := appendLog(t, events, "trimmed", 2*inspect.LogPage+3)
	through := int64(inspect.LogPage + 40)
	if err := events.TrimThrough(context.Background(), "trimmed", through); err != nil {
		t.Fatal(err)
	}
	want := append([]event.Envelope{all[0]}, all[through+1:]...)
	_, body := download(t, serveLog(t, events), "trimmed")
	if got, _ := decodeLines(t, body); !reflect.DeepEqual(got, want) {
		t.Fatalf("the compacted download holds %d envelopes, the store %d", len(got), len(want))
	}
}

// TestLogDownloadRefusals: an unknown execution is 404 and a bad id 400,
// as JSON errors; an id that is not a plain file name is named safely.
func TestLogDownloadRefusals(t *testing.T) {
	events := memstore.NewEventStore()
	appendLog(t, events, `odd "id"/é`, 2)
	srv := serveLog(t, events)
	for _, c := range []struct {
		id     string
		status int
	}{{"nope", http.StatusNotFound}, {"", http.StatusBadRequest}, {"a\x00b", http.StatusBadRequest}} {
		resp, body := download(t, srv, c.id)
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Fatalf("id %q: %d %q %s", c.id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp, body := download(t, srv, `odd "id"/é`)
	if got, _ := decodeLines(t, body); resp.StatusCode != http.StatusOK || len(got) != 2 {
		t.Fatalf("odd id: %d, %d lines", resp.StatusCode, len(got))
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="odd__id___.jsonl"; filename*=UTF-8''odd%20%22id%22%2F%C3%A9.jsonl` {
		t.Fatalf("Content-Disposition %q", cd)
	}
}
