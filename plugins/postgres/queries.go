package postgres

import (
	"strings"

	"github.com/loom-kernel/loom/event"
)

// queries holds every statement of a DB with its schema filled in, built
// once at Open. pgx prepares and caches each on every pooled connection.
type queries struct {
	// The conditional append (see appendSQL), for a log's first batch and
	// a later one, by what the batch does to the status index and to the
	// catalog.
	appendFirst, appendNext [indexOps][catalogOps]string
	appendState             string // length and fence of refused appends
	eventsFrom              string
	eventsRange             string
	listExecutions          string
	logLength               string
	copyPrefixSource        string
	copyPrefixClaim         string
	copyPrefixEvents        string
	notify                  string
	deleteLog               string
	deleteEvents            string
	acquireFence            string

	trimLock, trimEvents, trimMark, trimPoint string
	archiveInsert, archiveHeld, archiveRange  string

	// schema is the quoted schema, for the catalog's searches and
	// counts, built per query shape (catalogSearchSQL).
	schema                          string
	putEntry, dropEntry, firstEvent string

	listUnfinished, lastStatusEvent, firstTimestamp string
	setUnfinished, setContinued, endUnfinished      string
	handOver, takeAgain                             string

	snapshotSave, snapshotLatest, snapshotAt, snapshotSeqs, snapshotPrune, snapshotDelete string

	refCreate, refLock, refMove, refRead, refList string

	timerPut, timerGet, timerDue, timerDelete, timerClaimDue string

	contentHas, contentPut, contentGet, contentDelete string

	leaseAcquire, leaseHolder, leaseRenew, leaseRelease, leaseGet string

	rm readModelQueries
}

// eventCols are the columns scanEvents reads, in its order.
const eventCols = `sequence, id, workflow_id, event_type, timestamp_ms, payload, metadata`

// timerCols are the columns scanTimer reads, in its order.
const timerCols = `key, execution_id, wake_at, payload`

// appendSQL is the conditional append: ONE statement that claims the
// execution's row under the expected-length and fence conditions, inserts
// the events only if the claim succeeded, changes the status index (op)
// and the catalog (cat) as the batch decides, and queues the NOTIFY of the execution id, which
// PostgreSQL delivers when (and only if) the transaction commits. It
// returns one row when the batch was written and none when it was refused;
// a refusal is not an error, so it never aborts the transaction it shares
// with other batches, and changes nothing: every other part of the
// statement reads the claim.
//
// claim is the head that differs: the first batch of a log inserts the row
// (or revives a deleted log's row at length 0, which keeps its fence); a
// later batch updates it. Either way the row is locked by the write, so
// concurrent appenders on one execution, in any process, are serialized,
// and a loser re-checks the condition against the winner's committed row
// (READ COMMITTED re-evaluates the WHERE after the lock wait) and is refused.
// The first batch of an indexed log also hands over the continued
// executions waiting for it as their successor (handOverCTE), and the
// catalog part (catalogCTE) records or moves the execution's entry.
//
// Parameters: $1 execution id, $2 workflow id (first non-empty of the
// batch), $3 expected, $4 event count, $5 fence token (MaxInt64 when
// unfenced), $6–$12 the event columns as arrays, $13 the NOTIFY channel,
// then op's own (indexCTE), then cat's (catalogCTE).
func appendSQL(s, claim string, op indexOp, cat catalogOp, handOver bool) string {
	sql := `WITH claim AS (` + claim + `
	), ins AS (
		INSERT INTO ` + s + `.events (execution_id, ` + eventCols + `)
		SELECT c.execution_id, u.sequence, u.id, u.workflow_id, u.event_type, u.ts, u.payload, u.metadata
		FROM claim c CROSS JOIN unnest($6::bigint[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[])
			AS u(sequence, id, workflow_id, event_type, ts, payload, metadata)
	)` + indexCTE(s, op) + catalogCTE(s, cat, 14+op.params())
	if handOver {
		sql += handOverCTE(s)
	}
	return sql + `
	SELECT pg_notify($13::text, c.execution_id) FROM claim c`
}

// indexOp is what an append does to the status index.
type indexOp int

const (
	indexKeep      indexOp = iota // no status-moving event, or an inbox stream
	indexSet                      // $14 status, $15 sequence, $16 timestamp
	indexContinued                // $14 sequence, $15 timestamp, $16 successor
	indexEnd                      // no parameter
	indexOps
)

