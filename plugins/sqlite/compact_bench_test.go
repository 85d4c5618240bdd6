package sqlite

// BenchmarkCompaction measures Runtime.Compact on a SQLite file beside the
// raw baseline in the same run: the same rows moved by one SQL
// transaction (INSERT INTO archive SELECT … ; DELETE …) on a plain
// connection. Each op compacts one log of n events (batches of 100,
// ~200-byte payloads) through its second-to-last event, on a fresh copy of
// a file built once. Reported: events archived per second, both ways, and
// their ratio. Run
//
//	go test -run '^$' -bench Compaction -benchtime 5x ./plugins/sqlite/

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
)

func BenchmarkCompaction(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			built := filepath.Join(b.TempDir(), "built.db")
			buildLog(b, built, n)
			var kernel, raw time.Duration
			for i := 0; b.Loop(); i++ {
				kernel += timeCompact(b, benchCopy(b, built, i, "k"), n)
				raw += timeRawMove(b, benchCopy(b, built, i, "r"), n)
			}
			moved := float64(n-2) * float64(b.N)
			b.ReportMetric(moved/kernel.Seconds(), "kernel-events/s")
			b.ReportMetric(moved/raw.Seconds(), "raw-events/s")
			b.ReportMetric(raw.Seconds()/kernel.Seconds(), "kernel/raw-rate")
		})
	}
}

// buildLog writes one log "x" of n events to a new file.
func buildLog(b *testing.B, path string, n int) {
	b.Helper()
	s := mustOpenEventStore(b, path)
	payload := `{"item":"` + fmt.Sprintf("%0180d", 7) + `"}`
	for from := 0; from < n; from += 100 {
		evs := batch("x", int64(from), min(100, n-from))
		for i := range evs {
			evs[i].Payload = []byte(payload)
		}
		if err := s.Append(context.Background(), "x", int64(from), evs); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

func benchCopy(b *testing.B, src string, i int, tag string) string {
	b.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), tag+strconv.Itoa(i)+".db")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return dst
}

func timeCompact(b *testing.B, path string, n int) time.Duration {
	b.Helper()
	st, err := Storage(StorageOptions{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rt, err := loom.New(loom.Config{Storage: st, Recovery: loom.Recovery{Disabled: true}, TimerPoll: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	start := time.Now()
	res, err := rt.Compact(context.Background(), "x", int64(n-2))
	d := time.Since(start)
	if err != nil || res.Archived != n-2 {
		b.Fatalf("Compact: %+v %v", res, err)
	}
	return d
}

func timeRawMove(b *testing.B, path string, n int) time.Duration {
	b.Helper()
	db, err := sql.Open("sqlite", fileURI(path)+"?_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SELECT count(*) FROM events`); err != nil { // open before the clock starts
		b.Fatal(err)
	}
	start := time.Now()
	tx, err := db.Begin()
	if err == nil {
		_, err = tx.Exec(`INSERT INTO archive SELECT * FROM events WHERE execution_id = 'x' AND sequence BETWEEN 1 AND ?`, n-2)
	}
	if err == nil {
		_, err = tx.Exec(`DELETE FROM events WHERE execution_id = 'x' AND sequence BETWEEN 1 AND ?`, n-2)
	}
	if err == nil {
		err = tx.Commit()
	}
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
