package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/plugins/postgres"
	"github.com/loom-kernel/loom/store"
)

// schemaParam names the DSN query parameter that picks the Loom schema
// (default postgres.DefaultSchema); it is removed before connecting.
const schemaParam = "loom_schema"

// readOnlySession makes the server refuse every write of a session: what
// keeps the read-only commands read-only on PostgreSQL, whatever a bug
// might try.
const readOnlySession = "default_transaction_read_only"

// pgFollowInterval is how often a follower re-reads a PostgreSQL log.
const pgFollowInterval = 200 * time.Millisecond

// openPostgres opens a Loom PostgreSQL store for reading only, over
// sessions the server keeps read-only. It reads the plugin's tables itself
// rather than through plugins/postgres, whose Open migrates the schema (and
// creates its ledger): so an older schema is read as it is, and a newer one
// as long as the columns read here are there. Followers poll the log every
// pgFollowInterval.
func openPostgres(ctx context.Context, dsn string) (*openedStore, error) {
	dsn, schema, err := splitSchema(dsn)
	if err != nil {
		return nil, usagef("--store: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, usagef("--store: %v", err)
	}
	cfg.ConnConfig.RuntimeParams[readOnlySession] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "loom-cli (read-only)"
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	r := &pgReader{pool: pool, schema: schema, q: pgx.Identifier{schema}.Sanitize()}
	if err := r.check(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	events := &pgEvents{r}
	src := inspect.Source{Events: events, Snapshots: &pgSnapshots{r}, Branches: &pgRefs{r},
		Follow: inspect.PollingFollow(events, pgFollowInterval)}
	return &openedStore{Source: src, archive: &pgArchive{r}, name: "postgres schema " + schema, close: func() error { pool.Close(); return nil }}, nil
}

// splitSchema removes the loom_schema parameter from a DSN URL.
func splitSchema(dsn string) (string, string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("not a PostgreSQL URL (postgres://user@host/db?loom_schema=loom)")
	}
	q := u.Query()
	schema := q.Get(schemaParam)
	if schema == "" {
		schema = postgres.DefaultSchema
	}
	q.Del(schemaParam)
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// pgReader reads the tables of one Loom schema.
type pgReader struct {
	pool    *pgxpool.Pool
	schema  string
	q       string // the quoted schema
	hasRefs bool
	hasSnap bool
	// hasArchive: the schema has compaction (the archive table and
	// executions.trimmed).
	hasArchive bool
}

// check refuses a schema without a Loom store, or one whose tables are not
// those read here.
func (r *pgReader) check(ctx context.Context) error {
	rows, err := r.pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, r.schema)
	if err != nil {
		return fmt.Errorf("reading PostgreSQL's catalog: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("reading PostgreSQL's catalog: %w", err)
	}
	has := map[string]bool{}
	for _, t := range tables {
		has[t] = true
	}
	if !has["schema_migrations"] || !has["events"] || !has["executions"] {
		return notFoundf("no Loom store in schema %q: pass the schema your app writes with ?%s=NAME", r.schema, schemaParam)
	}
	r.hasSnap, r.hasRefs, r.hasArchive = has["snapshots"], has["refs"], has["archive"]
	var version int
	if err := r.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+r.q+`.schema_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("reading the schema version of %q: %w", r.schema, err)
	}
	// Every statement read here must plan: the columns are there.
	stmts := []string{r.eventsFrom(), r.listExecutions()}
	if r.hasSnap {
		stmts = append(stmts, r.snapshotAt())
	}
	if r.hasRefs {
		stmts = append(stmts, r.refList())
	}
	if r.hasArchive {
		stmts = append(stmts, r.archivedRange(), r.trimmedThrough())
	}
	for _, s := range stmts {
		if _, err := r.pool.Exec(ctx, "EXPLAIN "+s, pgArgs(s)...); err != nil {
			return unsupportedf("schema %q (version %d) is not one this loom can read (%v): use the loom binary of the app's release", r.schema, version, err)
		}
	}
	return nil
}

// pgArgs returns placeholder values for the parameters of s, for EXPLAIN.
func pgArgs(s string) []any {
	var args []any
	for i := 1; strings.Contains(s, fmt.Sprintf("$%d", i)); i++ {
		args = append(args, nil)
	}
	return args
}

const pgEventCols = `sequence, id, workflow_id, event_type, timestamp_ms, payload, metadata`

func (r *pgReader) eventsFrom() string {
	return `SELECT ` + pgEventCols + ` FROM ` + r.q + `.events WHERE execution_id = $1::text AND sequence >= $2::bigint ORDER BY sequence`
}

func (r *pgReader) eventsRange() string {
	return `SELECT ` + pgEventCols + ` FROM ` + r.q + `.events WHERE execution_id = $1::text AND sequence >= $2::bigint AND sequence < $3::bigint ORDER BY sequence`
}

func (r *pgReader) listExecutions() string {
	return `SELECT execution_id, workflow_id, length FROM ` + r.q + `.executions WHERE execution_id > $1::text AND length > 0 ORDER BY execution_id LIMIT $2::bigint`
}

func (r *pgReader) archivedRange() string {
	return `SELECT ` + pgEventCols + ` FROM ` + r.q + `.archive WHERE execution_id = $1::text AND sequence >= $2::bigint AND ($3::bigint < 0 OR sequence < $3::bigint) ORDER BY sequence`
}

func (r *pgReader) trimmedThrough() string {
	return `SELECT trimmed FROM ` + r.q + `.executions WHERE execution_id = $1::text`
}

func (r *pgReader) snapshotAt() string {
	return `SELECT sequence, schema_version, state FROM ` + r.q + `.snapshots WHERE execution_id = $1::text AND sequence <= $2::bigint ORDER BY sequence DESC LIMIT 1`
}

func (r *pgReader) refList() string {
	return `SELECT name, execution_id, version FROM ` + r.q + `.refs WHERE name >= $1::text AND left(name, char_length($1::text)) = $1::text ORDER BY name`
}

// pgText reports whether s can be stored in PostgreSQL text: an id holding
// NUL never was.
func pgText(s string) bool { return !strings.ContainsRune(s, 0) }

// pgEvents is the read-only event log. Append returns errReadOnly.
type pgEvents struct{ r *pgReader }

var (
	_ store.EventStore    = (*pgEvents)(nil)
	_ store.RangeReader   = (*pgEvents)(nil)
	_ store.PrefixTrimmer = (*pgEvents)(nil)
	_ store.ArchiveStore  = (*pgArchive)(nil)
)

// errReadOnly is what a write through a read-only store returns.
var errReadOnly = errors.New("loom: the store is opened read-only")

func (s *pgEvents) Append(context.Context, string, int64, []event.Envelope) error { return errReadOnly }

func (s *pgEvents) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	if !pgText(id) {
		return nil, nil
	}
	return s.scan(ctx, id, s.r.eventsFrom(), id, from)
}

func (s *pgEvents) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	if !pgText(id) || from >= to {
		return nil, nil
	}
	return s.scan(ctx, id, s.r.eventsRange(), id, from, to)
}

func (s *pgEvents) scan(ctx context.Context, id, q string, args ...any) ([]event.Envelope, error) {
	rows, err := s.r.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	var (
		out     []event.Envelope
		e       event.Envelope
		payload []byte
		meta    *string
	)
	_, err = pgx.ForEachRow(rows, []any{&e.Sequence, &e.ID, &e.WorkflowID, &e.Type, &e.Timestamp, &payload, &meta}, func() error {
		ev := e
		ev.ExecutionID = id
		ev.Payload = json.RawMessage(append([]byte(nil), payload...))
		if meta != nil {
			m := map[string]json.RawMessage{}
			if err := json.Unmarshal([]byte(*meta), &m); err != nil {
				return fmt.Errorf("the metadata of %s #%d is corrupt: %w", id, ev.Sequence, err)
			}
			ev.Metadata = m
		}
		out = append(out, ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	return out, nil
}

func (s *pgEvents) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if limit < 1 {
		limit = 1000
	}
	rows, err := s.r.pool.Query(ctx, s.r.listExecutions(), after, limit+1)
	if err != nil {
		return store.ExecutionPage{}, fmt.Errorf("listing executions: %w", err)
	}
	infos, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ExecutionInfo, error) {
		var info store.ExecutionInfo
		return info, row.Scan(&info.ExecutionID, &info.WorkflowID, &info.Length)
	})
	if err != nil {
		return store.ExecutionPage{}, fmt.Errorf("listing executions: %w", err)
	}
	page := store.ExecutionPage{Executions: infos}
	if len(infos) > limit {
		page.Executions = infos[:limit]
		page.Next = infos[limit-1].ExecutionID
	}
	return page, nil
}

func (s *pgEvents) Close() error { return nil }

// TrimThrough is a write: errReadOnly.
func (s *pgEvents) TrimThrough(context.Context, string, int64) error { return errReadOnly }

// TrimmedThrough reads the log's compaction point (0 for a schema from
// before compaction, or an unknown execution).
func (s *pgEvents) TrimmedThrough(ctx context.Context, id string) (int64, error) {
	if !s.r.hasArchive || !pgText(id) {
		return 0, nil
	}
	var trimmed int64
	err := s.r.pool.QueryRow(ctx, s.r.trimmedThrough(), id).Scan(&trimmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the compaction point of %s: %w", id, err)
	}
	return trimmed, nil
}

// pgArchive is the read-only archive. Archive returns errReadOnly.
type pgArchive struct{ r *pgReader }

func (a *pgArchive) Archive(context.Context, string, []event.Envelope) error { return errReadOnly }

func (a *pgArchive) ReadArchived(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	if !a.r.hasArchive || !pgText(id) {
		return nil, nil
	}
	return (&pgEvents{a.r}).scan(ctx, id, a.r.archivedRange(), id, from, to)
}

// pgSnapshots is the read-only snapshot store. Save returns errReadOnly.
type pgSnapshots struct{ r *pgReader }

var (
	_ store.SnapshotStore  = (*pgSnapshots)(nil)
	_ store.SnapshotLister = (*pgSnapshots)(nil)
)

func (s *pgSnapshots) Save(context.Context, store.Snapshot) error { return errReadOnly }

func (s *pgSnapshots) LoadLatest(ctx context.Context, id string) (store.Snapshot, bool, error) {
	return s.LoadAt(ctx, id, 1<<63-1)
}

func (s *pgSnapshots) LoadAt(ctx context.Context, id string, atMost int64) (store.Snapshot, bool, error) {
	if !s.r.hasSnap || !pgText(id) {
		return store.Snapshot{}, false, nil
	}
	snap := store.Snapshot{ExecutionID: id}
	err := s.r.pool.QueryRow(ctx, s.r.snapshotAt(), id, atMost).Scan(&snap.Sequence, &snap.SchemaVersion, &snap.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Snapshot{}, false, nil
	}
	if err != nil {
		return store.Snapshot{}, false, fmt.Errorf("loading a snapshot: %w", err)
	}
	if snap.State == nil {
		snap.State = []byte{}
	}
	return snap, true, nil
}

func (s *pgSnapshots) ListSequences(ctx context.Context, id string) ([]int64, error) {
	if !s.r.hasSnap || !pgText(id) {
		return nil, nil
	}
	rows, err := s.r.pool.Query(ctx, `SELECT sequence FROM `+s.r.q+`.snapshots WHERE execution_id = $1 ORDER BY sequence`, id)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (s *pgSnapshots) Close() error { return nil }

// pgRefs is the read-only branch registry. CreateRef and MoveRef return
// errReadOnly.
type pgRefs struct{ r *pgReader }

var _ store.BranchRegistry = (*pgRefs)(nil)

func (b *pgRefs) CreateRef(context.Context, string, string) (store.Ref, error) {
	return store.Ref{}, errReadOnly
}

func (b *pgRefs) MoveRef(context.Context, string, string, int64) (store.Ref, error) {
	return store.Ref{}, errReadOnly
}

func (b *pgRefs) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	refs, err := b.ListRefs(ctx, name)
	if err != nil {
		return store.Ref{}, err
	}
	for _, r := range refs {
		if r.Name == name {
			return r, nil
		}
	}
	return store.Ref{}, fmt.Errorf("%w: %q", store.ErrRefNotFound, name)
}

func (b *pgRefs) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	if !b.r.hasRefs || !pgText(prefix) {
		return nil, nil
	}
	rows, err := b.r.pool.Query(ctx, b.r.refList(), prefix)
	if err != nil {
		return nil, fmt.Errorf("listing refs: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Ref, error) {
		var r store.Ref
		return r, row.Scan(&r.Name, &r.ExecutionID, &r.Version)
	})
}

func (b *pgRefs) Close() error { return nil }