// params is the number of parameters op's part of the statement takes.
func (op indexOp) params() int {
	if op == indexSet || op == indexContinued {
		return 3
	}
	return 0
}

// indexCTE is the part of the append that changes the status index, for
// the claimed execution only.
func indexCTE(s string, op indexOp) string {
	upsert := func(values string) string {
		return `, idx AS (
		INSERT INTO ` + s + `.unfinished AS f (execution_id, status, sequence, timestamp_ms, next_execution_id, listed)
		SELECT c.execution_id, ` + values + ` FROM claim c
		ON CONFLICT (execution_id) DO UPDATE SET status = EXCLUDED.status, sequence = EXCLUDED.sequence,
			timestamp_ms = EXCLUDED.timestamp_ms, next_execution_id = EXCLUDED.next_execution_id, listed = EXCLUDED.listed
	)`
	}
	switch op {
	case indexSet:
		return upsert(`$14::text, $15::bigint, $16::bigint, NULL, true`)
	case indexContinued:
		// Listed iff the successor has no log yet (successorEmpty).
		return upsert(`'continued', $14::bigint, $15::bigint, $16::text, ` + successorEmpty(s, "$16::text"))
	case indexEnd:
		return `, idx AS (
		DELETE FROM ` + s + `.unfinished f USING claim c WHERE f.execution_id = c.execution_id
	)`
	}
	return ""
}

// successorEmpty is true iff the execution next has no log. It share-locks
// next's row, so a DeleteExecution of next in flight commits first (and is
// seen: the row is re-read) or waits for this write (and then lists this
// execution again): a race between the two can never leave a continued
// execution unlisted with its successor gone.
func successorEmpty(s, next string) string {
	return `NOT EXISTS (SELECT 1 FROM ` + s + `.executions n WHERE n.execution_id = ` + next + ` AND n.length > 0 FOR SHARE)`
}

// handOverCTE unlists the continued executions waiting for the claimed log
// as their successor: it has events now.
func handOverCTE(s string) string {
	return `, handover AS (
		UPDATE ` + s + `.unfinished f SET listed = false FROM claim c
		WHERE f.next_execution_id = c.execution_id AND f.listed AND f.execution_id <> c.execution_id
	)`
}

// claimFirstSQL claims a log expected to be empty: insert its row, or
// take an existing row only at length 0 and under the fence.
func claimFirstSQL(s string) string {
	return `INSERT INTO ` + s + `.executions AS x (execution_id, workflow_id, length, fence)
		VALUES ($1::text, $2::text, $3::bigint + $4::bigint, 0)
		ON CONFLICT (execution_id) DO UPDATE
			SET length = EXCLUDED.length, workflow_id = EXCLUDED.workflow_id
			WHERE x.length = $3::bigint AND x.fence <= $5::bigint
		RETURNING x.execution_id`
}

// claimNextSQL claims a log at exactly the expected length, under the fence.
func claimNextSQL(s string) string {
	return `UPDATE ` + s + `.executions AS x
		SET length = x.length + $4::bigint,
			workflow_id = CASE WHEN x.workflow_id = '' THEN $2::text ELSE x.workflow_id END
		WHERE x.execution_id = $1::text AND x.length = $3::bigint AND x.fence <= $5::bigint
		RETURNING x.execution_id`
}

// lastStatusEventSQL is the last event of a log ($1), at or before a
// sequence ($2), of one of the types $3: one backward seek on the events
// key, stopping at the first such row.
func lastStatusEventSQL(s string) string {
	return `SELECT sequence, event_type, timestamp_ms, payload, metadata FROM ` + s + `.events
			WHERE execution_id = $1 AND sequence <= $2 AND event_type = ANY($3::text[])
			ORDER BY sequence DESC LIMIT 1`
}

// appendVariants is the append statement with the head claim for every
// index and catalog part. Only a first batch hands over, and only when it
// is indexed (inbox streams are not).
func appendVariants(s, claim string, first bool) (out [indexOps][catalogOps]string) {
	for op := range indexOps {
		for cat := range catalogOps {
			out[op][cat] = appendSQL(s, claim, op, cat, first && op != indexKeep)
		}
	}
	return out
}

