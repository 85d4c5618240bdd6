package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/wire"
)

// The fixture flow: an order is quoted, checked against stock (a typed
// failure on the out-of-stock channel for rare items, which the flow
// handles), given a carrier by a recorded decision, parked at an approval
// gate, and charged once approved.
const (
	flowOrder  = "shop.order"
	flowRefund = "shop.refund"
	flowFlaky  = "shop.flaky"
	gate       = "approve"
)

// chargeHook, when set, runs inside the charge step before it charges: the
// crashed writer's process blocks there until it is killed.
var chargeHook func()

const approveSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"note":{"type":"string"}},
"required":["approved"],"additionalProperties":false}`

type order struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

type approval struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

type receipt struct {
	Status    string `json:"status"`
	Total     int    `json:"total"`
	Carrier   string `json:"carrier"`
	Charge    string `json:"charge,omitempty"`
	Backorder bool   `json:"backorder,omitempty"`
}

func orderFlow() *loom.Flow { return orderFlowWith("quote") }

// orderFlowWith is orderFlow with its first step named quoteID: another
// version of its code.
func orderFlowWith(quoteID string) *loom.Flow {
	quote := loom.NewStep(quoteID, func(_ context.Context, o order) (int, error) { return 7 * o.Qty, nil }, loom.ReadOnly())
	stock := loom.NewStep("check-stock", func(_ context.Context, o order) (bool, error) {
		if o.Item == "rare-tea" {
			return false, loom.Fail("out-of-stock", map[string]any{"item": o.Item, "backorderDays": 3})
		}
		return true, nil
	}, loom.ReadOnly(), loom.ErrorChannel("out-of-stock", `{"type":"object","required":["item"]}`))
	charge := loom.NewStep("charge", func(_ context.Context, total int) (string, error) {
		if chargeHook != nil {
			chargeHook()
		}
		return "ch-" + strconv.Itoa(total), nil
	}, loom.NonIdempotent(), loom.Simulation(func(_ context.Context, total int) (string, error) { return "simulated", nil }))
	return loom.NewFlow(flowOrder, func(ctx *loom.Context, o order) (receipt, error) {
		total, err := loom.Run(ctx, quote, o)
		if err != nil {
			return receipt{}, err
		}
		inStock, err := loom.Run(ctx, stock, o)
		var tf *loom.TypedFailure
		if errors.As(err, &tf) {
			inStock = false
		} else if err != nil {
			return receipt{}, err
		}
		carrier, err := loom.Decide(ctx, "carrier", func() (string, error) {
			if o.Qty > 1 {
				return "dhl", nil
			}
			return "post", nil
		})
		if err != nil {
			return receipt{}, err
		}
		a, err := loom.Suspend[approval](ctx, gate)
		if err != nil {
			return receipt{}, err
		}
		r := receipt{Total: total, Carrier: carrier, Backorder: !inStock, Status: "rejected"}
		if !a.Approved {
			return r, nil
		}
		if r.Charge, err = loom.Run(ctx, charge, total); err != nil {
			return receipt{}, err
		}
		r.Status = "charged"
		return r, nil
	}, loom.WithResumeSchema(gate, approveSchema))
}

func refundFlow() *loom.Flow {
	refund := loom.NewStep("refund", func(_ context.Context, amount int) (int, error) { return amount, nil })
	return loom.NewFlow(flowRefund, func(ctx *loom.Context, amount int) (int, error) {
		return loom.Run(ctx, refund, amount)
	})
}

// flakyFlow reads the clock (a kernel decision, __loom_now#0) and runs a
// step whose first attempt fails: one STEP_RETRYING, with its error and its
// delay, before it succeeds.
func flakyFlow() *loom.Flow {
	calls := 0
	var mu sync.Mutex
	step := loom.NewStep("flaky-step", func(_ context.Context, n int) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 1 {
			return 0, errors.New("the warehouse timed out")
		}
		return n * 2, nil
	}, loom.WithRetry(middleware.RetryPolicy{MaxAttempts: 3,
		Backoff: func(int64) time.Duration { return 250 * time.Millisecond },
		Sleep:   func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}))
	return loom.NewFlow(flowFlaky, func(ctx *loom.Context, n int) (int, error) {
		_ = loom.Now(ctx)
		return loom.Run(ctx, step, n)
	})
}

// approver is the resume authenticator: the wire principal when the resume
// came over the wire, else the credentials the in-process caller passed.
type approver struct{}

func (approver) Authenticate(ctx context.Context, _ string, ev loom.ResumeEvent) (json.RawMessage, error) {
	if p := wire.PrincipalFrom(ctx); p != nil {
		return json.Marshal(p)
	}
	if len(ev.Credentials) > 0 {
		return ev.Credentials, nil
	}
	return nil, errors.New("who answers? pass credentials")
}

// stepClock advances 250 ms on every reading, from a fixed instant, so the
// fixture's timestamps are the same on every run.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func newStepClock(start string) *stepClock {
	t, err := time.Parse(time.RFC3339, start)
	if err != nil {
		panic(err)
	}
	return &stepClock{t: t}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(250 * time.Millisecond)
	return c.t
}

// app is a runtime over one SQLite file.
type app struct {
	stores sqlite.Stores
	rt     *loom.Runtime
}

func openApp(path string, clock loom.Clock) (*app, error) { return openAppWith(path, clock, nil) }

// openAppWith is openApp with a last word on the configuration.
func openAppWith(path string, clock loom.Clock, tweak func(*loom.Config, sqlite.Stores)) (*app, error) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		return nil, err
	}
	cfg := loom.Config{Events: st.Events, Snapshots: st.Snapshots, Branches: st.Branches,
		Flows: []*loom.Flow{orderFlow(), refundFlow(), flakyFlow()}, SnapshotEvery: 3, Clock: clock,
		ResumeAuthenticator: approver{}, StickyParks: -1}
	if tweak != nil {
		tweak(&cfg, st)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return &app{stores: st, rt: rt}, nil
}

func (a *app) close() error { return errors.Join(a.rt.Close(), a.stores.Close()) }

// answer resumes id at the gate as who, and waits until it settles.
func (a *app) answer(ctx context.Context, id, who string, approved bool) (fold.State, error) {
	payload, _ := json.Marshal(approval{Approved: approved})
	cred, _ := json.Marshal(map[string]string{"user": who})
	if err := a.rt.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: payload, Credentials: cred}); err != nil {
		return fold.State{}, err
	}
	return a.rt.WaitForSettled(ctx, id)
}

// fixture describes the store buildFixture writes.
type fixture struct {
	path   string
	parkAt int64 // the sequence order-1 parked at
}

// The fixture's executions.
var bulkIDs = func() []string {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("bulk-%02d", i))
	}
	return ids
}()

// buildFixture writes a store with a real history: order-1 (a typed
// failure handled, a decision, a gate answered by alice, completed), its
// simulated fork order-1-what-if answered the other way by bob, order-2
// parked at the gate, order-3 cancelled, two refunds of another flow, twelve
// parked bulk orders, and the refs main and what-if.
func buildFixture(path string) (fixture, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := openApp(path, newStepClock("2026-01-05T09:00:00Z"))
	if err != nil {
		return fixture{}, err
	}
	fx := fixture{path: path}
	err = func() error {
		start := func(id, flow string, in any) (fold.State, error) {
			ctx := ctx
			if flow == flowRefund {
				// The refunds are the billing tenant's: loom ls --tenant.
				ctx = loom.WithPrincipal(ctx, loom.Principal{ID: "billing-svc", Tenant: "billing"})
			}
			if _, err := a.rt.Start(ctx, flow, in, loom.WithExecutionID(id)); err != nil {
				return fold.State{}, err
			}
			return a.rt.WaitForSettled(ctx, id)
		}
		parked, err := start("order-1", flowOrder, order{Item: "rare-tea", Qty: 2})
		if err != nil {
			return err
		}
		fx.parkAt = parked.Sequence
		if st, err := a.answer(ctx, "order-1", "alice", true); err != nil || st.Status != fold.StatusCompleted {
			return fmt.Errorf("order-1: %v %v", st.Status, err)
		}
		if _, err := a.rt.Fork(ctx, "order-1", fx.parkAt, loom.ForkID("order-1-what-if"), loom.SimulateFork()); err != nil {
			return err
		}
		if st, err := a.answer(ctx, "order-1-what-if", "bob", false); err != nil || st.Status != fold.StatusCompleted {
			return fmt.Errorf("the fork: %v %v", st.Status, err)
		}
		if _, err := start("order-2", flowOrder, order{Item: "green-tea", Qty: 1}); err != nil {
			return err
		}
		if _, err := start("order-3", flowOrder, order{Item: "oolong", Qty: 3}); err != nil {
			return err
		}
		if err := a.rt.Cancel(ctx, "order-3", "customer changed their mind"); err != nil {
			return err
		}
		for i, id := range []string{"refund-1", "refund-2"} {
			if _, err := start(id, flowRefund, 10*(i+1)); err != nil {
				return err
			}
		}
		if st, err := start("flaky-1", flowFlaky, 21); err != nil || st.Status != fold.StatusCompleted {
			return fmt.Errorf("flaky-1: %v %v", st.Status, err)
		}
		for i, id := range bulkIDs {
			if _, err := start(id, flowOrder, order{Item: "sencha", Qty: i + 1}); err != nil {
				return err
			}
		}
		if _, err := a.rt.Promote(ctx, "main", "order-1"); err != nil {
			return err
		}
		_, err = a.rt.Promote(ctx, "what-if", "order-1-what-if")
		return err
	}()
	return fx, errors.Join(err, a.close())
}

// copyStore copies a closed SQLite store (with its -wal and -shm files, if
// any) into dir and returns the new path.
func copyStore(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(src + suffix)
		if errors.Is(err, os.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// readLog reads an execution's log straight from a store file.
func readLog(t *testing.T, path, id string) []event.Envelope {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := store.Read(context.Background(), db.EventStore(), id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
