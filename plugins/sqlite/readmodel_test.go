package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

func openReadModelStore(t *testing.T, path string, opts ...Option) store.ReadModelStore {
	t.Helper()
	s, err := OpenReadModelStore(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReadModelStoreConformance(t *testing.T) {
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore {
			return openReadModelStore(t, filepath.Join(t.TempDir(), "readmodels.db"))
		},
		Reopen: func(t *testing.T, closed store.ReadModelStore) store.ReadModelStore {
			return openReadModelStore(t, closed.(*ReadModelStore).Path())
		},
	})
}

// The DB's payload cap (WithLimits) caps a read model's document too.
func TestReadModelStoreConformanceSmallCap(t *testing.T) {
	const limit = 64 << 10
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore {
			return openReadModelStore(t, filepath.Join(t.TempDir(), "readmodels.db"), WithLimits(event.Limits{MaxPayloadBytes: limit}))
		},
		MaxDocBytes: limit,
	})
}

// Two DBs on one file are two processes: Applies alternate between them
// and race through SQLite's write lock, reads go to both, and the kit's
// racing subtests hold across them.
func TestReadModelStoreConformanceTwoConnections(t *testing.T) {
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(t *testing.T) store.ReadModelStore {
			path := filepath.Join(t.TempDir(), "readmodels.db")
			a, b := openAt(t, path), openAt(t, path)
			t.Cleanup(func() { closeDB(t, b); closeDB(t, a) })
			return &twoConnections{views: [2]*ReadModelStore{a.ReadModelStore(), b.ReadModelStore()}}
		},
	})
}

// twoConnections spreads calls over the read-model views of two DBs on one
// file, taking turns.
type twoConnections struct {
	views [2]*ReadModelStore
	turn  atomic.Uint64
}

func (s *twoConnections) next() *ReadModelStore { return s.views[s.turn.Add(1)%2] }

func (s *twoConnections) Apply(ctx context.Context, p, src string, from, to int64, ws []store.ReadModelWrite) error {
	return s.next().Apply(ctx, p, src, from, to, ws)
}
func (s *twoConnections) Watermark(ctx context.Context, p, src string) (int64, bool, error) {
	return s.next().Watermark(ctx, p, src)
}
func (s *twoConnections) Watermarks(ctx context.Context, p, after string, limit int) (store.WatermarkPage, error) {
	return s.next().Watermarks(ctx, p, after, limit)
}
func (s *twoConnections) Get(ctx context.Context, kind, id string) (store.ReadModel, bool, error) {
	return s.next().Get(ctx, kind, id)
}
func (s *twoConnections) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	return s.next().Query(ctx, q)
}
func (s *twoConnections) Reset(ctx context.Context, p string) error { return s.next().Reset(ctx, p) }

// Close detaches both views; the DBs close at cleanup.
func (s *twoConnections) Close() error { return errors.Join(s.views[0].Close(), s.views[1].Close()) }

// TestReadModelQueryUsesTheFieldIndex: SQLite's plan for a query with a
// Where searches the read_model_fields key (never scans it or the rows of
// the kind) and needs no sort for ORDER BY; Reset deletes index entries by
// their key too.
func TestReadModelQueryUsesTheFieldIndex(t *testing.T) {
	db := openAt(t, filepath.Join(t.TempDir(), "plan.db"))
	defer closeDB(t, db)
	plan := func(q string, args ...any) string {
		t.Helper()
		rows, err := db.read.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	for _, where := range []map[string]string{{"status": "open"}, {"status": "open", "region": "eu", "tier": "gold"}} {
		q, args := readModelQuerySQL(store.ReadModelQuery{Kind: "order", Where: where, Limit: 10})
		p := plan(q, args...)
		if strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "SEARCH f0 USING PRIMARY KEY") {
			t.Errorf("the plan of a query with %d pairs scans or sorts:\n%s", len(where), p)
		}
	}
	if p := plan(sqlRMQueryAll, "order", "", 10); strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("the plan of a query with no Where scans or sorts:\n%s", p)
	}
	if p := plan(sqlRMResetFields, "p"); strings.Contains(p, "SCAN read_model_fields") ||
		!strings.Contains(p, "SEARCH read_model_fields USING PRIMARY KEY") || !strings.Contains(p, "USING INDEX read_models_projection") {
		t.Errorf("Reset scans the field index:\n%s", p)
	}
}

// TestReadModelsInTheStoragePreset: the preset's Set carries the read
// models of its file, beside its event log.
func TestReadModelsInTheStoragePreset(t *testing.T) {
	st, err := Storage(StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db")})
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
