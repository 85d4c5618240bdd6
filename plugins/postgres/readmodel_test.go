package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

func openReadModelStore(t *testing.T, schema string, edit ...func(*Options)) *ReadModelStore {
	t.Helper()
	s, err := OpenReadModelStore(context.Background(), testOptions(t, schema, edit...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReadModelStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore { return openReadModelStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.ReadModelStore) store.ReadModelStore {
			return openReadModelStore(t, closed.(*ReadModelStore).Schema())
		},
	})
}

// The DB's payload cap (Options.Limits) caps a read model's document too.
func TestReadModelStoreConformanceSmallCap(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore {
			return openReadModelStore(t, newSchema(t), func(o *Options) { o.Limits = event.Limits{MaxPayloadBytes: limit} })
		},
		MaxDocBytes: limit,
	})
}

// Three DBs on one schema are three nodes, each with its own pool: the
// kit's calls take turns between them, so its racing subtests race Applies
// of different nodes through PostgreSQL's row locks.
func TestReadModelStoreConformanceThreeNodes(t *testing.T) {
	t.Parallel()
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore {
			schema := newSchema(t)
			n := &nodes{}
			for i := range n.views {
				n.views[i] = openDB(t, schema).ReadModelStore()
			}
			return n
		},
	})
}

// nodes spreads calls over the read-model views of several DBs on one
// schema, taking turns.
type nodes struct {
	views [3]*ReadModelStore
	turn  atomic.Uint64
}

func (n *nodes) next() *ReadModelStore { return n.views[n.turn.Add(1)%uint64(len(n.views))] }

func (n *nodes) Apply(ctx context.Context, p, src string, from, to int64, ws []store.ReadModelWrite) error {
	return n.next().Apply(ctx, p, src, from, to, ws)
}
func (n *nodes) Watermark(ctx context.Context, p, src string) (int64, bool, error) {
	return n.next().Watermark(ctx, p, src)
}
func (n *nodes) Watermarks(ctx context.Context, p, after string, limit int) (store.WatermarkPage, error) {
	return n.next().Watermarks(ctx, p, after, limit)
}
func (n *nodes) Get(ctx context.Context, kind, id string) (store.ReadModel, bool, error) {
	return n.next().Get(ctx, kind, id)
}
func (n *nodes) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	return n.next().Query(ctx, q)
}
func (n *nodes) Reset(ctx context.Context, p string) error { return n.next().Reset(ctx, p) }

