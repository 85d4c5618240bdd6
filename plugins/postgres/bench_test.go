package postgres

// Benchmarks of the event store against raw pgx on the same server, in one
// run so their ratios are meaningful on a shared machine:
//
//	eval "$(./scripts/pg-start.sh)"
//	go test -run '^$' -bench . -benchtime=3s ./plugins/postgres/
//
// The raw benchmarks insert into raw_events, a copy of the events table
// (CREATE TABLE … (LIKE events INCLUDING ALL): same columns, same primary
// key) in the same schema, with the same row shape and payload, through
// prepared statements, as the store does. The ratios of interest:
//
//	AppendSingle       / RawInsertOneRowPerCommit   (a lone appender)
//	AppendConcurrent32 / RawInsert100RowsPerTx      (group commit vs batching)
//	AppendConcurrent32 / RawInsert32Connections     (group commit vs 32 connections)
//
// What the store adds over raw: validation, the queue to the leader, the
// executions row (the expected-length check and the fence) and the NOTIFY,
// whose queue lock PostgreSQL holds through each notifying commit.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
)

func benchEnvelope(exec string, seq int64) event.Envelope { return writertest.BenchEnvelope(exec, seq) }

func reportEventsPerSecond(b *testing.B) { writertest.ReportEventsPerSecond(b) }

// rawPool opens a DB on a fresh schema (for its tables), adds raw_events
// shaped like events, and returns a pool of conns connections for the raw
// inserts and the table's qualified name.
func rawPool(b *testing.B, conns int32) (*pgxpool.Pool, string) {
	b.Helper()
	db := openTestDB(b)
	table := quoted(db.Schema()) + ".raw_events"
	adminExec(b, `CREATE TABLE `+table+` (LIKE `+quoted(db.Schema())+`.events INCLUDING ALL)`)
	cfg, err := pgxpool.ParseConfig(testDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = conns, conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool, table
}

func rawInsertSQL(table string) string {
	return `INSERT INTO ` + table + ` (execution_id, sequence, id, workflow_id, event_type, timestamp_ms, payload, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
}

func rawArgs(exec string, seq int64) []any {
	e := benchEnvelope(exec, seq) // the very row Append writes
	return []any{exec, seq, e.ID, e.WorkflowID, e.Type, e.Timestamp, string(e.Payload), nil}
}

// withConn runs fn on one connection of pool.
func withConn(b *testing.B, pool *pgxpool.Pool, fn func(c *pgx.Conn) error) {
	b.Helper()
	if err := pool.AcquireFunc(context.Background(), func(c *pgxpool.Conn) error { return fn(c.Conn()) }); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRawInsertOneRowPerCommit: pgx alone, one row per transaction
// (an autocommitted INSERT): the ceiling for a lone appender.
func BenchmarkRawInsertOneRowPerCommit(b *testing.B) {
	pool, table := rawPool(b, 1)
	insert := rawInsertSQL(table)
	withConn(b, pool, func(c *pgx.Conn) error {
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			if _, err := c.Exec(ctx, insert, rawArgs("exec-raw", int64(i))...); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	reportEventsPerSecond(b)
}

// BenchmarkRawInsert100RowsPerTx: pgx alone, 100 rows per transaction, as
// one pipelined batch: the batched ceiling group commit aims at.
func BenchmarkRawInsert100RowsPerTx(b *testing.B) {
	pool, table := rawPool(b, 1)
	insert := rawInsertSQL(table)
	withConn(b, pool, func(c *pgx.Conn) error {
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i += 100 {
			pb := &pgx.Batch{}
			for j := i; j < min(i+100, b.N); j++ {
				pb.Queue(insert, rawArgs("exec-raw", int64(j))...)
			}
			if err := c.SendBatch(ctx, pb).Close(); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	reportEventsPerSecond(b)
}

// BenchmarkRawInsert32Connections: pgx alone, 32 connections each
// inserting one row per transaction into its own execution: what
// PostgreSQL's own commit grouping gives concurrent writers.
func BenchmarkRawInsert32Connections(b *testing.B) {
	pool, table := rawPool(b, 32)
	insert := rawInsertSQL(table)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range 32 {
		wg.Go(func() {
			err := pool.AcquireFunc(context.Background(), func(c *pgxpool.Conn) error {
				exec := fmt.Sprintf("exec-%02d", w)
				for seq := int64(0); left.Add(-1) >= 0; seq++ {
					if _, err := c.Exec(context.Background(), insert, rawArgs(exec, seq)...); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportEventsPerSecond(b)
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
