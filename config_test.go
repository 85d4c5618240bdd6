package loom_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestAStoragePresetWiresEveryStoreInOneField(t *testing.T) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ran bool
	flow := loom.NewFlow("nap", func(ctx *loom.Context, _ struct{}) (string, error) {
		if err := ctx.Sleep(time.Millisecond); err != nil {
			return "", err
		}
		ran = true
		return "rested", nil
	})
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{flow}, Clock: clock, TimerPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := testCtx(t)
	id, _ := rt.Start(ctx, "nap", nil)
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Second)
	if n, err := rt.FireDueTimers(ctx); n != 1 || err != nil { // the timer store came with the preset
		t.Fatalf("fired %d: %v", n, err)
	}
	if res, err := rt.WaitForCompletion(ctx, id); err != nil || string(res.Output) != `"rested"` || !ran {
		t.Fatalf("%s %v", res.Output, err)
	}
}

func TestNewRefusesContradictoryConfigs(t *testing.T) {
	events := memstore.NewEventStore()
	cases := map[string]struct {
		cfg   loom.Config
		field string
	}{
		"no event store":                    {loom.Config{}, "Events"},
		"two event stores":                  {loom.Config{Storage: memstore.NewSet(), Events: events}, "Events"},
		"snapshots every N without a store": {loom.Config{Events: events, SnapshotEvery: 10}, "SnapshotEvery"},
		"a timer poll without timers":       {loom.Config{Events: events, TimerPoll: time.Second}, "TimerPoll"},
		"a heartbeat without leases":        {loom.Config{Events: events, Heartbeat: time.Second}, "Heartbeat"},
		"a heartbeat as long as the TTL": {loom.Config{Events: events, Leases: memstore.NewLeaseStore(),
			LeaseTTL: time.Second, Heartbeat: time.Second}, "Heartbeat"},
		"an unknown divergence mode": {loom.Config{Events: events, Divergence: 7}, "Divergence"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := loom.New(c.cfg)
			var ce *loom.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("New = %v, want *ConfigError on %s", err, c.field)
			}
		})
	}
	// The same store set by hand and through Storage is no contradiction.
	set := memstore.NewSet()
	if rt, err := loom.New(loom.Config{Storage: set, Events: set.Events}); err != nil {
		t.Fatal(err)
	} else {
		rt.Close()
	}
}

func TestASyscallWhoseStoreIsMissingFailsAtTheCallNamingTheField(t *testing.T) {
	cases := map[string]struct {
		body  func(ctx *loom.Context) error
		field string
	}{
		"Sleep":            {func(ctx *loom.Context) error { return ctx.Sleep(time.Hour) }, "Timers"},
		"SleepUntil":       {func(ctx *loom.Context) error { return ctx.SleepUntil(time.Now()) }, "Timers"},
		"a gate's timeout": {func(ctx *loom.Context) error { _, err := ctx.Suspend("g", loom.Timeout(time.Hour)); return err }, "Timers"},
		"Receive":          {func(ctx *loom.Context) error { _, err := ctx.Receive("t"); return err }, "Features.Inbox"},
		"ContinueAsNew":    {func(ctx *loom.Context) error { return ctx.ContinueAsNew(nil) }, "Features.ContinueAsNew"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var got error
			flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
				got = c.body(ctx)
				return 1, nil
			})
			h := newBareHarness(t, flow)
			id, _ := h.rt.Start(h.ctx(), "f", nil)
			if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			var nc *loom.NotConfiguredError
			if !errors.As(got, &nc) || nc.Field != c.field || !errors.Is(got, loom.ErrNotConfigured) {
				t.Fatalf("%s = %v, want *NotConfiguredError naming %s", name, got, c.field)
			}
			if n := countType(h.log(id), "EXECUTION_SUSPENDED"); n != 0 {
				t.Fatalf("it parked %d times", n)
			}
		})
	}
	h := newBareHarness(t, loom.NewFlow("g", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil }))
	if _, err := h.rt.Start(h.ctx(), "g", nil, loom.WithDeadline(time.Now().Add(time.Hour)), loom.WithExecutionID("dl")); !errors.Is(err, loom.ErrNotConfigured) {
		t.Fatalf("WithDeadline without timers = %v", err)
	}
	if evs, _ := store.Read(context.Background(), h.events, "dl"); len(evs) != 0 {
		t.Fatalf("the refused start appended %d", len(evs))
	}
	if _, err := h.rt.Promote(h.ctx(), "main", "x"); !errors.Is(err, loom.ErrNotConfigured) {
		t.Fatalf("Promote without branches = %v", err)
	}
}