// Close detaches every view; the DBs close at cleanup.
func (n *nodes) Close() error {
	var errs []error
	for _, v := range n.views {
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}

// TestReadModelApplyRacesWithoutDeadlock: Applies of many sources writing
// overlapping rows, each batch in its own order, race Resets of their
// projection on three nodes. Locks are taken in key order, so no
// transaction is aborted as a deadlock or fails for another reason: every
// Apply commits or is refused with a typed error, and the index agrees
// with the rows afterwards.
func TestReadModelApplyRacesWithoutDeadlock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	var views [3]*ReadModelStore
	for i := range views {
		views[i] = openDB(t, schema).ReadModelStore()
	}
	ctx := context.Background()
	const workers, rounds, rows = 6, 20, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		s := views[w%len(views)]
		wg.Go(func() {
			source, wm := fmt.Sprintf("src-%d", w), store.NoWatermark
			for r := range rounds {
				var writes []store.ReadModelWrite
				for i := range rows {
					id := fmt.Sprintf("row-%d", (i*(w+1)+r)%rows) // each worker its own order
					if slices.ContainsFunc(writes, func(w store.ReadModelWrite) bool { return w.Row.ID == id }) {
						continue
					}
					cur, _, err := s.Get(ctx, "k", id)
					if err != nil {
						errs <- err
						return
					}
					writes = append(writes, store.ReadModelWrite{ExpectVersion: cur.Version, Row: store.ReadModel{
						Kind: "k", ID: id, Fields: map[string]string{"by": source, "round": fmt.Sprint(r)},
						Doc: json.RawMessage(fmt.Sprintf(`{"by":%q,"round":%d}`, source, r))}})
				}
				switch err := s.Apply(ctx, "p", source, wm, wm+1, writes); {
				case err == nil:
					wm++
				case errors.Is(err, store.ErrWatermarkConflict):
					wm = store.NoWatermark // a Reset ran: start the source again
				case !errors.Is(err, store.ErrReadModelVersionConflict):
					errs <- fmt.Errorf("%s round %d: %w", source, r, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds / 2 {
			if err := views[0].Reset(ctx, "p"); err != nil {
				errs <- fmt.Errorf("Reset: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	q := quoted(schema)
	if n := adminQueryInt(t, `SELECT count(*) FROM `+q+`.read_model_fields f WHERE NOT EXISTS (
		SELECT 1 FROM `+q+`.read_models r, json_each_text(r.fields::json) j
		WHERE r.kind = f.kind AND r.id = f.id AND j.key = f.name AND j.value = f.value)`); n != 0 {
		t.Fatalf("%d index entries name no row's field", n)
	}
	if n := adminQueryInt(t, `SELECT count(*) FROM `+q+`.read_models r, json_each_text(r.fields::json) j WHERE NOT EXISTS (
		SELECT 1 FROM `+q+`.read_model_fields f
		WHERE r.kind = f.kind AND r.id = f.id AND j.key = f.name AND j.value = f.value)`); n != 0 {
		t.Fatalf("%d fields of rows have no index entry", n)
	}
}

// TestReadModelQueryPlanUsesTheFieldIndex: PostgreSQL's plan for a query
// with a Where reads the read_model_fields key, not a sequential scan, on
// a schema of 5000 rows.
func TestReadModelQueryPlanUsesTheFieldIndex(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	s := db.ReadModelStore()
	ctx := context.Background()
	for b := range 5 {
		var writes []store.ReadModelWrite
		for i := range 1000 {
			id := fmt.Sprintf("r%05d", b*1000+i)
			writes = append(writes, store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: id,
				Fields: map[string]string{"bucket": fmt.Sprint(i % 10), "tier": fmt.Sprint(i % 3)}, Doc: json.RawMessage(`{}`)}})
		}
		if err := s.Apply(ctx, "p", "src", int64(b)-1, int64(b), writes); err != nil {
			t.Fatal(err)
		}
	}
	adminExec(t, `ANALYZE `+quoted(schema)+`.read_models`)
	adminExec(t, `ANALYZE `+quoted(schema)+`.read_model_fields`)
	for _, where := range []map[string]string{{"bucket": "3"}, {"bucket": "3", "tier": "1"}} {
		text, args := readModelQuerySQL(quoted(schema), store.ReadModelQuery{Kind: "k", Where: where, Limit: 100})
		rows, err := db.pool.Query(ctx, "EXPLAIN "+text, args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		var line string
		for rows.Next() {
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "read_model_fields_pkey") {
			t.Errorf("the plan of a query with %d pairs does not walk the field index:\n%s", len(where), plan)
		}
	}
}

// TestReadModelsInTheStoragePreset: the preset's Set carries the schema's
// read models.
func TestReadModelsInTheStoragePreset(t *testing.T) {
	t.Parallel()
	st, err := Storage(context.Background(), testOptions(t, newSchema(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	rm := st.StoreSet().ReadModels
	if rm == nil || rm != st.ReadModels {
		t.Fatal("StoreSet().ReadModels is not the preset's read-model store")
	}
	ctx := context.Background()
	w := store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: "a", Doc: json.RawMessage(`{}`)}}
	if err := rm.Apply(ctx, "p", "src", store.NoWatermark, 0, []store.ReadModelWrite{w}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := st.DB.ReadModelStore().Get(ctx, "k", "a"); err != nil || !ok || got.Version != 1 {
		t.Fatalf("another view of the DB reads %+v %v %v", got, ok, err)
	}
}
