package auditchain_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The flow of the runtime tests: two steps, a recorded decision, a gate,
// and a last step once the gate is answered.

const (
	flowAudit = "audit.order"
	gateAudit = "approve"
)

type approval struct {
	Approved bool `json:"approved"`
}

func auditFlow() *loom.Flow {
	quote := loom.NewStep("quote", func(_ context.Context, qty int) (int, error) { return 7 * qty, nil })
	reserve := loom.NewStep("reserve", func(_ context.Context, total int) (string, error) { return "r-1", nil })
	charge := loom.NewStep("charge", func(_ context.Context, total int) (string, error) { return "ch-1", nil })
	return loom.NewFlow(flowAudit, func(ctx *loom.Context, qty int) (string, error) {
		total, err := loom.Run(ctx, quote, qty)
		if err != nil {
			return "", err
		}
		if _, err := loom.Run(ctx, reserve, total); err != nil {
			return "", err
		}
		carrier, err := loom.Decide(ctx, "carrier", func() (string, error) { return "post", nil })
		if err != nil {
			return "", err
		}
		a, err := loom.Suspend[approval](ctx, gateAudit)
		if err != nil {
			return "", err
		}
		if !a.Approved {
			return "rejected via " + carrier, nil
		}
		return loom.Run(ctx, charge, total)
	})
}

// auditedApp is a runtime whose event log is chained.
type auditedApp struct {
	events     *auditchain.EventStore
	rt         *loom.Runtime
	closeStore func() error
}

// openAuditedApp is an auditedApp over one SQLite file.
func openAuditedApp(t testing.TB, path string, opts auditchain.Options) *auditedApp {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	return newAuditedApp(t, st.Events, st.Snapshots, st.Branches, st.Archive, st.Close, opts)
}

// newAuditedApp runs a runtime over inner, chained under opts, compacting
// into archive (wrapped with auditchain.WrapArchive); closeStore closes the
// stores.
func newAuditedApp(t testing.TB, inner store.EventStore, snaps store.SnapshotStore, refs store.BranchRegistry,
	archive store.ArchiveStore, closeStore func() error, opts auditchain.Options) *auditedApp {
	t.Helper()
	events, err := auditchain.Wrap(inner, opts)
	if err != nil {
		t.Fatal(errors.Join(err, closeStore()))
	}
	chainedArchive, err := auditchain.WrapArchive(archive)
	if err != nil {
		t.Fatal(errors.Join(err, closeStore()))
	}
	rt, err := loom.New(loom.Config{Events: events, Snapshots: snaps, Branches: refs, Archive: chainedArchive,
		Flows: []*loom.Flow{auditFlow()}, SnapshotEvery: 3})
	if err != nil {
		t.Fatal(errors.Join(err, closeStore()))
	}
	return &auditedApp{events: events, rt: rt, closeStore: closeStore}
}

func (a *auditedApp) close(t testing.TB) {
	t.Helper()
	if err := errors.Join(a.rt.Close(), a.closeStore()); err != nil {
		t.Fatal(err)
	}
}

