package auditchain_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// BenchmarkChainAppendInterleaved appends the same batches to a plain
// SQLite store and to a chained one over another file, interleaved in one
// run so both see the same machine, and reports each one's ns/append and
// their ratio chained/plain (the target is at most 1.2). Each append is a
// batch of 3 envelopes (a 300-byte payload, metadata.kernel on the first)
// to one of 16 executions, as a journal's tail is; SyncFull is the SQLite
// plugin's default, SyncNormal the fixture's.
func BenchmarkChainAppendInterleaved(b *testing.B) {
	for _, sync := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) { benchAppendInterleaved(b, sync) })
	}
}

func benchAppendInterleaved(b *testing.B, sync sqlite.Synchronous) {
	dir := b.TempDir()
	open := func(name string) *sqlite.EventStore {
		s, err := sqlite.OpenEventStore(filepath.Join(dir, name), sqlite.WithSynchronous(sync))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := s.Close(); err != nil {
				b.Error(err)
			}
		})
		return s
	}
	plain := open("plain.db")
	chained, err := auditchain.Wrap(open("chained.db"), auditchain.Options{Key: testKey})
	if err != nil {
		b.Fatal(err)
	}
	stores := []store.EventStore{plain, chained}
	const execs, batch = 16, 3
	next := make([][]int64, len(stores))
	for i := range next {
		next[i] = make([]int64, execs)
	}
	spent := make([]time.Duration, len(stores))
	ctx := testContext(b)
	n := 0
	for b.Loop() {
		x := n % execs
		id := fmt.Sprintf("exec-%02d", x)
		for k := range stores {
			i := (n + k) % len(stores)
			evs := envelopes(id, int(next[i][x]), batch)
			for j := range evs {
				evs[j].Payload = benchPayload
			}
			start := time.Now()
			if err := stores[i].Append(ctx, id, next[i][x], evs); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
			next[i][x] += batch
		}
		n++
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "plain-ns/append")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "chained-ns/append")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "chained/plain")
}

// benchPayload is a step result of about 300 bytes.
var benchPayload = []byte(`{"output":{"total":42,"carrier":"post","note":"` + strings.Repeat("x", 240) + `"},"stepId":"quote"}`)
