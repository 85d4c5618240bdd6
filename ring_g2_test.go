package loom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// G2 for the effect ring (spec §1): with no middleware wired — a nil chain
// or an empty one — the log is byte-identical to the kernel without the
// ring; a permissive stack of every ring adds exactly one RESOURCE_METERED
// per effect and changes nothing else.

// ringClock is a clock shared by the runtime and the metering ring; the
// effects move it.
type ringClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *ringClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *ringClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// ringFlow does a bit of everything an effect can: a tool effect by id, a
// step with its own Invoke, a loop, a decision, an emit, a gate (answered
// by replay) and a failure the flow catches.
func ringFlow(clk *ringClock) (*loom.Flow, *effect.Registry) {
	reg, err := effect.NewRegistry(map[string]effect.Func{
		"http.get": func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			clk.advance(5 * time.Millisecond)
			return json.Marshal(map[string]any{"key": ec.IdempotencyKey, "in": in})
		},
	})
	if err != nil {
		panic(err)
	}
	flow := loom.NewFlow("ring", func(ctx *loom.Context, n int) (string, error) {
		out := ""
		for i := range n {
			raw, err := ctx.Execute(&loom.Task{ID: "fetch#" + strconv.Itoa(i), Kind: "tool", ToolID: "http.get"},
				map[string]int{"page": i})
			if err != nil {
				return "", err
			}
			out += string(raw)
		}
		pick, err := loom.Decide(ctx, "route", func() (string, error) { return "fast", nil })
		if err != nil {
			return "", err
		}
		if err := ctx.Emit("progress", map[string]string{"route": pick}); err != nil {
			return "", err
		}
		if _, err := loom.Suspend[bool](ctx, "approve"); err != nil {
			return "", err
		}
		_, ferr := ctx.Run("flaky", func(context.Context) (any, error) {
			clk.advance(time.Millisecond)
			return nil, fmt.Errorf("upstream 503")
		})
		total, err := ctx.Run("sum", func(context.Context) (any, error) {
			clk.advance(2 * time.Millisecond)
			return len(out), nil
		})
		return fmt.Sprintf("%s|%v|%s", total, ferr != nil, pick), err
	})
	return flow, reg
}