// complete starts id, answers its gate and waits until it completes.
func (a *auditedApp) complete(t testing.TB, id string) {
	t.Helper()
	ctx := testContext(t)
	if _, err := a.rt.Start(ctx, flowAudit, 3, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	if st, err := a.rt.WaitForSettled(ctx, id); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("%s settled %v, %v; want suspended", id, st.Status, err)
	}
	if st := a.answer(t, id, true); st.Status != fold.StatusCompleted {
		t.Fatalf("%s is %v after its answer", id, st.Status)
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// answer resumes id at the gate and waits until it settles.
func (a *auditedApp) answer(t testing.TB, id string, approved bool) fold.State {
	t.Helper()
	ctx := testContext(t)
	payload, _ := json.Marshal(approval{Approved: approved})
	if err := a.rt.Resume(ctx, id, loom.ResumeEvent{EventType: gateAudit, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	st, err := a.rt.WaitForSettled(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// runHistory writes order-1 (parked, answered, completed), its fork at the
// gate answered the other way, and order-2 left parked. It returns the
// sequence order-1 parked at.
func (a *auditedApp) runHistory(t testing.TB) int64 {
	t.Helper()
	ctx := testContext(t)
	for _, id := range []string{"order-1", "order-2"} {
		if _, err := a.rt.Start(ctx, flowAudit, 2, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
	}
	parked, err := a.rt.WaitForSettled(ctx, "order-1")
	if err != nil || parked.Status != fold.StatusSuspended {
		t.Fatalf("order-1 settled %v, %v; want suspended", parked.Status, err)
	}
	if st := a.answer(t, "order-1", true); st.Status != fold.StatusCompleted {
		t.Fatalf("order-1 is %v after its answer", st.Status)
	}
	if _, err := a.rt.Fork(ctx, "order-1", parked.Sequence, loom.ForkID("order-1-fork")); err != nil {
		t.Fatal(err)
	}
	if st := a.answer(t, "order-1-fork", false); st.Status != fold.StatusCompleted {
		t.Fatalf("the fork is %v after its answer", st.Status)
	}
	if _, err := a.rt.WaitForSettled(ctx, "order-2"); err != nil {
		t.Fatal(err)
	}
	return parked.Sequence
}

var historyIDs = []string{"order-1", "order-1-fork", "order-2"}

// mustVerify verifies id in events and fails t unless it is intact.
func mustVerify(t testing.TB, events store.EventStore, id string, opts auditchain.Options) auditchain.Result {
	t.Helper()
	r, err := auditchain.VerifyExecution(testContext(t), events, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Length == 0 {
		t.Fatalf("%s: %+v, want a verified log", id, r)
	}
	return r
}

// TestChainRuntimeHistoryVerifies runs a real runtime over the chained
// store: steps, a decision, a gate and its resume, a store-side fork and
// its own resume. Every log verifies, the fork's copied prefix included,
// and the runtime sees no chain member.
func TestChainRuntimeHistoryVerifies(t *testing.T) {
	for name, opts := range map[string]auditchain.Options{"Unkeyed": {}, "Keyed": {Key: testKey}} {
		t.Run(name, func(t *testing.T) {
			a := openAuditedApp(t, filepath.Join(t.TempDir(), "audit.db"), opts)
			defer a.close(t)
			parkAt := a.runHistory(t)
			for _, id := range historyIDs {
				mustVerify(t, a.events, id, opts)
				evs, err := a.events.ReadFrom(testContext(t), id, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					if _, ok := e.Metadata[auditchain.MetadataKey]; ok {
						t.Fatalf("%s #%d: a read through the wrapper shows the chain member", id, e.Sequence)
					}
				}
			}
			// The fork's prefix is the parent's, link for link.
			parent, _ := a.events.Inner().ReadFrom(testContext(t), "order-1", 0)
			fork, _ := a.events.Inner().ReadFrom(testContext(t), "order-1-fork", 0)
			for seq := int64(0); seq <= parkAt; seq++ {
				if p, f := string(parent[seq].Metadata[auditchain.MetadataKey]), string(fork[seq].Metadata[auditchain.MetadataKey]); p != f {
					t.Fatalf("#%d: the fork's link %s differs from the parent's %s", seq, f, p)
				}
			}
		})
	}
}

// TestChainWrapRefusesMissingCapability: a store that hides a capability
// the kernel uses is refused by name, not silently degraded.
func TestChainWrapRefusesMissingCapability(t *testing.T) {
	dir := t.TempDir()
	a := openAuditedApp(t, filepath.Join(dir, "a.db"), auditchain.Options{})
	a.close(t)
	ro, err := sqlite.OpenReadOnly(filepath.Join(dir, "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ro.Close(); err != nil {
			t.Error(err)
		}
	}()
	_, err = auditchain.Wrap(ro.EventStore(), auditchain.Options{})
	var me *auditchain.MissingCapabilityError
	if !errors.As(err, &me) || !errors.Is(err, auditchain.ErrMissingCapability) || me.Capability != "store.PrefixCopier" {
		t.Fatalf("Wrap of a read-only store = %v, want *MissingCapabilityError naming store.PrefixCopier", err)
	}
	if _, err := auditchain.Wrap(ro.EventStore(), auditchain.Options{Key: []byte("short")}); !errors.Is(err, auditchain.ErrShortKey) {
		t.Fatalf("Wrap with a 5-byte key = %v, want ErrShortKey", err)
	}
}
