package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooNew matches *SchemaVersionError with errors.Is.
var ErrSchemaTooNew = errors.New("postgres: database schema is newer than this code")

// SchemaVersionError reports a schema whose schema_migrations table records
// a version (Found) above the newest migration this code knows (Known): it
// was written by a newer release. Open refuses it rather than write into
// tables it does not understand; nothing was changed.
type SchemaVersionError struct {
	Schema string
	Found  int
	Known  int
}

func (e *SchemaVersionError) Error() string {
	return "postgres: schema " + strconv.Quote(e.Schema) + " is at version " + strconv.Itoa(e.Found) +
		", newer than the newest this code knows (" + strconv.Itoa(e.Known) + ")"
}

// Is makes errors.Is(err, ErrSchemaTooNew) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaTooNew }

// migration is one step of the schema. Versions are 1, 2, 3… in list order;
// a step is applied once, in its own transaction, with the ledger row that
// records it, so a crash leaves it either wholly applied or not at all.
// {s} in a statement stands for the quoted schema.
type migration struct {
	version int
	name    string
	stmts   []string
}

// schemaMigrations is the schema, oldest first. Never edit a released step:
// append a new one. Ids and names are text COLLATE "C", so ORDER BY and
// range conditions compare bytes, which for UTF-8 is code-point order.
// Payloads and metadata are text, never jsonb (which would reorder keys and
// rewrite numbers), so reads return the appended bytes.
var schemaMigrations = []migration{
	{1, "event log", []string{
		// One row per execution that has a log or a fence: its length (the
		// next sequence) and fencing token. Every append updates it under
		// the expected-length condition, so the row is the execution's
		// lock. A deleted log keeps its row at length 0, so its fence
		// survives; listings skip length 0. fillfactor leaves room for the
		// HOT updates every append makes.
		`CREATE TABLE {s}.executions (
			execution_id text COLLATE "C" NOT NULL PRIMARY KEY,
			workflow_id  text NOT NULL DEFAULT '',
			length       bigint NOT NULL DEFAULT 0 CHECK (length >= 0),
			fence        bigint NOT NULL DEFAULT 0
		) WITH (fillfactor = 70)`,
		// One row per event. No foreign key to executions: the append
		// statement writes both under the row lock, and a per-row check
		// would cost every insert.
		`CREATE TABLE {s}.events (
			execution_id text COLLATE "C" NOT NULL,
			sequence     bigint NOT NULL,
			id           text NOT NULL,
			workflow_id  text NOT NULL,
			event_type   text NOT NULL,
			timestamp_ms bigint NOT NULL,
			payload      text NOT NULL,
			metadata     text,
			PRIMARY KEY (execution_id, sequence)
		)`,
	}},
	{2, "snapshots", []string{
		`CREATE TABLE {s}.snapshots (
			execution_id   text COLLATE "C" NOT NULL,
			sequence       bigint NOT NULL,
			schema_version text NOT NULL,
			state          bytea NOT NULL,
			PRIMARY KEY (execution_id, sequence)
		)`,
	}},
	{3, "branch refs", []string{
		`CREATE TABLE {s}.refs (
			name         text COLLATE "C" NOT NULL PRIMARY KEY,
			execution_id text NOT NULL,
			version      bigint NOT NULL
		)`,
	}},
	{4, "timers", []string{
		// One row per durable timer, replaced in place by key; Due reads
		// the (wake_at, key) index in order up to its LIMIT.
		`CREATE TABLE {s}.timers (
			key          text COLLATE "C" NOT NULL PRIMARY KEY,
			execution_id text,
			wake_at      bigint NOT NULL,
			payload      text
		)`,
		`CREATE INDEX timers_due ON {s}.timers (wake_at, key)`,
	}},
	{5, "content", []string{
		// One row per claim-checked blob, keyed by its ref and written
		// once. Blobs are mostly incompressible (already compressed or
		// random), so TOAST stores them out of line without trying.
		`CREATE TABLE {s}.content (
			ref  text COLLATE "C" NOT NULL PRIMARY KEY,
			size bigint NOT NULL,
			data bytea NOT NULL
		)`,
		`ALTER TABLE {s}.content ALTER COLUMN data SET STORAGE EXTERNAL`,
	}},
	{6, "leases", []string{
		// One row per execution ever leased: its holder (NULL once
		// released), its fencing token (kept across a release, so the next
		// grant outranks every earlier one) and its expiry in epoch
		// milliseconds. Heartbeats rewrite only expires_at, which no index
		// covers, so fillfactor leaves room for HOT updates.
		`CREATE TABLE {s}.leases (
			execution_id text COLLATE "C" NOT NULL PRIMARY KEY,
			owner        text,
			token        bigint NOT NULL,
			expires_at   bigint NOT NULL
		) WITH (fillfactor = 70)`,
	}},
}

// migrationLockKey is the pg_advisory_xact_lock key that serializes
// migrations of one schema across every process: a 64-bit hash of its name.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("loom/migrate/" + schema))
	return int64(h.Sum64())
}

// migrate brings schema (quoted as q) up to the last step of list, one
// transaction per pending step. Each transaction first takes the schema's
// advisory lock, then reads the ledger, so two nodes migrating one schema at
// once apply each step exactly once: the second waits, then sees the first's
// rows. The schema and the ledger are created, under the same lock, when
// missing. A ledger above len(list) is refused with *SchemaVersionError.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema, q string, list []migration) error {
	for i, m := range list {
		if m.version != i+1 {
			return fmt.Errorf("postgres: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	for {
		done := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			done, err = applyNext(ctx, tx, schema, q, list)
			return err
		})
		if err != nil || done {
			return err
		}
	}
}

// applyNext applies the first pending step of list, if any, inside tx, and
// reports whether the schema was already current.
func applyNext(ctx context.Context, tx pgx.Tx, schema, q string, list []migration) (done bool, err error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::bigint)`, migrationLockKey(schema)); err != nil {
		return false, fmt.Errorf("postgres: lock migrations of %q: %w", schema, err)
	}
	if err := ensureLedger(ctx, tx, schema, q); err != nil {
		return false, err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+q+`.schema_migrations`).Scan(&current); err != nil {
		return false, fmt.Errorf("postgres: read schema version of %q: %w", schema, err)
	}
	if current > len(list) {
		return false, &SchemaVersionError{Schema: schema, Found: current, Known: len(list)}
	}
	if current == len(list) {
		return true, nil
	}
	m := list[current]
	for _, s := range m.stmts {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(s, "{s}", q)); err != nil {
			return false, fmt.Errorf("postgres: migration %d (%s) of %q: %w", m.version, m.name, schema, err)
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+q+`.schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
	if err != nil {
		return false, fmt.Errorf("postgres: record migration %d of %q: %w", m.version, schema, err)
	}
	return false, nil
}

// ensureLedger creates the schema and its schema_migrations table when
// missing. It looks before it creates, so a role without CREATE on the
// database can use a schema a DBA made for it.
func ensureLedger(ctx context.Context, tx pgx.Tx, schema, q string) error {
	var exists bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`, schema).Scan(&exists)
	if err != nil {
		return fmt.Errorf("postgres: look up schema %q: %w", schema, err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+q); err != nil {
			return fmt.Errorf("postgres: create schema %q: %w", schema, err)
		}
	}
	_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_migrations (
		version    integer NOT NULL PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	if err != nil {
		return fmt.Errorf("postgres: create schema_migrations in %q: %w", schema, err)
	}
	return nil
}
