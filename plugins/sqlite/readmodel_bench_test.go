package sqlite

// Benchmarks of the read-model store, each against its own yardstick in the
// same run, so the ratios mean something on a shared machine:
//
//	go test -run '^$' -bench 'ReadModel' -benchtime 2s ./plugins/sqlite/
//
// BenchmarkReadModelApply interleaves Applies with raw inserts of the same
// rows, one transaction each, on files with the same pragmas
// (synchronous=FULL: both are bound by the commit's fsync), and reports
// apply/raw, the cost of what Apply adds: validation, the writer's queue,
// the watermark compare-and-set, the version check of each row and its
// index entries. BenchmarkReadModelQuery pages through the rows of a kind
// matching one field, over 1 000 and 100 000 rows of the kind: the walk of
// the field index makes the two cost about the same (large/small near 1,
// where a scan of the kind would be near 100).

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/loom-kernel/loom/store"
)

// benchRow is the i-th row the benchmarks write: an order with two indexed
// fields (status of 10 values, region of 2, independent of it: one row in
// 20 has a given pair) and a small document.
func benchRow(i int) store.ReadModel {
	return store.ReadModel{Kind: "order", ID: fmt.Sprintf("order-%09d", i),
		Fields: map[string]string{"status": fmt.Sprintf("s%d", i%10), "region": fmt.Sprintf("r%d", i/10%2)},
		Doc:    json.RawMessage(fmt.Sprintf(`{"id":%d,"total":12.50,"lines":[{"sku":"a-1","qty":2}]}`, i))}
}

const sqlRawReadModels = `CREATE TABLE raw_read_models (
	kind TEXT NOT NULL, id TEXT NOT NULL, projection TEXT NOT NULL, version INTEGER NOT NULL,
	fields TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (kind, id))`

const sqlRawReadModelInsert = `INSERT INTO raw_read_models (kind, id, projection, version, fields, doc) VALUES (?, ?, ?, 1, ?, ?)`

func BenchmarkReadModelApply(b *testing.B) {
	for _, rows := range []int{1, 10} {
		b.Run(fmt.Sprintf("writes=%d", rows), func(b *testing.B) {
			s := openTestDB(b).ReadModelStore()
			ctx := context.Background()
			rawTable(b, func(c *rawConn) error {
				if _, err := c.exec(sqlRawReadModels); err != nil {
					return err
				}
				var applyNs, rawNs time.Duration
				next := 0
				for b.Loop() {
					writes := make([]store.ReadModelWrite, rows)
					for j := range writes {
						writes[j] = store.ReadModelWrite{Row: benchRow(next + j)}
					}
					t0 := time.Now()
					if err := s.Apply(ctx, "orders", "src", int64(next)-1, int64(next+rows)-1, writes); err != nil {
						return err
					}
					t1 := time.Now()
					err := c.inTx(func() error {
						for _, w := range writes {
							r := w.Row
							if _, err := c.exec(sqlRawReadModelInsert, r.Kind, r.ID, "orders",
								store.ReadModelFieldsJSON(r.Fields), string(r.Doc)); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						return err
					}
					rawNs += time.Since(t1)
					applyNs += t1.Sub(t0)
					next += rows
				}
				b.ReportMetric(float64(applyNs.Nanoseconds())/float64(b.N), "ns/apply")
				b.ReportMetric(float64(rawNs.Nanoseconds())/float64(b.N), "ns/raw-tx")
				b.ReportMetric(float64(applyNs)/float64(rawNs), "apply/raw")
				return nil
			})
		})
	}
}

// seedReadModels writes n rows of benchRow through Apply, in batches of
// store.MaxReadModelWrites: set-up, not a measurement.
func seedReadModels(tb testing.TB, s *ReadModelStore, n int) {
	tb.Helper()
	ctx := context.Background()
	wm := store.NoWatermark
	for from := 0; from < n; from += store.MaxReadModelWrites {
		var writes []store.ReadModelWrite
		for i := from; i < min(n, from+store.MaxReadModelWrites); i++ {
			writes = append(writes, store.ReadModelWrite{Row: benchRow(i)})
		}
		if err := s.Apply(ctx, "orders", "seed", wm, wm+1, writes); err != nil {
			tb.Fatal(err)
		}
		wm++
	}
}

func BenchmarkReadModelQuery(b *testing.B) {
	// A page every query fills at both sizes (1 000 rows hold 50 of each
	// pair, 45 past the cursor), so both do the same work unless the cost
	// grows with the rows of the kind.
	const smallRows, largeRows, page = 1_000, 100_000, 25
	small, large := openTestDB(b, WithSynchronous(SyncNormal)), openTestDB(b, WithSynchronous(SyncNormal))
	start := time.Now()
	seedReadModels(b, small.ReadModelStore(), smallRows)
	seedReadModels(b, large.ReadModelStore(), largeRows)
	b.Logf("seeded %d + %d rows in %v", smallRows, largeRows, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	// query reads page i of a rotation: the first page of one status, or
	// of one status and region from a cursor a tenth of the way in.
	query := func(b *testing.B, s *ReadModelStore, i int) {
		q := store.ReadModelQuery{Kind: "order", Where: map[string]string{"status": fmt.Sprintf("s%d", i%10)}, Limit: page}
		if i%2 == 1 {
			q.Where["region"] = fmt.Sprintf("r%d", i/2%2)
			q.After = fmt.Sprintf("order-%09d", smallRows/10)
		}
		got, err := s.Query(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Rows) != page {
			b.Fatalf("query %+v found %d rows, want a full page", q, len(got.Rows))
		}
	}
	for _, c := range []struct {
		name string
		db   *DB
	}{{"rows=1000", small}, {"rows=100000", large}} {
		b.Run(c.name, func(b *testing.B) {
			s := c.db.ReadModelStore()
			i := 0
			for b.Loop() {
				query(b, s, i)
				i++
			}
		})
	}
	// Both sizes queried in turn, so the ratio compares the same moments of
	// a shared machine.
	b.Run("ratio", func(b *testing.B) {
		var smallNs, largeNs time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			query(b, small.ReadModelStore(), i)
			t1 := time.Now()
			query(b, large.ReadModelStore(), i)
			smallNs += t1.Sub(t0)
			largeNs += time.Since(t1)
			i++
		}
		b.ReportMetric(float64(smallNs.Nanoseconds())/float64(b.N), "ns/query-1k")
		b.ReportMetric(float64(largeNs.Nanoseconds())/float64(b.N), "ns/query-100k")
		b.ReportMetric(float64(largeNs)/float64(smallNs), "large/small")
	})
}
