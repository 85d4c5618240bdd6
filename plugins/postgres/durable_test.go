package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/durable"
	"github.com/loom-kernel/loom/fold"
)

// TestDurableStateAcrossNodes: executions on two nodes increment one
// durable counter kept in the schema's read models; the compare-and-set
// loses no increment.
func TestDurableStateAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	const executions, each = 4, 5
	var rts []*loom.Runtime
	var counters *durable.Store[int]
	for range 2 {
		st, err := Storage(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		c, err := durable.New[int](st.ReadModels, "counters")
		if err != nil {
			t.Fatal(err)
		}
		counters = c
		flow := loom.NewFlow("inc", func(lc *loom.Context, n int) (int, error) {
			for i := range n {
				for try := 0; ; try++ {
					id := fmt.Sprintf("%d.%d", i, try)
					v, err := c.Get(lc, "get#"+id, "hits")
					if err != nil {
						return 0, err
					}
					_, err = c.Put(lc, "put#"+id, "hits", v.Value+1, v.Revision)
					var conflict *durable.RevisionConflictError
					if errors.As(err, &conflict) {
						continue
					}
					if err != nil {
						return 0, err
					}
					break
				}
			}
			return n, nil
		})
		rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{flow}, Recovery: loom.Recovery{Disabled: true},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rt.Close()
			_ = st.Close()
		})
		rts = append(rts, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range executions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt, id := rts[i%2], fmt.Sprintf("inc-%d", i)
			if _, err := rt.Start(ctx, "inc", each, loom.WithExecutionID(id)); err != nil {
				t.Error(err)
				return
			}
			if res, err := rt.WaitForCompletion(ctx, id); err != nil || res.Status != fold.StatusCompleted {
				t.Errorf("%s: %v %v", id, res.Status, err)
			}
		}()
	}
	wg.Wait()
	if v, err := counters.Peek(ctx, "hits"); err != nil || v.Value != executions*each || v.Revision != executions*each {
		t.Fatalf("the counter on PostgreSQL is %+v, %v; want %d", v, err, executions*each)
	}
}