// runRingFlow runs ringFlow to completion under cfg's middleware with a
// fake clock and fixed ids, replaying at the gate, and returns its log.
func runRingFlow(t *testing.T, mws func(clk *ringClock) []effect.Middleware) []event.Envelope {
	t.Helper()
	clk := &ringClock{now: time.UnixMilli(1_700_000_000_000)}
	flow, reg := ringFlow(clk)
	var mu sync.Mutex
	n := 0
	events := memstore.NewEventStore()
	cfg := loom.Config{Events: events, Flows: []*loom.Flow{flow}, Effects: reg, Clock: clk, StickyParks: -1,
		NewID: func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id-%04d", n) }}
	if mws != nil {
		cfg.Middleware = mws(clk)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := rt.Start(ctx, "ring", 3, loom.WithExecutionID("g2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`true`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs, err := store.Read(ctx, events, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func encodeLog(t *testing.T, evs []event.Envelope) [][]byte {
	t.Helper()
	out := make([][]byte, len(evs))
	for i, e := range evs {
		raw, err := event.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = raw
	}
	return out
}

func TestRingG2NoMiddlewareAndAnEmptyChainWriteByteIdenticalLogs(t *testing.T) {
	unwired := encodeLog(t, runRingFlow(t, nil))
	empty := encodeLog(t, runRingFlow(t, func(*ringClock) []effect.Middleware { return []effect.Middleware{} }))
	if len(unwired) != len(empty) {
		t.Fatalf("logs differ in length: %d vs %d", len(unwired), len(empty))
	}
	for i := range unwired {
		if !bytes.Equal(unwired[i], empty[i]) {
			t.Fatalf("event %d differs:\n unwired %s\n   empty %s", i, unwired[i], empty[i])
		}
	}
	// The comparison is of real bytes: the run is deterministic, ids and
	// timestamps included.
	again := encodeLog(t, runRingFlow(t, nil))
	if !bytes.Equal(bytes.Join(unwired, nil), bytes.Join(again, nil)) {
		t.Fatal("two unwired runs differ: the test compares nothing")
	}
}

// permissiveStack is every ring wired but permissive: retry with no
// failure to retry (the flaky step fails once and is let through by
// MaxAttempts 1), metering without a budget, a validator that passes,
// redaction without references, claim-check with outputs under the cap.
func permissiveStack(clk *ringClock) []effect.Middleware {
	pass := func(*effect.Context, json.RawMessage) error { return nil }
	return []effect.Middleware{
		middleware.Retry(middleware.RetryPolicy{MaxAttempts: 1}),
		middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{}),
		middleware.Safety(middleware.Validator{Name: "pass", Input: pass, Output: pass}),
		middleware.Redaction(middleware.StaticSecrets{}),
		middleware.ClaimCheck(memstore.NewContentStore(), middleware.ClaimCheckOptions{}),
	}
}

// With every ring permissive, the log is the unwired log plus one
// RESOURCE_METERED {stepId, attempt, ms} per effect that ran live, right
// before its outcome — ms measured, no other dimension (no false zeros).
func TestRingG2PermissiveStackAddsOnlyResourceMetered(t *testing.T) {
	unwired := runRingFlow(t, nil)
	wired := runRingFlow(t, permissiveStack)
	var metered []string
	var rest []event.Envelope
	for i, e := range wired {
		if e.Type != event.ResourceMetered {
			rest = append(rest, e)
			continue
		}
		metered = append(metered, string(e.Payload))
		if next := wired[i+1].Type; next != event.StepCompleted && next != event.StepFailed {
			t.Fatalf("RESOURCE_METERED is followed by %s, not the step's outcome", next)
		}
	}
	want := []string{
		`{"stepId":"fetch#0","attempt":1,"ms":5}`, `{"stepId":"fetch#1","attempt":1,"ms":5}`,
		`{"stepId":"fetch#2","attempt":1,"ms":5}`, `{"stepId":"flaky","attempt":1,"ms":1}`,
		`{"stepId":"sum","attempt":1,"ms":2}`,
	}
	if fmt.Sprint(metered) != fmt.Sprint(want) {
		t.Fatalf("RESOURCE_METERED\n got %v\nwant %v", metered, want)
	}
	if len(rest) != len(unwired) {
		t.Fatalf("%d other events, want %d", len(rest), len(unwired))
	}
	for i := range rest {
		a, b := rest[i], unwired[i]
		if a.Type != b.Type || !bytes.Equal(a.Payload, b.Payload) || a.Timestamp != b.Timestamp {
			t.Fatalf("event %d differs:\n wired   %s %s\n unwired %s %s", i, a.Type, a.Payload, b.Type, b.Payload)
		}
	}
}

// G2 ring by ring: each ring wired alone and permissive leaves the log as
// the unwired kernel writes it — payloads, types and timestamps — but for
// Metering's one RESOURCE_METERED per live effect.
func TestRingG2EachPermissiveRingAloneLeavesTheLogAsUnwired(t *testing.T) {
	unwired := runRingFlow(t, nil)
	stack := permissiveStack(&ringClock{})
	names := []string{"retry", "metering", "safety", "redaction", "claim-check"}
	if len(stack) != len(names) {
		t.Fatalf("permissiveStack has %d rings, this test names %d", len(stack), len(names))
	}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			wired := runRingFlow(t, func(clk *ringClock) []effect.Middleware { return permissiveStack(clk)[i : i+1] })
			var rest []event.Envelope
			for _, e := range wired {
				if e.Type == event.ResourceMetered && name == "metering" {
					continue
				}
				rest = append(rest, e)
			}
			if name == "metering" && len(rest) == len(wired) {
				t.Fatal("metering wired alone recorded no RESOURCE_METERED: the ring did not run")
			}
			if len(rest) != len(unwired) {
				t.Fatalf("%d events (bar metering), want %d: %v", len(rest), len(unwired), types(rest))
			}
			for j := range rest {
				a, b := rest[j], unwired[j]
				if a.Type != b.Type || !bytes.Equal(a.Payload, b.Payload) || a.Timestamp != b.Timestamp {
					t.Fatalf("event %d differs:\n %-8s %s %s\n unwired  %s %s", j, name, a.Type, a.Payload, b.Type, b.Payload)
				}
			}
		})
	}
}
