package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// catalogOp is what an append does to the execution catalog (the catalog
// table of migration 12).
type catalogOp int

const (
	catalogKeep   catalogOp = iota // a later batch that moves no status, or an inbox stream
	catalogCreate                  // a first batch: tenant, status, started_at, status_at
	catalogMove                    // a later batch that moves the status: status, status_at
	catalogOps
)

// catalogCTE is the part of the append that changes the catalog, for the
// claimed execution only, its parameters numbered from base. A row already
// there for a new log (none should be: it goes with its log) is replaced,
// never the cause of a failed append.
func catalogCTE(s string, op catalogOp, base int) string {
	p := func(i int, typ string) string { return "$" + strconv.Itoa(base+i) + "::" + typ }
	switch op {
	case catalogCreate:
		return `, cat AS (
		INSERT INTO ` + s + `.catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
		SELECT c.execution_id, $2::text, ` + p(0, "text") + `, ` + p(1, "text") + `, ` + p(2, "bigint") + `, ` + p(3, "bigint") + `
		FROM claim c` + catalogUpsert + `
	)`
	case catalogMove:
		return `, cat AS (
		UPDATE ` + s + `.catalog k SET status = ` + p(0, "text") + `, status_at = ` + p(1, "bigint") + `
		FROM claim c WHERE k.execution_id = c.execution_id
	)`
	}
	return ""
}

const catalogUpsert = `
		ON CONFLICT (execution_id) DO UPDATE SET workflow_id = EXCLUDED.workflow_id, tenant = EXCLUDED.tenant,
			status = EXCLUDED.status, started_at = EXCLUDED.started_at, status_at = EXCLUDED.status_at`

// catalogQueries are the catalog's statements outside the append, with
// the schema s (already quoted) filled in.
func catalogQueries(s string) (putEntry, dropEntry, firstEvent string) {
	return `INSERT INTO ` + s + `.catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
			VALUES ($1, $2, $3, $4, $5, $6)` + catalogUpsert,
		`DELETE FROM ` + s + `.catalog WHERE execution_id = $1`,
		`SELECT event_type, timestamp_ms, payload FROM ` + s + `.events WHERE execution_id = $1 AND sequence = 0`
}

// copyEntry records the entry of a copy, to, of a prefix through
// sequence through, inside tx: its flow workflowID (its source's),
// started_at and tenant from its first event, the status from the last
// status-moving event of the prefix that remains (store.CatalogChangeOf),
// read from the end.
func (s *EventStore) copyEntry(ctx context.Context, tx pgx.Tx, to, workflowID string, through int64) error {
	var first event.Envelope
	var payload []byte
	if err := tx.QueryRow(ctx, s.db.q.firstEvent, to).Scan(&first.Type, &first.Timestamp, &payload); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: log %q has no first event", to)
		}
		return err
	}
	first.Payload = json.RawMessage(payload)
	change, err := prefixCatalog(txStatusReader(ctx, tx, s.db.q.lastStatusEvent, to), through)
	if err != nil {
		return err
	}
	e := store.EntryOf(to, first).Apply(change)
	_, err = tx.Exec(ctx, s.db.q.putEntry, to, workflowID, e.Tenant, string(e.Status), e.StartedAt, e.StatusAt)
	return err
}

// prefixCatalog is store.CatalogChangeOf of the events of a log at or
// before through, found from the end by read.
func prefixCatalog(read statusReader, through int64) (store.CatalogChange, error) {
	e, found, err := lastMoving(read, through, func(e event.Envelope) bool {
		_, moves := store.CatalogStatusOf(e)
		return moves
	})
	if err != nil || !found {
		return store.CatalogChange{}, err
	}
	return store.CatalogChangeOf([]event.Envelope{e}), nil
}

// catalogCols are the columns a search reads, in scan order.
const catalogCols = `execution_id, workflow_id, tenant, status, started_at, status_at`

// catalogArgs numbers a statement's parameters as its text is built.
type catalogArgs struct{ vals []any }

func (a *catalogArgs) add(v any) string {
	a.vals = append(a.vals, v)
	return "$" + strconv.Itoa(len(a.vals))
}