// buildQueries fills the schema s (already quoted) into every statement.
func buildQueries(s string) queries {
	putEntry, dropEntry, firstEvent := catalogQueries(s)
	return queries{
		schema:   s,
		putEntry: putEntry, dropEntry: dropEntry, firstEvent: firstEvent,

		appendFirst: appendVariants(s, claimFirstSQL(s), true),
		appendNext:  appendVariants(s, claimNextSQL(s), false),
		appendState: `SELECT execution_id, length, fence FROM ` + s + `.executions WHERE execution_id = ANY($1::text[])`,
		eventsFrom: `SELECT ` + eventCols + ` FROM ` + s + `.events
			WHERE execution_id = $1 AND sequence >= $2 ORDER BY sequence`,
		eventsRange: `SELECT ` + eventCols + ` FROM ` + s + `.events
			WHERE execution_id = $1 AND sequence >= $2 AND sequence < $3 ORDER BY sequence`,
		listExecutions: `SELECT execution_id, workflow_id, length FROM ` + s + `.executions
			WHERE execution_id > $1 AND length > 0 ORDER BY execution_id LIMIT $2`,
		logLength:        `SELECT length FROM ` + s + `.executions WHERE execution_id = $1`,
		copyPrefixSource: `SELECT length, workflow_id, trimmed FROM ` + s + `.executions WHERE execution_id = $1 FOR SHARE`,
		copyPrefixClaim: `INSERT INTO ` + s + `.executions AS x (execution_id, workflow_id, length, fence, trimmed)
			VALUES ($1::text, $2::text, $3::bigint, 0, $4::bigint)
			ON CONFLICT (execution_id) DO UPDATE SET length = EXCLUDED.length, workflow_id = EXCLUDED.workflow_id,
				trimmed = EXCLUDED.trimmed
				WHERE x.length = 0
			RETURNING x.execution_id`,
		copyPrefixEvents: `INSERT INTO ` + s + `.events (execution_id, ` + eventCols + `)
			SELECT $1::text, ` + eventCols + ` FROM ` + s + `.events WHERE execution_id = $2 AND sequence <= $3`,
		notify: `SELECT pg_notify($1::text, $2::text)`,

		// The workflow id is a correlated subquery, not a LEFT JOIN: the
		// planner made the join a merge join scanning executions_pkey from
		// its start, so a page cost its depth (docs/benchmarks.md).
		listUnfinished: `SELECT f.execution_id,
				COALESCE((SELECT x.workflow_id FROM ` + s + `.executions x WHERE x.execution_id = f.execution_id), ''),
				f.status, f.sequence, f.timestamp_ms, COALESCE(f.next_execution_id, '')
			FROM ` + s + `.unfinished f
			WHERE f.listed AND f.execution_id > $1
				AND (f.status <> 'continued' OR NOT EXISTS (SELECT 1 FROM ` + s + `.executions n
					WHERE n.execution_id = f.next_execution_id AND n.length > 0))
			ORDER BY f.execution_id LIMIT $2`,
		lastStatusEvent: lastStatusEventSQL(s),
		firstTimestamp:  `SELECT timestamp_ms FROM ` + s + `.events WHERE execution_id = $1 AND sequence = 0`,
		setUnfinished: `INSERT INTO ` + s + `.unfinished AS f (execution_id, status, sequence, timestamp_ms, next_execution_id, listed)
			VALUES ($1, $2, $3, $4, NULL, true)
			ON CONFLICT (execution_id) DO UPDATE SET status = EXCLUDED.status, sequence = EXCLUDED.sequence,
				timestamp_ms = EXCLUDED.timestamp_ms, next_execution_id = NULL, listed = true`,
		setContinued: `INSERT INTO ` + s + `.unfinished AS f (execution_id, status, sequence, timestamp_ms, next_execution_id, listed)
			VALUES ($1, 'continued', $2, $3, $4::text, ` + successorEmpty(s, "$4::text") + `)
			ON CONFLICT (execution_id) DO UPDATE SET status = EXCLUDED.status, sequence = EXCLUDED.sequence,
				timestamp_ms = EXCLUDED.timestamp_ms, next_execution_id = EXCLUDED.next_execution_id, listed = EXCLUDED.listed`,
		endUnfinished: `DELETE FROM ` + s + `.unfinished WHERE execution_id = $1`,
		handOver: `UPDATE ` + s + `.unfinished SET listed = false
			WHERE next_execution_id = $1 AND listed AND execution_id <> $1`,
		takeAgain: `UPDATE ` + s + `.unfinished SET listed = true WHERE next_execution_id = $1 AND NOT listed`,
		// The row first: its lock waits for an append in flight, so the
		// DELETE's snapshot, taken after, sees that append's events too.
		deleteLog:    `UPDATE ` + s + `.executions SET length = 0, workflow_id = '', trimmed = 0 WHERE execution_id = $1`,
		deleteEvents: `DELETE FROM ` + s + `.events WHERE execution_id = $1`,
		acquireFence: `INSERT INTO ` + s + `.executions AS x (execution_id, fence) VALUES ($1, 1)
			ON CONFLICT (execution_id) DO UPDATE SET fence = x.fence + 1 RETURNING x.fence`,

		// The row first, locked: an append in flight on the log commits
		// before the trim reads the length, or waits for the trim to end.
		trimLock:   `SELECT length, trimmed FROM ` + s + `.executions WHERE execution_id = $1 FOR UPDATE`,
		trimEvents: `DELETE FROM ` + s + `.events WHERE execution_id = $1 AND sequence > $2 AND sequence <= $3`,
		trimMark:   `UPDATE ` + s + `.executions SET trimmed = $2 WHERE execution_id = $1`,
		trimPoint:  `SELECT CASE WHEN length > 0 THEN trimmed ELSE 0 END FROM ` + s + `.executions WHERE execution_id = $1`,
		// $1 execution id, $2–$8 the event columns as arrays, in sequence order.
		archiveInsert: `INSERT INTO ` + s + `.archive (execution_id, ` + eventCols + `)
			SELECT $1::text, u.sequence, u.id, u.workflow_id, u.event_type, u.ts, u.payload, u.metadata
			FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[])
				AS u(sequence, id, workflow_id, event_type, ts, payload, metadata)
			ON CONFLICT (execution_id, sequence) DO NOTHING`,
		archiveHeld: `SELECT ` + eventCols + ` FROM ` + s + `.archive
			WHERE execution_id = $1 AND sequence >= $2 AND sequence <= $3 ORDER BY sequence`,
		archiveRange: `SELECT ` + eventCols + ` FROM ` + s + `.archive
			WHERE execution_id = $1 AND sequence >= $2 AND sequence < $3 ORDER BY sequence`,

		snapshotSave: `INSERT INTO ` + s + `.snapshots (execution_id, sequence, schema_version, state) VALUES ($1, $2, $3, $4)
			ON CONFLICT (execution_id, sequence) DO UPDATE SET schema_version = EXCLUDED.schema_version, state = EXCLUDED.state`,
		snapshotLatest: `SELECT sequence, schema_version, state FROM ` + s + `.snapshots
			WHERE execution_id = $1 ORDER BY sequence DESC LIMIT 1`,
		snapshotAt: `SELECT sequence, schema_version, state FROM ` + s + `.snapshots
			WHERE execution_id = $1 AND sequence <= $2 ORDER BY sequence DESC LIMIT 1`,
		snapshotSeqs:   `SELECT sequence FROM ` + s + `.snapshots WHERE execution_id = $1 ORDER BY sequence`,
		snapshotPrune:  `DELETE FROM ` + s + `.snapshots WHERE execution_id = $1 AND sequence < $2`,
		snapshotDelete: `DELETE FROM ` + s + `.snapshots WHERE execution_id = $1`,

		refCreate: `INSERT INTO ` + s + `.refs (name, execution_id, version) VALUES ($1, $2, 1) ON CONFLICT (name) DO NOTHING`,
		refLock:   `SELECT version FROM ` + s + `.refs WHERE name = $1 FOR UPDATE`,
		refMove:   `UPDATE ` + s + `.refs SET execution_id = $2, version = $3 WHERE name = $1`,
		refRead:   `SELECT execution_id, version FROM ` + s + `.refs WHERE name = $1`,
		// name >= $1 walks the primary key from the prefix; left() keeps
		// exactly the names that start with it (a byte comparison under "C").
		refList: `SELECT name, execution_id, version FROM ` + s + `.refs
			WHERE name >= $1::text AND left(name, char_length($1::text)) = $1::text ORDER BY name`,

		timerPut: `INSERT INTO ` + s + `.timers (` + timerCols + `) VALUES ($1, $2, $3, $4)
			ON CONFLICT (key) DO UPDATE SET execution_id = EXCLUDED.execution_id,
				wake_at = EXCLUDED.wake_at, payload = EXCLUDED.payload, claim_owner = NULL, claim_expires_at = NULL`,
		timerGet:    `SELECT ` + timerCols + ` FROM ` + s + `.timers WHERE key = $1`,
		timerDue:    `SELECT ` + timerCols + ` FROM ` + s + `.timers WHERE wake_at <= $1 ORDER BY wake_at, key LIMIT $2`,
		timerDelete: `DELETE FROM ` + s + `.timers WHERE key = $1 AND wake_at = $2`,
		// The due timers nobody holds a live claim on, in Due's order,
		// locked or skipped (another node is claiming them), then claimed
		// for $2 until $3. READ COMMITTED re-checks the condition on a row
		// changed since the statement's snapshot before it locks it, so a
		// timer another node claimed meanwhile is left out. Arguments: $1
		// now, $4 limit.
		timerClaimDue: `UPDATE ` + s + `.timers t SET claim_owner = $2, claim_expires_at = $3
			FROM (SELECT key FROM ` + s + `.timers
				WHERE wake_at <= $1 AND (claim_expires_at IS NULL OR claim_expires_at <= $1)
				ORDER BY wake_at, key LIMIT $4 FOR UPDATE SKIP LOCKED) d
			WHERE t.key = d.key
			RETURNING t.key, t.execution_id, t.wake_at, t.payload`,

		contentHas:    `SELECT EXISTS (SELECT 1 FROM ` + s + `.content WHERE ref = $1)`,
		contentPut:    `INSERT INTO ` + s + `.content (ref, size, data) VALUES ($1, $2, $3) ON CONFLICT (ref) DO NOTHING`,
		contentGet:    `SELECT size, data FROM ` + s + `.content WHERE ref = $1`,
		contentDelete: `DELETE FROM ` + s + `.content WHERE ref = $1`,

		// The grant in one statement: a new execution inserts token 1; a row
		// that is free (released), expired at now or already the owner's is
		// taken with its token plus one. A row held live by another owner
		// fails the WHERE: nothing changes and no row is returned, but the
		// row is locked until the transaction ends (ON CONFLICT DO UPDATE
		// locks every conflicting row), so leaseHolder, run next in the same
		// transaction, reads the very lease that refused it. Arguments:
		// execution id, owner, expiry, now.
		leaseAcquire: `INSERT INTO ` + s + `.leases AS l (execution_id, owner, token, expires_at) VALUES ($1, $2, 1, $3)
			ON CONFLICT (execution_id) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1,
				expires_at = EXCLUDED.expires_at
			WHERE l.owner IS NULL OR l.owner = EXCLUDED.owner OR l.expires_at <= $4::bigint
			RETURNING l.token`,
		leaseHolder: `SELECT owner, expires_at FROM ` + s + `.leases WHERE execution_id = $1`,
		// Renew and Release change the row iff the lease is still the
		// caller's (owner and token); 0 rows means it was lost.
		leaseRenew:   `UPDATE ` + s + `.leases SET expires_at = $1 WHERE execution_id = $2 AND owner = $3 AND token = $4`,
		leaseRelease: `UPDATE ` + s + `.leases SET owner = NULL WHERE execution_id = $1 AND owner = $2 AND token = $3`,
		// A released row has no owner: Get finds nothing.
		leaseGet: `SELECT owner, token, expires_at FROM ` + s + `.leases WHERE execution_id = $1 AND owner IS NOT NULL`,

		rm: buildReadModelQueries(s),
	}
}

// notifyChannel is the NOTIFY channel of a schema's appends: "loom:" and
// the schema name, or a digest of it when that would pass PostgreSQL's
// 63-byte identifier limit. A collision between two schemas costs only
// spurious wake-ups: a woken subscriber re-reads its log and finds nothing.
func notifyChannel(schema string) string {
	name := "loom:" + schema
	if len(name) <= maxIdentifierBytes {
		return name
	}
	sum := event.SHA256([]byte(schema))
	return "loom:" + strings.TrimPrefix(sum, "sha256:")[:32]
}
