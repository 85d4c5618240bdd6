package sqlite

// Benchmarks of the event store against the raw driver, in one run so their
// ratios are meaningful on a shared machine:
//
//	go test -run '^$' -bench . -benchtime=2s ./plugins/sqlite/
//
// The raw benchmarks use the same file pragmas (WAL, synchronous=FULL), the
// same table definition and row shape as the events table, and the same
// driver-level prepared statements as the store's writer, so the ratios
// measure what the store adds: validation, the queue to the writer, the
// sequence check and the executions row.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
)

func benchEnvelope(exec string, seq int64) event.Envelope { return writertest.BenchEnvelope(exec, seq) }

func reportEventsPerSecond(b *testing.B) { writertest.ReportEventsPerSecond(b) }

// rawTable opens a database with the writer's pragmas and a plain table
// shaped like events, and runs fn on its connection at the driver level.
func rawTable(b *testing.B, fn func(c *rawConn) error) {
	b.Helper()
	pool, err := openPool(writerDSN(filepath.Join(b.TempDir(), "raw.db"), defaultOptions()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := pool.Close(); err != nil {
			b.Error(err)
		}
	}()
	conn, err := pool.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := conn.Close(); err != nil {
			b.Error(err)
		}
	}()
	ddl := strings.Replace(schemaMigrations[0].stmts[0], "CREATE TABLE events", "CREATE TABLE raw_events", 1)
	err = conn.Raw(func(dc any) error {
		c, err := newRawConn(dc)
		if err != nil {
			return err
		}
		if _, err := c.exec(ddl); err != nil {
			return err
		}
		err = fn(c)
		if cerr := c.close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

const rawInsert = `INSERT INTO raw_events (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

func rawInsertRow(c *rawConn, seq int64) error { return rawInsertEvent(c, "exec-raw", seq) }

func rawInsertEvent(c *rawConn, exec string, seq int64) error {
	e := benchEnvelope(exec, seq) // the very row Append writes
	_, err := c.exec(rawInsert, exec, seq, e.ID, e.WorkflowID, e.Type, e.Timestamp, string(e.Payload), nil)
	return err
}

// BenchmarkRawInsertOneRowPerCommit: the driver alone, one row per
// transaction: the ceiling for a lone appender.
func BenchmarkRawInsertOneRowPerCommit(b *testing.B) {
	rawTable(b, func(c *rawConn) error {
		b.ResetTimer()
		for i := range b.N {
			if err := c.inTx(func() error { return rawInsertRow(c, int64(i)) }); err != nil {
				return err
			}
		}
		b.StopTimer()
		reportEventsPerSecond(b)
		return nil
	})
}

// BenchmarkRawInsert100RowsPerTx: the driver alone, 100 rows per
// transaction: the batched ceiling group commit aims at.
func BenchmarkRawInsert100RowsPerTx(b *testing.B) {
	rawTable(b, func(c *rawConn) error {
		b.ResetTimer()
		for i := 0; i < b.N; i += 100 {
			err := c.inTx(func() error {
				for j := i; j < min(i+100, b.N); j++ {
					if err := rawInsertRow(c, int64(j)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		b.StopTimer()
		reportEventsPerSecond(b)
		return nil
	})
}

// BenchmarkRawInsert32RowsPerTx32Executions is a diagnostic, not a
// target: the driver alone writing the key pattern AppendConcurrent32
// produces, one event of each of 32 logs per transaction. Interleaved logs
// dirty one primary-key index page per log per commit, where one log's
// sequential rows share pages; this shows what that costs before any
// store logic runs.
func BenchmarkRawInsert32RowsPerTx32Executions(b *testing.B) {
	execs := make([]string, 32)
	for i := range execs {
		execs[i] = fmt.Sprintf("exec-%02d", i)
	}
	rawTable(b, func(c *rawConn) error {
		b.ResetTimer()
		for i := 0; i < b.N; i += len(execs) {
			err := c.inTx(func() error {
				for j := i; j < min(i+len(execs), b.N); j++ {
					if err := rawInsertEvent(c, execs[j%len(execs)], int64(j/len(execs))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		b.StopTimer()
		reportEventsPerSecond(b)
		return nil
	})
}

// BenchmarkAppendSingle: one appender, one event per Append, each durable
// before the next.
func BenchmarkAppendSingle(b *testing.B) {
	writertest.BenchAppendSingle(b, openTestDB(b).EventStore())
}

// BenchmarkAppendConcurrent32: 32 appenders, each on its own execution,
// one event per Append; group commit folds them into shared transactions.
func BenchmarkAppendConcurrent32(b *testing.B) {
	db := openTestDB(b)
	writertest.BenchAppendConcurrent(b, db.EventStore(), 32, kitStats(db))
}
