package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL raw baselines insert through pgx v5, the plugin's driver,
// into a table shaped like plugins/postgres's events table (migration 1:
// same columns, types, COLLATE "C" and primary key) in a schema of their
// own, with the SQLite baselines' rows. No Loom code runs in these loops:
// they are the ceiling the workloads are judged against.

// pgSchemaPrefix starts the name of every schema the harness creates.
const pgSchemaPrefix = "loombench_"

// pgRawConns is the connections of the concurrent baseline, as many as
// workload c's workflows in flight.
const pgRawConns = 32

// pgDropTimeout bounds dropping the run's schemas, which happens even
// after the run's context ended.
const pgDropTimeout = 30 * time.Second

// pgRawEventsDDL mirrors the events table of plugins/postgres; {s} is the
// quoted schema.
const pgRawEventsDDL = `CREATE TABLE {s}.raw_events (
	execution_id text COLLATE "C" NOT NULL,
	sequence     bigint NOT NULL,
	id           text NOT NULL,
	workflow_id  text NOT NULL,
	event_type   text NOT NULL,
	timestamp_ms bigint NOT NULL,
	payload      text NOT NULL,
	metadata     text,
	PRIMARY KEY (execution_id, sequence)
)`

// pgRun is one run's PostgreSQL server: the raw baselines' pool and
// schema, and the schemas the workloads create, all under one run prefix
// so Close can drop every one of them, even those of a failed open.
type pgRun struct {
	dsn        string
	pool       *pgxpool.Pool // raw baselines and cleanup, up to pgRawConns connections
	prefix     string        // loombench_<random hex>_
	insert     string        // the raw INSERT, schema-qualified
	syncCommit string        // the server's synchronous_commit
	config     PostgresConfig

	mu      sync.Mutex
	schemas []string // created, in order
}

// openPGRun connects to dsn, reads the settings that decide a commit's
// cost and creates the raw table in a fresh schema.
func openPGRun(ctx context.Context, dsn string) (*pgRun, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	cfg.MaxConns = pgRawConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	r := &pgRun{dsn: dsn, pool: pool, prefix: pgSchemaPrefix + randomHex()[:12] + "_"}
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('wal_sync_method'), current_setting('synchronous_commit')`).
		Scan(&r.config.ServerVersion, &r.config.Fsync, &r.config.WalSyncMethod, &r.syncCommit)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: read server settings: %w", err)
	}
	s := pgx.Identifier{r.newSchema("raw")}.Sanitize()
	r.insert = `INSERT INTO ` + s + `.raw_events (execution_id, sequence, id, workflow_id, event_type, timestamp_ms, payload, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	if _, err = pool.Exec(ctx, `CREATE SCHEMA `+s); err == nil {
		_, err = pool.Exec(ctx, strings.ReplaceAll(pgRawEventsDDL, "{s}", s))
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("postgres: create the raw table: %w", err), r.Close())
	}
	return r, nil
}

// newSchema names a fresh schema of the run and records it; the caller
// creates it.
func (r *pgRun) newSchema(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.prefix + name
	r.schemas = append(r.schemas, s)
	return s
}

// postgresConfig describes the server and the schemas created so far.
func (r *pgRun) postgresConfig() *PostgresConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.config
	c.Schemas = append([]string(nil), r.schemas...)
	return &c
}

// baselines warms the raw table up and returns the three baselines on it.
// The warm-up opens all pgRawConns connections and prepares the insert on
// each, so no sample pays for either.
func (r *pgRun) baselines(ctx context.Context, d time.Duration, progress func(string, ...any)) (*rawBaselines, error) {
	if _, err := r.rate(ctx, rawThirtyTwo, min(d/10, 200*time.Millisecond)); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return &rawBaselines{sink: r, kinds: []rawKind{rawOne, rawHundred, rawThirtyTwo}, d: d, progress: progress}, nil
}

// rate implements rawSink: kind's connections each commit rows for d;
// rows/s is their sum.
func (r *pgRun) rate(ctx context.Context, kind rawKind, d time.Duration) (float64, error) {
	conns, rowsPerTx := 1, 1
	switch kind {
	case rawHundred:
		rowsPerTx = rawRowsPerBatch
	case rawThirtyTwo:
		conns = pgRawConns
	}
	writers := make([]*pgRawWriter, conns)
	defer func() {
		for _, w := range writers {
			if w != nil {
				w.conn.Release()
			}
		}
	}()
	for i := range writers {
		c, err := r.pool.Acquire(ctx)
		if err != nil {
			return 0, fmt.Errorf("raw: %w", err)
		}
		writers[i] = &pgRawWriter{conn: c, insert: r.insert}
	}
	var (
		rows atomic.Int64
		errs = make([]error, conns)
		wg   sync.WaitGroup
	)
	start := time.Now()
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				if errs[i] = w.commit(ctx, rowsPerTx); errs[i] != nil {
					return
				}
				rows.Add(int64(rowsPerTx))
			}
		}()
	}
	wg.Wait()
	return perSecond(rows.Load(), time.Since(start)), errors.Join(errs...)
}

// Close drops every schema of the run, found by its prefix so a schema a
// failed open left behind goes too, then closes the pool.
func (r *pgRun) Close() error {
	defer r.pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pgDropTimeout)
	defer cancel()
	rows, _ := r.pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE strpos(nspname, $1) = 1`, r.prefix)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: list the run's schemas: %w", err)
	}
	for _, s := range names {
		err = errors.Join(err, dropSchema(ctx, r.pool, s))
	}
	return err
}

// dropSchema drops schema and everything in it; ctx's end does not stop
// it, pgDropTimeout does.
func dropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgDropTimeout)
	defer cancel()
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		return fmt.Errorf("postgres: drop schema %s: %w", schema, err)
	}
	return nil
}

// pgRawWriter is one connection of a raw baseline, moving to a fresh
// execution id every rawRowsPerExecution rows like rawTable.
type pgRawWriter struct {
	conn   *pgxpool.Conn
	insert string
	exec   string
	seq    int64
}

// commit commits rows rows in one transaction, in one round trip as the
// plugin's writer commits: one row as a lone INSERT (its own implicit
// transaction), more as a pgx.Batch of INSERTs between BEGIN and COMMIT,
// pipelined, which is how a careful raw client batches. pgx prepares and
// caches the INSERT per connection.
func (w *pgRawWriter) commit(ctx context.Context, rows int) error {
	if rows == 1 {
		if _, err := w.conn.Exec(ctx, w.insert, w.next()...); err != nil {
			return fmt.Errorf("raw: insert: %w", err)
		}
		return nil
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for range rows {
		b.Queue(w.insert, w.next()...)
	}
	b.Queue("COMMIT")
	if err := w.conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("raw: batch: %w", err)
	}
	return nil
}

// next returns the next row's arguments.
func (w *pgRawWriter) next() []any {
	if w.exec == "" || w.seq == rawRowsPerExecution {
		w.exec, w.seq = randomHex(), 0
	}
	w.seq++
	return []any{w.exec, w.seq - 1, randomHex(), tenStepsFlowID, "STEP_STARTED", time.Now().UnixMilli(), rawPayload, nil}
}
