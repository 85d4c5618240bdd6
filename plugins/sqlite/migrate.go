package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrSchemaTooNew matches *SchemaVersionError with errors.Is.
var ErrSchemaTooNew = errors.New("sqlite: database schema is newer than this code")

// SchemaVersionError reports a database file whose schema_migrations table
// records a version (Found) above the newest migration this code knows
// (Known): it was written by a newer release. Open refuses it rather than
// write into a schema it does not understand; nothing was changed.
type SchemaVersionError struct {
	Found int
	Known int
}

func (e *SchemaVersionError) Error() string {
	return "sqlite: database schema version " + strconv.Itoa(e.Found) +
		" is newer than the newest this code knows (" + strconv.Itoa(e.Known) + ")"
}

// Is makes errors.Is(err, ErrSchemaTooNew) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaTooNew }

// migration is one step of the schema. Versions are 1, 2, 3… in list order;
// a step is applied once, in its own transaction, with the row that records
// it, so a crash leaves it either wholly applied or not at all.
type migration struct {
	version int
	name    string
	stmts   []string
	// fill, when set, runs after stmts in the same transaction: the part
	// of a step SQL cannot do exactly (see fillCatalog).
	fill func(ctx context.Context, c *sql.Conn) error
}

// schemaMigrations is the schema, oldest first. Never edit a released step:
// append a new one.
var schemaMigrations = []migration{
	{1, "event log", []string{
		// One row per event; payload and metadata are the appended bytes.
		// A rowid table: rows go to its last page in commit order, and only
		// the small primary-key index is touched once per log per commit.
		// (Clustering rows by execution, WITHOUT ROWID, dirties one large
		// leaf per log per commit and measured slower under concurrency.)
		`CREATE TABLE events (
			execution_id TEXT NOT NULL,
			sequence     INTEGER NOT NULL,
			id           TEXT NOT NULL,
			workflow_id  TEXT NOT NULL,
			event_type   TEXT NOT NULL,
			timestamp    INTEGER NOT NULL,
			payload      TEXT NOT NULL,
			metadata     TEXT,
			PRIMARY KEY (execution_id, sequence)
		)`,
		// One row per non-empty log, written once when the log is created,
		// for the listing in BINARY (code-point) order. A log's length is
		// MAX(sequence)+1 on the events key, one seek: keeping it here too
		// would dirty one more page on every commit.
		`CREATE TABLE executions (
			execution_id TEXT NOT NULL PRIMARY KEY,
			workflow_id  TEXT NOT NULL
		) WITHOUT ROWID`,
		// Fencing tokens survive DeleteExecution so they only ever grow.
		`CREATE TABLE fences (
			execution_id TEXT NOT NULL PRIMARY KEY,
			token        INTEGER NOT NULL
		) WITHOUT ROWID`,
	}, nil},
	{2, "snapshots", []string{
		// A rowid table: states can be large, which WITHOUT ROWID handles badly.
		`CREATE TABLE snapshots (
			execution_id   TEXT NOT NULL,
			sequence       INTEGER NOT NULL,
			schema_version TEXT NOT NULL,
			state          BLOB,
			PRIMARY KEY (execution_id, sequence)
		)`,
	}, nil},
	{3, "branch refs", []string{
		`CREATE TABLE refs (
			name         TEXT NOT NULL PRIMARY KEY,
			execution_id TEXT NOT NULL,
			version      INTEGER NOT NULL
		) WITHOUT ROWID`,
	}, nil},
	{4, "timers", []string{
		// One row per durable timer, replaced in place by key. A rowid
		// table, like snapshots: payloads are caller-sized. Due reads the
		// (wake_at, key) index in order and stops at its LIMIT, so a page
		// costs its own length, never a sort of every timer.
		`CREATE TABLE timers (
			key          TEXT NOT NULL PRIMARY KEY,
			execution_id TEXT,
			wake_at      INTEGER NOT NULL,
			payload      TEXT
		)`,
		`CREATE INDEX timers_due ON timers (wake_at, key)`,
	}, nil},
	{5, "content", []string{
		// One row per claim-checked blob, keyed by its ref (the SHA-256 of
		// data) and written once: Put is INSERT OR IGNORE. size is
		// len(data), which Get checks along with the digest. A rowid table,
		// like snapshots: blobs are large, which WITHOUT ROWID handles badly.
		`CREATE TABLE content (
			ref  TEXT NOT NULL PRIMARY KEY,
			size INTEGER NOT NULL,
			data BLOB NOT NULL
		)`,
	}, nil},
	{6, "leases", []string{
		// One row per execution ever leased. A released lease keeps its row
		// with a NULL owner, so its token survives and the next grant still
		// outranks it (like fences). Rows are small and read by key.
		`CREATE TABLE leases (
			execution_id TEXT NOT NULL PRIMARY KEY,
			owner        TEXT,
			token        INTEGER NOT NULL,
			expires_at   INTEGER NOT NULL
		) WITHOUT ROWID`,
	}, nil},
	{7, "status index", []string{
		// One row per execution that is not ended (store.StatusIndex): its
		// status, the sequence and timestamp of the event that set it, and
		// for a continued one its successor. listed is 0 only for a
		// continued execution whose successor has a log, kept so deleting
		// the successor lists it again. Appends change a row only when
		// their batch moves the status, in the same transaction.
		`CREATE TABLE unfinished (
			execution_id      TEXT NOT NULL PRIMARY KEY,
			status            TEXT NOT NULL,
			sequence          INTEGER NOT NULL,
			timestamp         INTEGER NOT NULL,
			next_execution_id TEXT,
			listed            INTEGER NOT NULL
		) WITHOUT ROWID`,
		// ListUnfinished reads the listed rows in id order from here.
		`CREATE INDEX unfinished_listed ON unfinished (listed, execution_id)`,
		// A log's creation (or deletion) finds the continued rows waiting
		// for it as their successor here.
		`CREATE INDEX unfinished_next ON unfinished (next_execution_id) WHERE next_execution_id IS NOT NULL`,
		sqlBackfillUnfinished,
	}, nil},
	{8, "work queues and timer claims", []string{
		// One row per queued start, kept when done: the row is the
		// idempotency record of (queue, execution_id). owner is NULL when
		// the item holds no current claim (never claimed, released or done);
		// a claim is live while owner is set, done is 0 and expires_at is
		// after the time asked. token counts the claims of the item (it is
		// also Claim.Attempt). A rowid table, like snapshots: inputs are
		// caller-sized.
		`CREATE TABLE queue_items (
			queue         TEXT NOT NULL,
			execution_id  TEXT NOT NULL,
			flow_id       TEXT NOT NULL,
			input         TEXT,
			tenant        TEXT NOT NULL,
			priority      INTEGER NOT NULL,
			partition_key TEXT NOT NULL,
			enqueued_at   INTEGER NOT NULL,
			meta          TEXT,
			done          INTEGER NOT NULL DEFAULT 0,
			owner         TEXT,
			token         INTEGER NOT NULL DEFAULT 0,
			claimed_at    INTEGER NOT NULL DEFAULT 0,
			expires_at    INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (queue, execution_id)
		)`,
		// Claim walks a queue's undone items in claim order here and stops
		// once it has what it may take.
		`CREATE INDEX queue_items_order ON queue_items (queue, priority DESC, enqueued_at, execution_id) WHERE done = 0`,
		// Claim counts a queue's live claims here.
		`CREATE INDEX queue_items_claims ON queue_items (queue, expires_at) WHERE done = 0 AND owner IS NOT NULL`,
		// The times of the claims made under a Rate limit, pruned to the
		// window by each such claim: Rate counts claims, and an item's row
		// only remembers its last one.
		`CREATE TABLE queue_claims (
			queue      TEXT NOT NULL,
			claimed_at INTEGER NOT NULL
		)`,
		`CREATE INDEX queue_claims_at ON queue_claims (queue, claimed_at)`,
		// ClaimDue's claim of a timer: hidden from ClaimDue while
		// claimed_until is after now. Put resets both.
		`ALTER TABLE timers ADD COLUMN claimed_by TEXT`,
		`ALTER TABLE timers ADD COLUMN claimed_until INTEGER NOT NULL DEFAULT 0`,
	}, nil},
	{9, "log compaction", []string{
		// The events compaction moved out of the logs (store.ArchiveStore):
		// rows of the events table's columns, written once per (execution,
		// sequence) and never replaced. A rowid table, like events.
		`CREATE TABLE archive (
			execution_id TEXT NOT NULL,
			sequence     INTEGER NOT NULL,
			id           TEXT NOT NULL,
			workflow_id  TEXT NOT NULL,
			event_type   TEXT NOT NULL,
			timestamp    INTEGER NOT NULL,
			payload      TEXT NOT NULL,
			metadata     TEXT,
			PRIMARY KEY (execution_id, sequence)
		)`,
		// A log's trim point (store.PrefixTrimmer): its events 1..trimmed
		// were removed. Written only by TrimThrough and CopyPrefix, never by
		// an append, so the row stays written once per log in the common
		// case; it goes with the row when the log is deleted.
		`ALTER TABLE executions ADD COLUMN trimmed INTEGER NOT NULL DEFAULT 0`,
	}, nil},
	{10, "read models", []string{
		// One row per read-model row (store.ReadModelStore), keyed by
		// (kind, id) in BINARY (code-point) order: the projection that
		// owns it, its version, its indexed fields as a JSON object with
		// sorted keys (what Reset and an update read to find its index
		// entries) and its document as written. A rowid table, like
		// snapshots: documents are caller-sized.
		`CREATE TABLE read_models (
			kind       TEXT NOT NULL,
			id         TEXT NOT NULL,
			projection TEXT NOT NULL,
			version    INTEGER NOT NULL,
			fields     TEXT NOT NULL,
			doc        TEXT NOT NULL,
			PRIMARY KEY (kind, id)
		)`,
		// Reset finds a projection's rows here.
		`CREATE INDEX read_models_projection ON read_models (projection)`,
		// The equality index of Query: one entry per (kind, field name,
		// value, id), so the rows of a kind holding a pair are one range
		// of the key, in id order, from any cursor.
		`CREATE TABLE read_model_fields (
			kind  TEXT NOT NULL,
			name  TEXT NOT NULL,
			value TEXT NOT NULL,
			id    TEXT NOT NULL,
			PRIMARY KEY (kind, name, value, id)
		) WITHOUT ROWID`,
		// How far each projection has folded each source; Apply moves a
		// row by compare-and-set, Reset deletes the projection's rows.
		`CREATE TABLE read_model_watermarks (
			projection TEXT NOT NULL,
			source     TEXT NOT NULL,
			sequence   INTEGER NOT NULL,
			PRIMARY KEY (projection, source)
		) WITHOUT ROWID`,
	}, nil},
	{11, "execution catalog", []string{
		// One row per log that is not an inbox stream
		// (store.ExecutionCatalog): its flow, tenant, status and the
		// timestamps of its first event and of the event that set the
		// status. A table of its own, not columns of executions: inbox
		// streams have no row, and the executions row stays the small one
		// ListExecutions pages through. Written by a log's first batch and
		// then only by a batch that moves the status, in the same
		// transaction; started_at and execution_id, the search order's
		// keys, never change.
		`CREATE TABLE catalog (
			execution_id TEXT NOT NULL PRIMARY KEY,
			workflow_id  TEXT NOT NULL,
			tenant       TEXT NOT NULL,
			status       TEXT NOT NULL,
			started_at   INTEGER NOT NULL,
			status_at    INTEGER NOT NULL
		) WITHOUT ROWID`,
		// A search walks one of these in its order from the cursor and
		// stops at its LIMIT: the unfiltered one, or the one of a filter.
		`CREATE INDEX catalog_started ON catalog (started_at DESC, execution_id)`,
		`CREATE INDEX catalog_workflow ON catalog (workflow_id, started_at DESC, execution_id)`,
		`CREATE INDEX catalog_status ON catalog (status, started_at DESC, execution_id)`,
		`CREATE INDEX catalog_tenant ON catalog (tenant, started_at DESC, execution_id)`,
		sqlBackfillCatalog,
	}, fillCatalog},
}

