package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func requestLine(t *testing.T, log []event.Envelope) string {
	t.Helper()
	var req replay.Request
	for _, e := range log {
		b, err := event.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		req.Events = append(req.Events, b)
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestServeAnswersOneReportPerLogAfterItsHello(t *testing.T) {
	ctx := context.Background()
	events := memstore.NewEventStore()
	populate(t, loom.Config{Events: events}, 2, 0, "a", "b")
	var in strings.Builder
	for _, id := range []string{"p-0", "p-1"} {
		log, err := store.Read(ctx, events, id)
		if err != nil {
			t.Fatal(err)
		}
		in.WriteString(requestLine(t, log))
	}
	var runs atomic.Int64
	var out strings.Builder
	if err := replay.Serve(ctx, strings.NewReader(in.String()), &out, candidate(&runs, "a", "c")); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(strings.NewReader(out.String()))
	lines.Scan()
	var hello replay.Hello
	if err := json.Unmarshal(lines.Bytes(), &hello); err != nil || hello.Hello != replay.ProtocolVersion || strings.Join(hello.Flows, ",") != "order" {
		t.Fatalf("hello %s %v", lines.Text(), err)
	}
	for _, id := range []string{"p-0", "p-1"} {
		lines.Scan()
		var rep loom.ReplayReport
		if err := json.Unmarshal(lines.Bytes(), &rep); err != nil || rep.ExecutionID != id || rep.Verdict != loom.ReplayDiverged ||
			rep.Got != `step "c"` {
			t.Fatalf("%s: %s %v", id, lines.Text(), err)
		}
	}
	if lines.Scan() || runs.Load() != 0 {
		t.Fatalf("extra output %q, %d steps run", lines.Text(), runs.Load())
	}
}

func TestServeRefusesALineItCannotRead(t *testing.T) {
	var runs atomic.Int64
	for _, bad := range []string{"not json\n", `{"events":[],"extra":1}` + "\n", `{"events":[{"sequence":0}]}` + "\n"} {
		var out strings.Builder
		err := replay.Serve(context.Background(), strings.NewReader(bad), &out, candidate(&runs, "a"))
		var pe *replay.ProtocolError
		if !errors.As(err, &pe) || pe.Line != 1 {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