// catalogWhere returns the conditions of q's filters. The ids are text
// COLLATE "C", compared byte by byte, which for UTF-8 is code-point order,
// so the id prefix is a range of the primary key: from the prefix to its
// successor (store.PrefixEnd).
func catalogWhere(q store.CatalogQuery, a *catalogArgs) []string {
	var conds []string
	for _, f := range []struct{ col, v string }{{"workflow_id", q.WorkflowID}, {"tenant", q.Tenant}, {"status", string(q.Status)}} {
		if f.v != "" {
			conds = append(conds, f.col+" = "+a.add(f.v)+"::text")
		}
	}
	if q.Prefix != "" {
		conds = append(conds, "execution_id >= "+a.add(q.Prefix)+"::text")
		if end, ok := store.PrefixEnd(q.Prefix); ok {
			conds = append(conds, "execution_id < "+a.add(end)+"::text")
		}
	}
	return conds
}

// catalogSearchSQL builds the statement of a search for a page of limit
// entries (it reads limit+1, to tell whether another follows), and its
// arguments. Past a cursor the page starts after (started, id) in the
// order: started_at <= started bounds the index range, and the OR leaves
// out the entries of that instant up to id. Its text depends only on
// which filters q sets, so pgx prepares it once per shape.
func catalogSearchSQL(s string, q store.CatalogQuery, limit int) (string, []any) {
	var a catalogArgs
	conds := catalogWhere(q, &a)
	if q.After != "" {
		started, id, _ := store.ParseCatalogCursor(q.After) // valid: ValidateCatalogQuery checked it
		at := a.add(started) + "::bigint"
		conds = append(conds, "started_at <= "+at, "(started_at < "+at+" OR execution_id > "+a.add(id)+"::text)")
	}
	text := `SELECT ` + catalogCols + ` FROM ` + s + `.catalog` + whereClause(conds) +
		` ORDER BY started_at DESC, execution_id LIMIT ` + a.add(int64(limit+1)) + `::bigint`
	return text, a.vals
}

// catalogCountSQL builds the statement of a count, and its arguments.
func catalogCountSQL(s string, q store.CatalogQuery) (string, []any) {
	var a catalogArgs
	conds := catalogWhere(q, &a)
	return `SELECT status, count(*) FROM ` + s + `.catalog` + whereClause(conds) + ` GROUP BY status`, a.vals
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(conds, " AND ")
}

// SearchExecutions implements store.ExecutionCatalog: one page of the
// entries q selects, newest start first, from the catalog table, which
// the append statement itself changes (see appendSQL), and CopyPrefix and
// DeleteExecution in their transactions, so every process sharing the
// schema sees it agree with the log. A page walks one index in the
// search's order from the cursor and stops at its LIMIT — catalog_started,
// or the index of a filter (workflow, status, tenant), or the primary
// key's range of an id prefix — so it costs its own length, not the
// number of executions. A malformed q is refused with
// *store.InvalidCatalogQueryError before anything is read. A schema
// written before the catalog existed gets it, filled from its logs, when
// Open migrates it (migration 12).
func (s *EventStore) SearchExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogPage, error) {
	if err := store.ValidateCatalogQuery(q); err != nil {
		return store.CatalogPage{}, err
	}
	if err := s.check(); err != nil {
		return store.CatalogPage{}, err
	}
	limit := store.CatalogLimit(q.Limit)
	text, args := catalogSearchSQL(s.db.q.schema, q, limit)
	rows, err := s.db.pool.Query(ctx, text, args...)
	if err != nil {
		return store.CatalogPage{}, s.readErr("search executions", err)
	}
	page := store.CatalogPage{Entries: []store.CatalogEntry{}}
	var e store.CatalogEntry
	var status string
	_, err = pgx.ForEachRow(rows, []any{&e.ExecutionID, &e.WorkflowID, &e.Tenant, &status, &e.StartedAt, &e.StatusAt},
		func() error {
			e.Status = store.CatalogStatus(status)
			page.Entries = append(page.Entries, e)
			return nil
		})
	if err != nil {
		return store.CatalogPage{}, s.readErr("search executions", err)
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.Next = store.CatalogCursor(page.Entries[limit-1])
	}
	return page, nil
}

// CountExecutions implements store.ExecutionCatalog: the entries q selects
// by status, one GROUP BY over the index of its filter (q's Status, After
// and Limit are ignored). A status with no entry is absent.
func (s *EventStore) CountExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogCounts, error) {
	q.Status, q.After, q.Limit = "", "", 0
	if err := store.ValidateCatalogQuery(q); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	text, args := catalogCountSQL(s.db.q.schema, q)
	rows, err := s.db.pool.Query(ctx, text, args...)
	if err != nil {
		return nil, s.readErr("count executions", err)
	}
	counts := store.CatalogCounts{}
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[store.CatalogStatus(status)] = n
		return nil
	})
	if err != nil {
		return nil, s.readErr("count executions", err)
	}
	return counts, nil
}