// sqlBackfillUnfinished fills the unfinished table of a file written before
// it existed, in SQL, from each log's last status-moving event (one
// backward seek per log on the events key), by store.EventStatus's rule:
// STARTED and RESUMED set running, SUSPENDED suspended, COMPLETED, FAILED
// and CANCELLED end the execution, a kernel-stamped CONTINUED (metadata
// kernel: true) sets continued to its payload's nextExecutionId, or ends it
// when it names none; a log with none of them is running at its first
// event, and inbox streams are left out. A CONTINUED whose metadata or
// payload SQLite cannot parse (JSON nested past its depth limit) may or may
// not end the execution, so it is taken as continued to an unknown
// successor (next_execution_id NULL, listed): the index may list too much,
// never too little, and the caller's fold decides.
const sqlBackfillUnfinished = `INSERT INTO unfinished (execution_id, status, sequence, timestamp, next_execution_id, listed)
	SELECT id, status, sequence, timestamp, next,
		next IS NULL OR NOT EXISTS (SELECT 1 FROM executions n WHERE n.execution_id = next)
	FROM (
		SELECT id, sequence, timestamp, next,
			CASE
				WHEN last IS NULL OR event_type IN ('EXECUTION_STARTED', 'EXECUTION_RESUMED') THEN 'running'
				WHEN event_type = 'EXECUTION_SUSPENDED' THEN 'suspended'
				WHEN event_type = 'EXECUTION_CONTINUED' AND (next IS NULL OR next <> '') THEN 'continued'
			END AS status
		FROM (
			SELECT l.id, l.last, e.event_type, e.sequence, e.timestamp,
				CASE
					WHEN l.last IS NULL OR e.event_type <> 'EXECUTION_CONTINUED' THEN NULL
					WHEN e.metadata IS NOT NULL AND NOT json_valid(e.metadata) OR NOT json_valid(e.payload) THEN NULL
					WHEN json_type(e.payload, '$.nextExecutionId') = 'text' THEN json_extract(e.payload, '$.nextExecutionId')
					ELSE ''
				END AS next
			FROM (
				SELECT x.execution_id AS id,
					(SELECT e.sequence FROM events e
						WHERE e.execution_id = x.execution_id AND (
							e.event_type IN ('EXECUTION_STARTED', 'EXECUTION_SUSPENDED', 'EXECUTION_RESUMED',
								'EXECUTION_COMPLETED', 'EXECUTION_FAILED', 'EXECUTION_CANCELLED')
							OR e.event_type = 'EXECUTION_CONTINUED' AND CASE
								WHEN e.metadata IS NULL THEN 0
								WHEN json_valid(e.metadata) THEN json_type(e.metadata, '$.kernel') IS 'true'
								ELSE 1
							END)
						ORDER BY e.sequence DESC LIMIT 1) AS last
				FROM executions x
				WHERE substr(x.execution_id, 1, 15) <> '__loom_inbox__:'
			) l
			JOIN events e ON e.execution_id = l.id AND e.sequence = COALESCE(l.last, 0)
		)
	)
	WHERE status IS NOT NULL`

