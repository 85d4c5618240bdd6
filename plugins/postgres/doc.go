// Package postgres is Loom's network storage: the event log, snapshots,
// branch refs, durable timers, heartbeat leases, claim-checked content,
// start queues, archived events and read models of many nodes in one schema of a PostgreSQL database, through github.com/jackc/pgx/v5,
// with subscriptions woken across processes by LISTEN/NOTIFY
// (github.com/jackc/pgxlisten). Point every node at the same database and
// schema and any of them can read, resume or follow any execution.
//
// # Use
//
// The preset opens everything a runtime needs:
//
//	st, err := postgres.Storage(ctx, postgres.Options{
//		DSN:    "postgres://loom@db.internal:5432/loom", // or Pool: an existing *pgxpool.Pool
//		Schema: "loom",                                   // the default
//	})
//	if err != nil { … }
//	rt, err := loom.New(loom.Config{Storage: st, Flows: flows}) // every store at once
//	…
//	err = errors.Join(rt.Close(), st.Close()) // st.Close commits what is queued, stops LISTEN, closes the pool it opened
//
// Open returns a *DB to take the stores one by one (DB.EventStore,
// DB.SnapshotStore, DB.BranchRegistry, DB.TimerStore, DB.LeaseStore,
// DB.ContentStore, DB.QueueStore, DB.ArchiveStore, DB.ReadModelStore); OpenEventStore and its siblings open a DB for a single
// store that owns it. Every store passes the store/storetest conformance kits against a
// real server and implements every optional capability of its SPI,
// store.Fencer included.
//
// # Pools: owned or borrowed
//
// With Options.DSN the DB opens its own pgxpool (pool_max_conns and every
// other pgxpool.ParseConfig setting may ride in the DSN) and closes it on
// Close. With Options.Pool it borrows the caller's pool and never closes
// it: Close stops the DB's own goroutines and LISTEN connection and
// detaches its stores, and the pool carries on. Appends use up to two
// pooled connections at once (see Group commit), reads one each; the
// LISTEN connection is opened apart from the pool, with the pool's
// connection config, because it is held for the DB's life.
//
// # Schema and migrations
//
// Every table lives in Options.Schema (default "loom"), created when
// missing; the name is always quoted as an identifier, so any name of up
// to 63 bytes works. Tables are created by versioned migrations recorded
// in that schema's schema_migrations table, each applied once, in its own
// transaction, under a pg_advisory_xact_lock keyed by the schema, so nodes
// starting together migrate safely; a schema written by a newer release is
// refused with *SchemaVersionError. Execution ids, ref names and timer
// keys are text COLLATE "C": ordering and ranges compare bytes, which is
// code-point order for UTF-8, so ListExecutions pages with
// WHERE execution_id > $1 ORDER BY execution_id LIMIT $2 exactly like the
// other stores. Payloads and metadata are text, never jsonb: reads return
// the bytes appended (key order, duplicate keys, number text, whitespace).
// The SQL is plain and portable: no triggers, no extensions, no
// database-generated sequences (the journal allocates them); NOTIFY is the
// only PostgreSQL-specific statement on the append path.
//
// # The conditional append
//
// Each execution has a row in the executions table holding its length
// (the next sequence) and its fencing token. An append is ONE statement:
// it claims that row on condition that length = expected and
// fence <= token (UPDATE, or for a new log INSERT … ON CONFLICT … DO UPDATE
// … WHERE), inserts the events only if the claim returned a row, and
// queues a NOTIFY of the execution id. The claim's write takes the row
// lock, so appenders on one execution — in one process or in many — are
// serialized; under READ COMMITTED a waiter re-evaluates the condition
// against the winner's committed row and is refused, and a gap (expected
// beyond the length) fails the same condition as a duplicate. The events'
// primary key (execution_id, sequence) backs it up. A refused append
// writes nothing and returns no row, without an error; its caller gets
// *store.SequenceConflictError or *store.FencedError, judged from the row
// read after the refusal. AcquireFence increments the token on the same
// row, so once it has returned, no append under an older token commits.
//
// The same statement keeps the store.StatusIndex: when the batch moves the
// execution's status, a part of it that reads the claim upserts or deletes
// the execution's row of the unfinished table (migration 7), and a log's
// first batch hands over the continued executions waiting for it as their
// successor; a refused claim changes none of it. A batch of step events
// runs the statement it always did. ListUnfinished reads the
// (listed, execution_id) index, so a recovery pass costs the number of
// unfinished executions, not of all. Migrating a schema from an older
// release fills the table from each log's last status-moving event, in SQL.
//
// It keeps the store.ExecutionCatalog too: the catalog table (migration
// 12) holds one row per log that is not an inbox stream, with its flow,
// tenant, status and start time; a part of the statement that reads the
// claim inserts it with the log's first batch (CopyPrefix with the copy)
// and updates it only when the batch moves the status, so a batch of step
// events costs it nothing. A search walks catalog_started
// (started_at DESC, execution_id), or the index of its filter (workflow,
// status or tenant first; an id prefix is a range of the primary key, in
// COLLATE "C" byte order), from its cursor to its LIMIT, so a page costs
// its own length at any number of executions (a test checks the plans).
// Migrating a schema fills it in SQL, and in Go in the same transaction
// what SQL cannot read exactly: each tenant (store.TenantOf) and a
// CONTINUED whose metadata PostgreSQL's json cannot de-escape.
//
// Compaction (migration 10) moves settled events into the archive table
// (ArchiveStore: one transaction of INSERT … ON CONFLICT DO NOTHING, then a
// comparison with the rows held) and EventStore.TrimThrough deletes them
// from the log under the execution row's lock, recording the trim point in
// that row; the row's length, and so every append's condition, is
// unchanged.
//
// # Group commit
//
// Concurrent appends from many executions share transactions: a caller
// queues its validated batch and either becomes a leader or waits; a
// leader takes what is queued (up to MaxGroupBatches, MaxGroupBytes) and
// sends the group's statements as one pipelined pgx.Batch, which
// PostgreSQL runs as one implicit transaction: one round trip, one commit,
// one WAL flush. Up to two groups are in flight, on two connections, so one
// executes while the other commits; each group takes its row locks in
// execution-id order, so groups never deadlock on each other. Each caller
// returns only once its own batch is committed. A refused batch does not
// disturb its group; a batch PostgreSQL itself rejects (an ERROR rolls the
// transaction back) makes the leader retry each batch of the group alone,
// so only that batch fails. If the connection fails, or the server ends
// the session, while a commit is in doubt, every caller of the group gets
// an error matching ErrOutcomeUnknown: the batch may or may not be in the
// log, and re-reading the log tells. DB.WriteStats counts transactions,
// batches and events.
//
// # Subscriptions: LISTEN/NOTIFY and catch-up
//
// Subscribe is store.Follow over the log: it delivers what is stored from
// the requested sequence, then re-reads from the last delivered sequence at
// every wake-up, so a wake-up is only a hint and no notification carries
// data. Wake-ups come from this process's own commits at once, and from
// every other process's through NOTIFY on the schema's channel ("loom:" and
// the schema name), sent in the append's transaction so it is delivered
// exactly when the events are visible. The first Subscribe of a DB starts
// one LISTEN connection (pgxlisten). A notification is lost only while that
// connection is down; pgxlisten reconnects (Options.ListenReconnectDelay)
// and, as soon as the new LISTEN is in place, every subscriber is woken to
// re-read, which finds whatever was committed meanwhile. As a last resort
// against a connection that hangs without failing, every subscriber also
// re-reads every Options.RereadInterval (5 s; negative turns it off).
//
// # Durability contract
//
// An Append, AppendFenced, AcquireFence, CopyPrefix, DeleteExecution or any
// snapshot, ref, timer or content write returns nil only after its
// transaction has committed; with the server's synchronous_commit on (the
// default, checked by Open, which refuses off unless
// Options.AllowAsynchronousCommit) the commit is flushed to the WAL first,
// so an acknowledged write survives a server crash; with synchronous
// replication configured on the server, it is also on the standbys the
// server's settings require. A crash before the commit leaves none of a
// write; after it, all. A write whose context ends before it was sent
// writes nothing; the database encoding must be UTF8 (also checked).
//
// # Leases across nodes
//
// LeaseStore keeps one row per leased execution in the leases table: its
// holder, its fencing token and its expiry. Acquire is one conditional
// upsert (INSERT … ON CONFLICT (execution_id) DO UPDATE … WHERE the lease
// is free, expired or the caller's … RETURNING token), so of any number of
// nodes racing for a lease exactly one wins and tokens only grow; Renew and
// Release are conditional UPDATEs on owner and token. Wired as
// loom.Config.Leases on every node, they give each execution one live
// driver: a live lease vetoes another node's re-drive, an expired one lets
// any node's Runtime.Recover take the execution over, and the event log's
// fence refuses the old driver's writes. TestMultiNodeKill kills one of
// three worker processes mid-run and checks exactly that.
//
// # Timers across nodes
//
// TimerStore.Due is a plain read (see TimerStore): several nodes polling
// one schema may see the same due timer, and Delete's compare-and-delete
// lets exactly one of them report true. TimerStore.ClaimDue
// (store.TimerClaimer, migration 9) hands each due timer to one node: one
// UPDATE over a FOR UPDATE SKIP LOCKED selection of the due timers with no
// live claim records the claimer and an expiry on the row, so the claim
// outlasts the statement; Put clears it, and an expired one is free again.
//
// # Queues across nodes
//
// QueueStore (migration 8) keeps one row per queue and one per item.
// Claim is one transaction that locks the queue's row FOR UPDATE, so the
// claims of a queue are serialized across every node; it then counts the
// live claims and the recorded claim times, and takes the ready items in
// order with FOR UPDATE SKIP LOCKED, so Concurrency, PerOwner,
// PerPartition and Rate hold however many nodes claim at once
// (TestQueueTwoNodesHoldLimits). Renew, Complete and Release are
// conditional UPDATEs on the claim's owner and token.
//
// # Read models across nodes
//
// ReadModelStore (migration 11) keeps the rows projections fold the logs
// into: read_models, one row per (kind, id) with its owning projection, its
// version, its indexed fields (a JSON object) and its document;
// read_model_fields, one entry per (kind, field name, value, id), which a
// Query with a Where walks in id order from its cursor; and
// read_model_watermarks, one row per (projection, source). Apply is one
// transaction that takes its locks in one order — the projection's
// advisory lock shared, the watermark's row (a conditional UPDATE from
// the caller's from, or INSERT … ON CONFLICT DO NOTHING for a first step),
// then every row it writes, claimed in (kind, id) order by one INSERT … ON
// CONFLICT DO UPDATE … WHERE false that locks the rows there and inserts
// the rest — so of nodes racing one step exactly one commits, two writers
// of one row never both succeed, and racing Applies never deadlock. Reset
// holds the projection's advisory lock exclusively: it runs between the
// projection's Applies, never beside one (TestReadModelApplyRacesWithoutDeadlock).
//
// # Tests
//
// The tests need a server and never skip: they read LOOM_TEST_POSTGRES_DSN
// and fail without it. scripts/test.sh starts a throwaway cluster and
// removes it afterwards; by hand, eval "$(./scripts/pg-start.sh)", run
// go test ./plugins/postgres, then ./scripts/pg-stop.sh. Each test works in
// a schema of its own, dropped at its end.
package postgres
