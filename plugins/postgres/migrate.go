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
	// fill, when set, runs after stmts in the same transaction, with the
	// quoted schema: the part of a step SQL cannot do exactly (see
	// fillCatalog).
	fill func(ctx context.Context, tx pgx.Tx, s string) error
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
	}, nil},
	{2, "snapshots", []string{
		`CREATE TABLE {s}.snapshots (
			execution_id   text COLLATE "C" NOT NULL,
			sequence       bigint NOT NULL,
			schema_version text NOT NULL,
			state          bytea NOT NULL,
			PRIMARY KEY (execution_id, sequence)
		)`,
	}, nil},
	{3, "branch refs", []string{
		`CREATE TABLE {s}.refs (
			name         text COLLATE "C" NOT NULL PRIMARY KEY,
			execution_id text NOT NULL,
			version      bigint NOT NULL
		)`,
	}, nil},
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
	}, nil},
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
	}, nil},
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
	}, nil},
	{7, "status index", []string{
		// One row per execution that is not ended (store.StatusIndex): its
		// status, the sequence and timestamp of the event that set it, and
		// for a continued one its successor. listed is false only for a
		// continued execution whose successor has a log, kept so deleting
		// the successor lists it again. The append statement changes a row
		// only when its batch moves the status; status, sequence and
		// timestamp are in no index, so those updates are HOT.
		`CREATE TABLE {s}.unfinished (
			execution_id      text COLLATE "C" NOT NULL PRIMARY KEY,
			status            text NOT NULL,
			sequence          bigint NOT NULL,
			timestamp_ms      bigint NOT NULL,
			next_execution_id text COLLATE "C",
			listed            boolean NOT NULL
		) WITH (fillfactor = 70)`,
		// ListUnfinished reads the listed rows in id order from here.
		`CREATE INDEX unfinished_listed ON {s}.unfinished (listed, execution_id)`,
		// A log's creation (or deletion) finds the continued rows waiting
		// for it as their successor here.
		`CREATE INDEX unfinished_next ON {s}.unfinished (next_execution_id) WHERE next_execution_id IS NOT NULL`,
		sqlBackfillUnfinished,
	}, nil},
	{8, "start queues", []string{
		// One row per queue, inserted with its first item: Claim locks it
		// FOR UPDATE, which serializes the claims of the queue across every
		// node, so each checks the limits against the claims before it.
		`CREATE TABLE {s}.queues (
			queue text COLLATE "C" NOT NULL PRIMARY KEY
		)`,
		// One row per (queue, execution id) ever enqueued, kept when done
		// (the idempotency key). A claimed row holds its owner and expiry;
		// one whose expires_at has passed is ready again. token and attempt
		// grow with every claim and survive a release.
		`CREATE TABLE {s}.queue_items (
			queue         text COLLATE "C" NOT NULL,
			execution_id  text COLLATE "C" NOT NULL,
			flow_id       text NOT NULL,
			input         bytea,
			tenant        text COLLATE "C" NOT NULL,
			priority      bigint NOT NULL,
			partition_key text COLLATE "C" NOT NULL,
			enqueued_at   bigint NOT NULL,
			meta          bytea,
			state         text NOT NULL CHECK (state IN ('ready', 'claimed', 'done')),
			owner         text,
			token         bigint NOT NULL DEFAULT 0,
			attempt       bigint NOT NULL DEFAULT 0,
			claimed_at    bigint,
			expires_at    bigint,
			PRIMARY KEY (queue, execution_id),
			CHECK (state <> 'claimed' OR (owner IS NOT NULL AND expires_at IS NOT NULL))
		)`,
		// Claim reads the ready items in claim order here, of any tenant or
		// of one; ReadyTenants walks the second.
		`CREATE INDEX queue_items_ready ON {s}.queue_items (queue, priority DESC, enqueued_at, execution_id)
			WHERE state <> 'done'`,
		`CREATE INDEX queue_items_tenant ON {s}.queue_items (queue, tenant, priority DESC, enqueued_at, execution_id)
			WHERE state <> 'done'`,
		// Claim counts the live claims (of the queue, an owner, a
		// partition) here.
		`CREATE INDEX queue_items_claimed ON {s}.queue_items (queue, expires_at) WHERE state = 'claimed'`,
		// The claim times a Rate is checked against: claims per queue and
		// millisecond, pruned to the newest Rate claims.
		`CREATE TABLE {s}.queue_claims (
			queue      text COLLATE "C" NOT NULL,
			claimed_at bigint NOT NULL,
			claims     bigint NOT NULL CHECK (claims > 0),
			PRIMARY KEY (queue, claimed_at)
		)`,
	}, nil},
	{9, "timer claims", []string{
		// The claim of TimerStore.ClaimDue: its owner and expiry, NULL when
		// unclaimed. Put clears both; a claim past its expiry is free.
		`ALTER TABLE {s}.timers ADD COLUMN claim_owner text, ADD COLUMN claim_expires_at bigint`,
	}, nil},
	{10, "log compaction", []string{
		// A log's trim point (store.PrefixTrimmer): its events 1..trimmed
		// were removed. Only TrimThrough and CopyPrefix write it (appends
		// never do), under the row lock; a deleted log's row goes back to
		// 0. A constant default: adding it rewrites no row.
		`ALTER TABLE {s}.executions ADD COLUMN trimmed bigint NOT NULL DEFAULT 0 CHECK (trimmed >= 0)`,
		// The events compaction moved out of the logs (store.ArchiveStore):
		// the events table's columns, one row per (execution, sequence),
		// written once and never replaced.
		`CREATE TABLE {s}.archive (
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
	}, nil},
	{11, "read models", []string{
		// One row per read-model row (store.ReadModelStore), keyed by
		// (kind, id): the projection that owns it, its version, its
		// indexed fields as a JSON object with sorted keys (what Reset
		// and an update read to find its index entries; text, like
		// payloads) and its document as written.
		`CREATE TABLE {s}.read_models (
			kind       text COLLATE "C" NOT NULL,
			id         text COLLATE "C" NOT NULL,
			projection text COLLATE "C" NOT NULL,
			version    bigint NOT NULL CHECK (version > 0),
			fields     text NOT NULL,
			doc        text NOT NULL,
			PRIMARY KEY (kind, id)
		)`,
		// Reset finds a projection's rows here.
		`CREATE INDEX read_models_projection ON {s}.read_models (projection, kind, id)`,
		// The equality index of Query: one entry per (kind, field name,
		// value, id), so the rows of a kind holding a pair are one range
		// of the key, in id order, from any cursor.
		`CREATE TABLE {s}.read_model_fields (
			kind  text COLLATE "C" NOT NULL,
			name  text COLLATE "C" NOT NULL,
			value text COLLATE "C" NOT NULL,
			id    text COLLATE "C" NOT NULL,
			PRIMARY KEY (kind, name, value, id)
		)`,
		// How far each projection has folded each source: Apply moves a
		// row by compare-and-set under its row lock, Reset deletes the
		// projection's rows. Rewritten by every Apply and in no other
		// index, so fillfactor leaves room for HOT updates.
		`CREATE TABLE {s}.read_model_watermarks (
			projection text COLLATE "C" NOT NULL,
			source     text COLLATE "C" NOT NULL,
			sequence   bigint NOT NULL CHECK (sequence >= 0),
			PRIMARY KEY (projection, source)
		) WITH (fillfactor = 70)`,
	}, nil},
	{12, "execution catalog", []string{
		// One row per log that is not an inbox stream
		// (store.ExecutionCatalog): its flow, tenant, status and the
		// timestamps of its first event and of the event that set the
		// status. A table of its own, not columns of executions: that row
		// is rewritten by every append (HOT, as no index covers what
		// changes) and outlives its log for the fence, so indexes on it
		// would cost every append. The append statement writes a row with
		// a log's first batch and then only when its batch moves the
		// status; started_at and execution_id, the search order's keys,
		// never change.
		`CREATE TABLE {s}.catalog (
			execution_id text COLLATE "C" NOT NULL PRIMARY KEY,
			workflow_id  text COLLATE "C" NOT NULL,
			tenant       text COLLATE "C" NOT NULL,
			status       text NOT NULL,
			started_at   bigint NOT NULL,
			status_at    bigint NOT NULL
		)`,
		// A search walks one of these in its order from the cursor and
		// stops at its LIMIT: the unfiltered one, or the one of a filter.
		`CREATE INDEX catalog_started ON {s}.catalog (started_at DESC, execution_id)`,
		`CREATE INDEX catalog_workflow ON {s}.catalog (workflow_id, started_at DESC, execution_id)`,
		`CREATE INDEX catalog_status ON {s}.catalog (status, started_at DESC, execution_id)`,
		`CREATE INDEX catalog_tenant ON {s}.catalog (tenant, started_at DESC, execution_id)`,
		sqlBackfillCatalog,
	}, fillCatalog},
}

// sqlBackfillUnfinished fills the unfinished table of a schema written
// before it existed, in SQL, from each log's last status-moving event (a
// backward scan of the events key per log, stopping at the first), by
// store.EventStatus's rule: STARTED and RESUMED set running, SUSPENDED
// suspended, COMPLETED, FAILED and CANCELLED end the execution, a
// kernel-stamped CONTINUED (metadata kernel: true) sets continued to its
// payload's nextExecutionId, or ends it when it names none; a log with none
// of them is running at its first event, and inbox streams are left out.
//
// Payloads and metadata are text, parsed here as json only for CONTINUED
// rows and only when they hold no \u0000 or surrogate escape, the JSON
// PostgreSQL refuses to de-escape (an ERROR would fail the migration). A
// CONTINUED it does not parse may or may not end the execution, so it is
// taken as continued to an unknown successor (next_execution_id NULL,
// listed): the index may list too much, never too little.
const sqlBackfillUnfinished = `INSERT INTO {s}.unfinished (execution_id, status, sequence, timestamp_ms, next_execution_id, listed)
	SELECT b.execution_id, b.status, b.sequence, b.timestamp_ms, b.next,
		b.next IS NULL OR NOT EXISTS (SELECT 1 FROM {s}.executions n WHERE n.execution_id = b.next AND n.length > 0)
	FROM (
		SELECT x.execution_id, l.sequence, l.timestamp_ms, l.next,
			CASE
				WHEN l.pending OR l.event_type IN ('EXECUTION_STARTED', 'EXECUTION_RESUMED') THEN 'running'
				WHEN l.event_type = 'EXECUTION_SUSPENDED' THEN 'suspended'
				WHEN l.event_type = 'EXECUTION_CONTINUED' AND (l.next IS NULL OR l.next <> '') THEN 'continued'
			END AS status
		FROM {s}.executions x
		CROSS JOIN LATERAL (
			SELECT c.sequence, c.timestamp_ms, c.event_type, c.pending,
				CASE
					WHEN c.pending OR c.event_type <> 'EXECUTION_CONTINUED' THEN NULL
					WHEN c.metadata ~ '\\u(0000|[dD][89abAB])' OR c.payload ~ '\\u(0000|[dD][89abAB])' THEN NULL
					WHEN json_typeof(c.payload::json -> 'nextExecutionId') = 'string' THEN c.payload::json ->> 'nextExecutionId'
					ELSE ''
				END AS next
			FROM (
				(SELECT e.sequence, e.timestamp_ms, e.event_type, e.payload, e.metadata, false AS pending
				FROM {s}.events e
				WHERE e.execution_id = x.execution_id AND (
					e.event_type IN ('EXECUTION_STARTED', 'EXECUTION_SUSPENDED', 'EXECUTION_RESUMED',
						'EXECUTION_COMPLETED', 'EXECUTION_FAILED', 'EXECUTION_CANCELLED')
					OR e.event_type = 'EXECUTION_CONTINUED' AND CASE
						WHEN e.metadata IS NULL THEN false
						WHEN e.metadata ~ '\\u(0000|[dD][89abAB])' THEN true
						ELSE (e.metadata::json -> 'kernel')::text = 'true'
					END)
				ORDER BY e.sequence DESC LIMIT 1)
				UNION ALL
				(SELECT e.sequence, e.timestamp_ms, e.event_type, e.payload, e.metadata, true
				FROM {s}.events e WHERE e.execution_id = x.execution_id AND e.sequence = 0)
			) c
			ORDER BY c.pending LIMIT 1
		) l
		WHERE x.length > 0 AND left(x.execution_id, 15) <> '__loom_inbox__:'
	) b
	WHERE b.status IS NOT NULL`

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
	if m.fill != nil {
		if err := m.fill(ctx, tx, q); err != nil {
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
