package loom_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// Two nodes share the stores and a lease store; the fake clock moves by hand
// and heartbeats are called by the test.
func twoNodes(t *testing.T, flow *loom.Flow) (*harness, *loom.Runtime, *loom.Runtime, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	leases := memstore.NewLeaseStore()
	h := newHarnessWith(t, loom.Config{}, flow)
	node := func(name string) *loom.Runtime {
		rt, err := loom.New(loom.Config{Events: h.events, Snapshots: h.snaps, Timers: h.timers, TimerPoll: -1, Flows: []*loom.Flow{flow}, Clock: clock,
			Leases: leases, NodeID: name, LeaseTTL: 30 * time.Second, Heartbeat: -1, Logger: slog.New(slog.DiscardHandler), Recovery: loom.Recovery{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	return h, node("a"), node("b"), clock
}

func TestLeases_ALiveLeaseVetoesAReDriveAndAnExpiredOneAllowsIt(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	flow := loom.NewFlow("held", func(ctx *loom.Context, _ struct{}) (int64, error) {
		out, err := ctx.Run("work", func(c context.Context) (any, error) {
			n := runs.Add(1)
			if n == 1 {
				close(entered)
				select {
				case <-release:
				case <-c.Done():
					return nil, c.Err()
				}
			}
			return n, nil
		})
		if err != nil {
			return 0, err
		}
		return int64(out[0] - '0'), nil
	})
	h, a, b, clock := twoNodes(t, flow)
	id, err := a.Start(h.ctx(), "held", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered // node a's effect is running (and stays stuck)
	// Fresh start: no lease yet, but recent activity vetoes a re-drive.
	if n, err := b.Recover(h.ctx()); err != nil || n != 0 {
		t.Fatalf("b re-drove a just-started execution: %d %v", n, err)
	}
	if err := a.RenewLeases(h.ctx()); err != nil { // the first heartbeat takes the lease
		t.Fatal(err)
	}
	clock.advance(time.Minute) // past the activity window, but a heartbeat renews
	if err := a.RenewLeases(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Recover(h.ctx()); n != 0 {
		t.Fatal("b re-drove an execution whose lease is live")
	}
	// Node a stops heartbeating (it is hung); its lease expires.
	clock.advance(time.Minute)
	if n, err := b.Recover(h.ctx()); err != nil || n != 1 {
		t.Fatalf("b did not take over an expired lease: %d %v", n, err)
	}
	res, err := b.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "2" {
		t.Fatalf("%s %v", res.Output, err)
	}
	// a's next heartbeat finds its lease gone and stops its drive.
	if err := a.RenewLeases(h.ctx()); err != nil {
		t.Fatal(err)
	}
	close(release)
	before := len(h.log(id))
	a.Close()
	if len(h.log(id)) != before {
		t.Fatal("the node that lost its lease wrote to the log")
	}
}

func TestLeases_AResumeIsRefusedWhileAnotherNodeDrives(t *testing.T) {
	h, a, b, _ := twoNodes(t, gatedFlow())
	id, _ := a.Start(h.ctx(), "gated", nil)
	if _, err := a.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	// Parked: no node holds the lease, so the other node resumes it.
	if err := b.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: []byte(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	var rr *loom.ResumeRefusedError
	if err := a.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: []byte(`{"approved":true}`)}); !errors.As(err, &rr) {
		t.Fatalf("resume of an ended execution: %v", err)
	}
}

// rendezvousLeases lets an Acquire through only once want Acquires are in
// flight together: a heartbeat that renewed one lease after another would
// never get past the first.
type rendezvousLeases struct {
	*memstore.LeaseStore
	want    int64
	waiting atomic.Int64
	all     chan struct{}
}

func (s *rendezvousLeases) Acquire(ctx context.Context, id, owner string, now, ttl int64) (store.Lease, error) {
	if s.waiting.Add(1) == s.want {
		close(s.all)
	}
	select {
	case <-s.all:
	case <-ctx.Done():
		return store.Lease{}, ctx.Err()
	}
	return s.LeaseStore.Acquire(ctx, id, owner, now, ttl)
}

// A heartbeat renews its leases side by side, so a node driving many
// executions renews them all within a TTL however slow one write is.
func TestLeases_AHeartbeatRenewsSideBySide(t *testing.T) {
	const running = 4
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(running)
	flow := loom.NewFlow("busy", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := ctx.Run("work", func(c context.Context) (any, error) {
			entered.Done()
			select {
			case <-release:
			case <-c.Done():
			}
			return "done", nil
		})
		return "", err
	})
	leases := &rendezvousLeases{LeaseStore: memstore.NewLeaseStore(), want: running, all: make(chan struct{})}
	h := newHarnessWith(t, loom.Config{}, flow)
	rt, err := loom.New(loom.Config{Events: h.events, Flows: []*loom.Flow{flow}, Leases: leases, NodeID: "a",
		LeaseTTL: 30 * time.Second, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	defer close(release)
	for range running {
		if _, err := rt.Start(h.ctx(), "busy", nil); err != nil {
			t.Fatal(err)
		}
	}
	entered.Wait()
	if err := rt.RenewLeases(h.ctx()); err != nil {
		t.Fatalf("heartbeat: %v (acquires in flight together: %d of %d)", err, leases.waiting.Load(), running)
	}
}
