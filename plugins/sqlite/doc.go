// Package sqlite is Loom's embedded storage: the event log, snapshots,
// branch refs, durable timers, heartbeat leases, claim-checked content,
// start queues, archived events and read models in one SQLite file,
// through modernc.org/sqlite.
//
// # Use
//
// The preset opens everything a runtime needs:
//
//	st, err := sqlite.Storage(sqlite.StorageOptions{Path: "loom.db"})
//	if err != nil { … }
//	rt, err := loom.New(loom.Config{Storage: st, Flows: flows}) // every store at once
//	…
//	err = errors.Join(rt.Close(), st.Close()) // st.Close commits what is queued, closes the file
//
// Open returns a *DB to take the stores one by one (DB.EventStore,
// DB.SnapshotStore, DB.BranchRegistry, DB.TimerStore, DB.LeaseStore,
// DB.ContentStore, DB.QueueStore, DB.ArchiveStore, DB.ReadModelStore); OpenEventStore and its siblings open a file for a
// single store that owns it. Every store passes the store/storetest conformance kits and
// implements every optional capability of its SPI.
//
// # Durability: WAL and synchronous
//
// The file is in write-ahead-log mode: a commit appends to the -wal file,
// readers keep reading the last committed state beside the writer, and
// checkpoints fold the log back into the database. The writer connection
// runs with synchronous=FULL by default, so a commit returns only after the
// log is fsynced: an acknowledged append survives a power loss.
// WithSynchronous(SyncNormal) syncs only at checkpoints — an acknowledged
// append then survives a process crash but not an OS crash or power loss,
// and the file is never corrupted either way. Pick NORMAL only when losing
// the last moments of every execution on power loss is acceptable.
//
// # Group commit
//
// With synchronous=FULL every commit costs one fsync, which dwarfs the cost
// of the rows it carries, so concurrent appends share commits. The write
// connection is used by one caller at a time, the leader; Append validates
// its batch (store.ValidateAppend), puts it in a bounded queue, and either
// becomes the leader or waits for its result. The leader, on its own
// goroutine, takes whatever is queued — up to MaxGroupBatches appends and
// MaxGroupBytes of payload — and writes it in ONE transaction, taking in
// the batches that arrive while it writes, then commits once and gives each
// caller its own result. For each batch it checks the fence and compares the
// log's length with the batch's expected sequence inside the transaction, so
// a refused batch (a *store.SequenceConflictError or *store.FencedError)
// is simply left out while the others are inserted with multi-row INSERTs.
// If the transaction fails for another reason, each of its batches is
// retried alone, so a batch SQLite cannot take fails only its own caller.
//
// A caller returns only once its own batch is committed. N concurrent
// appenders share one fsync instead of paying N; a lone appender commits at
// once on its own goroutine (nobody waits for company, and no goroutine
// hand-off is paid), one commit per append as without grouping. A leader
// commits at most a few more transactions for others after its own before
// handing the leadership on, which bounds its caller's latency. A caller
// whose context ends while its batch is still queued gets ctx.Err() and
// nothing is written; once a leader has taken the batch, the caller waits
// for the outcome. Snapshot, ref, timer, content, fence, fork and delete
// writes use the same connection, each in its own transaction.
// DB.WriteStats counts committed transactions, batches and events.
//
// The writer remembers the length of the logs it wrote (lengthCache), so a
// sequence check costs no query; it trusts that memory only while no other
// connection has written the file, which SQLite's data version tells it, so
// two processes sharing a file stay correct.
//
// Reads (ReadFrom, listings, snapshot loads, refs) use a separate pool of
// query-only connections, which WAL lets run beside the writer.
//
// # Following a log
//
// EventStore.Subscribe follows a log with catch-up. A commit through the
// same DB wakes its subscribers at once. A commit by another connection to
// the file — another process, or another DB in this one — cannot notify
// them, so while a DB has subscriptions it polls PRAGMA data_version (which
// changes exactly when another connection has committed) every
// ChangePollInterval on one connection of its own, one poller per DB
// however many subscriptions, and on a change wakes every subscriber to
// re-read its log. The poller starts with the first subscription, stops
// with the last, and DB.Close waits for it.
//
// # Schema
//
// Tables are created by versioned migrations recorded in schema_migrations,
// each applied once in its own transaction; Open refuses a file whose
// schema is newer than this code with *SchemaVersionError. Payloads and
// metadata are stored as the text appended, never re-encoded, so reads
// return the appended bytes. The executions table gets one row when a log
// is created and serves ListExecutions in SQLite's BINARY collation, which
// is code-point order for UTF-8; a log's length is MAX(sequence)+1, one
// seek on the events key, rather than a column every append would rewrite.
// The unfinished table (migration 7) is the store.StatusIndex: one row per
// execution not ended, written by the append's own transaction only when
// its batch moves the status (a step event costs nothing), read through its
// (listed, execution_id) index, so a recovery pass costs the number of
// unfinished executions, not of all. Migrating a file from an older release
// fills it from each log's last status-moving event, in SQL.
// The catalog table (migration 11) is the store.ExecutionCatalog: one row
// per log that is not an inbox stream, with its flow, tenant, status and
// start time, created by the transaction of the log's first batch (or its
// CopyPrefix) and rewritten only by a batch that moves the status. A
// search walks catalog_started (started_at DESC, execution_id), or the
// index of its filter (workflow, status or tenant first; an id prefix is a
// range of the primary key), from its cursor to its LIMIT, so a page costs
// its own length at any number of executions (a test checks SQLite's plan:
// no scan of the table, no sort). Migrating a file fills it in SQL, and in
// Go in the same transaction what SQL cannot read exactly: each tenant
// (store.TenantOf) and a CONTINUED whose metadata SQLite cannot parse.
// Timers live in the timers table, one row per key (Put is an upsert,
// Delete a compare-and-delete on wake_at), and Due reads the (wake_at, key)
// index in order up to its LIMIT on the read pool. Leases live in the leases
// table, one row per execution ever leased: Acquire is one conditional
// upsert (INSERT … ON CONFLICT DO UPDATE … WHERE free, expired or the
// owner's, RETURNING the bumped token), Renew and Release are UPDATEs on
// owner and token, and a released row keeps its token with a NULL owner so
// tokens only grow. Blobs live in the content table, one row per ref (Put
// is INSERT OR IGNORE, a stored ref is answered from the read pool with no
// write), and Get re-hashes what it reads, refusing altered bytes with
// *store.ContentCorruptError. Compaction (migration 9) moves settled events
// into the archive table (ArchiveStore: INSERT … ON CONFLICT DO NOTHING
// after a comparison with the rows already there, one writer transaction)
// and EventStore.TrimThrough deletes them from the log and records the
// trim point in the log's executions row, so reads skip them and the
// length, MAX(sequence)+1, stays. Read models (migration 10,
// ReadModelStore) live in read_models, one row per (kind, id) with its
// owning projection, version, indexed fields (a JSON object) and document;
// read_model_fields holds one entry per (kind, field name, value, id), so
// a Query with a Where walks that key in id order from its cursor (a test
// checks SQLite's plan: no scan, no sort); read_model_watermarks holds one
// row per (projection, source). Apply is one writer transaction (BEGIN
// IMMEDIATE: nothing, in any process, changes what it checked before it
// commits) that checks the watermark and every row, then writes them.
//
// # Why modernc.org/sqlite
//
// It is SQLite transpiled to Go: no cgo, so Loom builds and cross-compiles
// with a plain Go toolchain, as go-workflows and DBOS do. Its CPU cost per
// statement is higher than the C library's, but with synchronous=FULL every
// driver is bound by the same disk sync, and group commit spreads that sync
// over many appends. (Its race-detector builds are slow: the transpiled C
// is instrumented too.)
package sqlite