// migrate brings the schema up to the last step of list, one transaction per
// pending step. BEGIN IMMEDIATE takes the write lock before the version is
// read, so two processes opening a new file at once apply each step once.
func migrate(ctx context.Context, c *sql.Conn, list []migration) error {
	for i, m := range list {
		if m.version != i+1 {
			return fmt.Errorf("sqlite: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	const ledger = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	)`
	if _, err := c.ExecContext(ctx, ledger); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", err)
	}
	for {
		done, err := applyNext(ctx, c, list)
		if err != nil || done {
			return err
		}
	}
}

// applyNext applies the first pending step of list, if any, and reports
// whether the schema was already current.
func applyNext(ctx context.Context, c *sql.Conn, list []migration) (done bool, err error) {
	err = inConnTx(ctx, c, func() error {
		var current int
		row := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`)
		if err := row.Scan(&current); err != nil {
			return fmt.Errorf("sqlite: read schema version: %w", err)
		}
		if current > len(list) {
			return &SchemaVersionError{Found: current, Known: len(list)}
		}
		if current == len(list) {
			done = true
			return nil
		}
		m := list[current]
		for _, s := range m.stmts {
			if _, err := c.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("sqlite: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		if m.fill != nil {
			if err := m.fill(ctx, c); err != nil {
				return fmt.Errorf("sqlite: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		_, err := c.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("sqlite: record migration %d: %w", m.version, err)
		}
		return nil
	})
	return done, err
}

// inConnTx runs fn inside BEGIN IMMEDIATE … COMMIT on c, rolling back when
// fn or the commit fails. A failed rollback is reported with the cause.
func inConnTx(ctx context.Context, c *sql.Conn, fn func() error) error {
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	err := fn()
	if err == nil {
		if _, cerr := c.ExecContext(context.Background(), "COMMIT"); cerr == nil {
			return nil
		} else {
			err = fmt.Errorf("sqlite: commit: %w", cerr)
		}
	}
	if _, rerr := c.ExecContext(context.Background(), "ROLLBACK"); rerr != nil {
		return errors.Join(err, fmt.Errorf("sqlite: rollback: %w", rerr))
	}
	return err
}
