package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/durable"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// incrementFlow adds n to the counter "hits", one compare-and-set per
// unit, reading again after a lost race.
func incrementFlow(counters *durable.Store[int]) *loom.Flow {
	return loom.NewFlow("inc", func(c *loom.Context, n int) (int, error) {
		last := 0
		for i := range n {
			for try := 0; ; try++ {
				id := fmt.Sprintf("%d.%d", i, try)
				v, err := counters.Get(c, "get#"+id, "hits")
				if err != nil {
					return 0, err
				}
				w, err := counters.Put(c, "put#"+id, "hits", v.Value+1, v.Revision)
				var conflict *durable.RevisionConflictError
				if errors.As(err, &conflict) {
					continue
				}
				if err != nil {
					return 0, err
				}
				last = w.Value
				break
			}
		}
		return last, nil
	})
}

// TestConcurrentWritersNeverLoseAnUpdate: executions on two runtimes (as
// on two nodes) increment one counter with compare-and-set; every
// increment lands once, and each execution replays from its log even
// after the stored value has moved on.
func TestConcurrentWritersNeverLoseAnUpdate(t *testing.T) {
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	counters, err := durable.New[int](models, "counters")
	if err != nil {
		t.Fatal(err)
	}
	var rts []*loom.Runtime
	for range 2 {
		rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{incrementFlow(counters)}, Recovery: loom.Recovery{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		rts = append(rts, rt)
	}
	const executions, each = 6, 5
	var wg sync.WaitGroup
	for i := range executions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt := rts[i%2]
			id := fmt.Sprintf("inc-%d", i)
			if _, err := rt.Start(context.Background(), "inc", each, loom.WithExecutionID(id)); err != nil {
				t.Error(err)
				return
			}
			if res, err := rt.WaitForCompletion(testCtx(t), id); err != nil || res.Status != fold.StatusCompleted {
				t.Errorf("%s: %v %v", id, res.Status, err)
			}
		}()
	}
	wg.Wait()
	v, err := counters.Peek(testCtx(t), "hits")
	if err != nil || v.Value != executions*each || v.Revision != executions*each {
		t.Fatalf("the counter is %+v, %v; want %d at revision %d", v, err, executions*each, executions*each)
	}
	// Replay reads the log, not the store: the value moved on, the
	// recorded reads did not.
	for i := range executions {
		log, err := store.Read(testCtx(t), events, fmt.Sprintf("inc-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if rep := rts[0].CheckReplay(testCtx(t), log); rep.Verdict != loom.ReplayCompatible {
			t.Fatalf("inc-%d replays %+v", i, rep)
		}
	}
}

// TestAStaleWriteIsATypedConflictAndReplaysAsOne: a Put with a stale
// revision is refused with *RevisionConflictError, recorded as the step's
// typed failure, so a replay refuses it again without the store.
func TestAStaleWriteIsATypedConflictAndReplaysAsOne(t *testing.T) {
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	flags, _ := durable.New[bool](models, "flags")
	flow := loom.NewFlow("toggle", func(c *loom.Context, _ struct{}) (string, error) {
		if _, err := flags.Put(c, "first", "beta", true, 0); err != nil {
			return "", err
		}
		_, err := flags.Put(c, "stale", "beta", false, 0)
		var conflict *durable.RevisionConflictError
		if errors.As(err, &conflict) {
			return fmt.Sprintf("refused: %s at %d, not %d", conflict.Key, conflict.Actual, conflict.Expected), nil
		}
		return "", fmt.Errorf("want a conflict, got %v", err)
	})
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Start(testCtx(t), "toggle", nil, loom.WithExecutionID("t-1")); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(testCtx(t), "t-1")
	if err != nil || string(res.Output) != `"refused: beta at 1, not 0"` {
		t.Fatalf("toggle: %s %v", res.Output, err)
	}
	st, _ := rt.LoadState(testCtx(t), "t-1")
	if fr := st.Frames["stale"]; fr.ErrorChannel != durable.ConflictChannel {
		t.Fatalf("the stale write's frame %+v, want the typed failure %s", fr, durable.ConflictChannel)
	}
	log, _ := store.Read(testCtx(t), events, "t-1")
	if rep := rt.CheckReplay(testCtx(t), log); rep.Verdict != loom.ReplayCompatible {
		t.Fatalf("replay: %+v", rep)
	}
}

// TestBadInputIsRefusedBeforeAnythingIsRecorded: an invalid key or a
// negative revision fail the call without a step.
func TestBadInputIsRefusedBeforeAnythingIsRecorded(t *testing.T) {
	if _, err := durable.New[int](nil, "x"); err == nil {
		t.Fatal("New without a store")
	}
	if _, err := durable.New[int](memstore.NewReadModelStore(), ""); err == nil {
		t.Fatal("New with an empty namespace")
	}
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	s, _ := durable.New[int](models, "n")
	flow := loom.NewFlow("bad", func(c *loom.Context, _ struct{}) (string, error) {
		_, e1 := s.Put(c, "p", "", 1, 0)
		_, e2 := s.Put(c, "q", "k", 1, -1)
		if e1 == nil || e2 == nil {
			return "", errors.New("bad input accepted")
		}
		return "refused", nil
	})
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	_, _ = rt.Start(testCtx(t), "bad", nil, loom.WithExecutionID("b"))
	if res, err := rt.WaitForCompletion(testCtx(t), "b"); err != nil || string(res.Output) != `"refused"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	st, _ := rt.LoadState(testCtx(t), "b")
	if len(st.Frames) != 0 {
		t.Fatalf("refused calls recorded steps: %v", st.Frames)
	}
}

// lostReply writes through its first Apply and then reports a failure, as
// a connection dropped after the commit would.
type lostReply struct {
	store.ReadModelStore
	mu   sync.Mutex
	lost bool
}

func (l *lostReply) Apply(ctx context.Context, projection, source string, from, to int64, writes []store.ReadModelWrite) error {
	err := l.ReadModelStore.Apply(ctx, projection, source, from, to, writes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && !l.lost {
		l.lost = true
		return errors.New("connection lost after the commit")
	}
	return err
}

// TestARetriedWriteIsNotAppliedTwice: the write's first attempt committed
// but its reply was lost; the retry finds its own revision and returns it
// instead of a conflict or a second write.
func TestARetriedWriteIsNotAppliedTwice(t *testing.T) {
	models := &lostReply{ReadModelStore: memstore.NewReadModelStore()}
	counters, _ := durable.New[int](models, "counters")
	flow := loom.NewFlow("once", func(c *loom.Context, _ struct{}) (int64, error) {
		w, err := counters.Put(c, "put", "hits", 7, 0)
		return w.Revision, err
	})
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow},
		DefaultRetry: &middleware.RetryPolicy{MaxAttempts: 3, Backoff: func(int64) time.Duration { return 0 }}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, _ = rt.Start(testCtx(t), "once", nil, loom.WithExecutionID("o"))
	res, err := rt.WaitForCompletion(testCtx(t), "o")
	if err != nil || string(res.Output) != "1" {
		t.Fatalf("the retried write: %v %s, %v; want revision 1", res.Status, res.Output, err)
	}
	if v, _ := counters.Peek(testCtx(t), "hits"); v.Revision != 1 || v.Value != 7 {
		t.Fatalf("the key is %+v, want 7 at revision 1 (written once)", v)
	}
}
