package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/loom-kernel/loom/plugins/sqlite"
)

// The SQLite raw baselines insert into a table shaped like plugins/sqlite's
// events table (same columns, same primary key, a rowid table), through the
// same driver (modernc.org/sqlite) with the same writer pragmas: WAL, the chosen
// synchronous level, busy_timeout 5 s, foreign_keys off, temp_store MEMORY.
// No Loom code runs in these loops: they are the ceiling the workloads are
// judged against.

// rawEventsDDL mirrors the events table of plugins/sqlite (migration 1).
const rawEventsDDL = `CREATE TABLE IF NOT EXISTS raw_events (
	execution_id TEXT NOT NULL,
	sequence     INTEGER NOT NULL,
	id           TEXT NOT NULL,
	workflow_id  TEXT NOT NULL,
	event_type   TEXT NOT NULL,
	timestamp    INTEGER NOT NULL,
	payload      TEXT NOT NULL,
	metadata     TEXT,
	PRIMARY KEY (execution_id, sequence)
)`

const rawInsertSQL = `INSERT INTO raw_events (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

// rawPayload is the payload of a trivial step's STEP_STARTED as the runtime
// records it: the raw rows are as big as the workloads' rows.
const rawPayload = `{"attempt":1,"input":3,"kind":"step","stepId":"step#3"}`

// rawRowsPerExecution moves the raw rows to a fresh random execution id
// every 22 rows (the events of one 10-step workflow), so the primary-key
// index grows at random places as it does under the workloads.
const rawRowsPerExecution = 22

// rawRowsPerBatch is the batch of the batched baseline.
const rawRowsPerBatch = 100

// rawWriterDSN builds the DSN plugins/sqlite gives its writer connection.
func rawWriterDSN(path string, sync sqlite.Synchronous) string {
	q := []string{
		"_pragma=busy_timeout(5000)",
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(" + sync.String() + ")",
		"_pragma=foreign_keys(0)",
		"_pragma=temp_store(MEMORY)",
	}
	return "file:" + path + "?" + strings.Join(q, "&")
}

// rawTable is one connection to a database holding raw_events, with the
// insert prepared once.
type rawTable struct {
	db     *sql.DB
	conn   *sql.Conn
	insert *sql.Stmt
	exec   string // current execution id
	seq    int64  // next sequence within exec
}

// openRawTable opens (creating) the database at path over one pinned
// connection and prepares the insert. The loop goes through database/sql on
// that connection, which costs about a microsecond per row more than the
// plugin's driver-level statements: negligible beside a commit.
func openRawTable(ctx context.Context, path string, sync sqlite.Synchronous) (*rawTable, error) {
	c, err := msqlite.NewConnector(rawWriterDSN(path, sync))
	if err != nil {
		return nil, fmt.Errorf("raw: %w", err)
	}
	t := &rawTable{db: sql.OpenDB(c)}
	t.db.SetMaxOpenConns(1)
	if t.conn, err = t.db.Conn(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("raw: open %s: %w", path, err), t.db.Close())
	}
	if _, err = t.conn.ExecContext(ctx, rawEventsDDL); err == nil {
		t.insert, err = t.conn.PrepareContext(ctx, rawInsertSQL)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raw: prepare: %w", err), t.conn.Close(), t.db.Close())
	}
	return t, nil
}

// Close closes the statement, the connection and the pool.
func (t *rawTable) Close() error {
	return errors.Join(t.insert.Close(), t.conn.Close(), t.db.Close())
}

// insertTx inserts rows rows in one BEGIN IMMEDIATE … COMMIT transaction,
// as the plugin's writer brackets its commits.
func (t *rawTable) insertTx(ctx context.Context, rows int) error {
	if _, err := t.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("raw: begin: %w", err)
	}
	err := t.insertRows(ctx, rows)
	if err == nil {
		if _, err = t.conn.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
		err = fmt.Errorf("raw: commit: %w", err)
	}
	if _, rerr := t.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
		return errors.Join(err, fmt.Errorf("raw: rollback: %w", rerr))
	}
	return err
}

// insertRows inserts rows rows into the open transaction.
func (t *rawTable) insertRows(ctx context.Context, rows int) error {
	for range rows {
		if t.exec == "" || t.seq == rawRowsPerExecution {
			t.exec, t.seq = randomHex(), 0
		}
		_, err := t.insert.ExecContext(ctx, t.exec, t.seq, randomHex(), "ten-steps", "STEP_STARTED",
			time.Now().UnixMilli(), rawPayload, nil)
		if err != nil {
			return fmt.Errorf("raw: insert: %w", err)
		}
		t.seq++
	}
	return nil
}

// rawRate inserts rowsPerTx rows per transaction for d and returns rows/s.
func (t *rawTable) rawRate(ctx context.Context, rowsPerTx int, d time.Duration) (float64, error) {
	var rows int64
	start := time.Now()
	for time.Since(start) < d {
		if err := t.insertTx(ctx, rowsPerTx); err != nil {
			return 0, err
		}
		rows += int64(rowsPerTx)
	}
	return perSecond(rows, time.Since(start)), nil
}

// rate implements rawSink: one connection, so no concurrent baseline.
func (t *rawTable) rate(ctx context.Context, kind rawKind, d time.Duration) (float64, error) {
	switch kind {
	case rawOne:
		return t.rawRate(ctx, 1, d)
	case rawHundred:
		return t.rawRate(ctx, rawRowsPerBatch, d)
	}
	return 0, fmt.Errorf("raw: %s: not measured on SQLite", kind)
}

// rawKind names one raw baseline.
type rawKind int

const (
	rawOne       rawKind = iota // one row per commit, one connection
	rawHundred                  // rawRowsPerBatch rows per transaction, one connection
	rawThirtyTwo                // one row per commit on each of rawConns connections at once
	rawKinds
)

func (k rawKind) String() string {
	return [...]string{"1 row per transaction", "100 rows per transaction", "32 connections, 1 row per transaction"}[k]
}

// rawSink is where the raw baselines insert: a SQLite file or a
// PostgreSQL schema.
type rawSink interface {
	// rate inserts for d the way kind says and returns rows/s.
	rate(ctx context.Context, kind rawKind, d time.Duration) (float64, error)
	Close() error
}

// rawBaselines measures the baselines on one raw sink for the whole run. A
// workload's baseline is measured right before and right after it (half
// the duration each) and averaged, so drift of a shared machine's disk
// during the run shows up in the samples instead of in the ratio.
type rawBaselines struct {
	sink     rawSink
	kinds    []rawKind // the baselines the sink measures
	d        time.Duration
	progress func(string, ...any)
	samples  [rawKinds][]float64 // rows/s, in the order taken
}

// openRawBaselines opens raw.db in dir and warms it up: the first commits
// create the WAL and its pages.
func openRawBaselines(ctx context.Context, dir string, sync sqlite.Synchronous, d time.Duration,
	progress func(string, ...any)) (*rawBaselines, error) {
	t, err := openRawTable(ctx, filepath.Join(dir, "raw.db"), sync)
	if err != nil {
		return nil, err
	}
	if _, err := t.rawRate(ctx, 1, min(d/10, 200*time.Millisecond)); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return &rawBaselines{sink: t, kinds: []rawKind{rawOne, rawHundred}, d: d, progress: progress}, nil
}

// Close closes the raw sink.
func (b *rawBaselines) Close() error { return b.sink.Close() }

// measures reports whether the sink measures kind.
func (b *rawBaselines) measures(kind rawKind) bool { return slices.Contains(b.kinds, kind) }

// measure takes one sample of kind, half the duration long.
func (b *rawBaselines) measure(ctx context.Context, kind rawKind) (float64, error) {
	rate, err := b.sink.rate(ctx, kind, b.d/2)
	if err != nil {
		return 0, err
	}
	b.samples[kind] = append(b.samples[kind], rate)
	b.progress("raw: %s: %.0f rows/s", kind, rate)
	return rate, nil
}

// around measures each of kinds before and after workload and returns
// their samples, one list per kind.
func (b *rawBaselines) around(ctx context.Context, workload func() error, kinds ...rawKind) ([][]float64, error) {
	out := make([][]float64, len(kinds))
	sample := func() error {
		for i, k := range kinds {
			rate, err := b.measure(ctx, k)
			if err != nil {
				return err
			}
			out[i] = append(out[i], round(rate))
		}
		return nil
	}
	if err := sample(); err != nil {
		return nil, err
	}
	if err := workload(); err != nil {
		return nil, err
	}
	if err := sample(); err != nil {
		return nil, err
	}
	return out, nil
}

// report sums the samples up; a baseline no workload needed is measured
// once now, so the raw section is always complete.
func (b *rawBaselines) report(ctx context.Context) (RawReport, error) {
	for _, k := range b.kinds {
		if len(b.samples[k]) == 0 {
			if _, err := b.measure(ctx, k); err != nil {
				return RawReport{}, err
			}
		}
	}
	one, hundred, conns := b.samples[rawOne], b.samples[rawHundred], b.samples[rawThirtyTwo]
	return RawReport{
		OneRowPerCommitPerSec:                round(mean(one)),
		HundredRowsPerTxPerSec:               round(mean(hundred)),
		ThirtyTwoConnsOneRowPerCommitPerSec:  round(mean(conns)),
		OneRowPerCommitSamples:               roundAll(one),
		HundredRowsSamples:                   roundAll(hundred),
		ThirtyTwoConnsOneRowPerCommitSamples: roundAll(conns),
		PayloadBytes:                         len(rawPayload),
	}, nil
}

// randomHex is a 128-bit hex id, as the runtime mints event ids.
func randomHex() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("bench: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
