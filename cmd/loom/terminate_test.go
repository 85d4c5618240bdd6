package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// TestTerminateIsCancelOverTheWire: loom terminate is loom cancel — a
// running step's effect sees its context cancelled, no step starts after,
// EXECUTION_CANCELLED ends the log — and cancel's help says so; an ended
// execution is refused with exit 5 and nothing recorded. A waiting start
// shows progress on stderr only.
func TestTerminateIsCancelOverTheWire(t *testing.T) {
	bin, _ := setup(t)
	events := memstore.NewEventStore()
	entered, stopped := make(chan struct{}), make(chan struct{})
	var after atomic.Bool
	hang := loom.NewStep("hang", func(ctx context.Context, _ int) (int, error) {
		close(entered)
		<-ctx.Done()
		close(stopped)
		return 0, ctx.Err()
	})
	next := loom.NewStep("next", func(context.Context, int) (int, error) { after.Store(true); return 0, nil })
	long := loom.NewFlow("long", func(c *loom.Context, n int) (int, error) {
		if _, err := loom.Run(c, hang, n); err != nil {
			return 0, err
		}
		return loom.Run(c, next, n)
	})
	park := loom.NewFlow("park", func(c *loom.Context, _ int) (int, error) { return loom.Suspend[int](c, "approve") })
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{long, park}, StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	h, err := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", "ops")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctl := func(args ...string) []string {
		return append(args, "--addr", strings.TrimPrefix(srv.URL, "http://"), "--token", "t0ken")
	}

	mustLoom(t, bin, ctl("start", "long", "--id", "l-1", "--input", "1", "--wait=false")...)
	<-entered
	if out := mustLoom(t, bin, ctl("terminate", "l-1", "--reason", "runaway")...); out != "Cancelled l-1; the cancel is durable.\n" {
		t.Fatalf("terminate: %q", out)
	}
	<-stopped // the running effect saw its context cancelled
	ctx := t.Context()
	st, err := rt.LoadState(ctx, "l-1")
	if err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("after terminate: %v %v", st.Status, err)
	}
	log, err := store.Read(ctx, events, "l-1")
	if err != nil {
		t.Fatal(err)
	}
	if last := log[len(log)-1]; last.Type != event.ExecutionCancelled || !strings.Contains(string(last.Payload), "runaway") {
		t.Fatalf("the log ends with %s %s", last.Type, last.Payload)
	}
	if _, err := rt.WaitForSettled(ctx, "l-1"); err != nil {
		t.Fatal(err)
	}
	if after.Load() {
		t.Fatal("a step started after the terminate")
	}

	// An ended execution: refused, nothing recorded.
	_, errOut, code := loomRun(t, bin, ctl("terminate", "l-1")...)
	if code != exitRefused || !strings.Contains(errOut, "refused (terminal)") {
		t.Fatalf("terminate of an ended execution: exit %d %s", code, errOut)
	}
	if again, _ := store.Read(ctx, events, "l-1"); len(again) != len(log) {
		t.Fatalf("a refused terminate appended: %d -> %d events", len(log), len(again))
	}
	for _, cmd := range []string{"cancel", "terminate"} {
		help := mustLoom(t, bin, cmd, "--help")
		if !strings.Contains(help, "Loom's cancel is what other") || !strings.Contains(help, "engines call terminate") || !strings.Contains(help, "terminate") {
			t.Fatalf("loom %s --help:\n%s", cmd, help)
		}
	}

	// A start that waits shows it on stderr, and only there.
	stdout, errOut, code := loomRun(t, bin, ctl("start", "park", "--id", "p-1", "--progress", "always")...)
	if code != 0 || !strings.Contains(errOut, "start: waiting for the execution of park to park or end") ||
		strings.Contains(stdout, "waiting") || !strings.HasPrefix(stdout, "Started p-1 (flow park).\n") {
		t.Fatalf("start --progress always: exit %d\nstdout %q\nstderr %q", code, stdout, errOut)
	}
	if out := mustLoom(t, bin, ctl("terminate", "p-1")...); out != "Cancelled p-1; the cancel is durable.\n" {
		t.Fatalf("terminate of a parked execution: %q", out)
	}
}
