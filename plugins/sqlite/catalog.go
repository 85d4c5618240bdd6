package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Writer-side statements of the execution catalog (the catalog table of
// migration 11). Each runs inside the transaction of the write it records.
const (
	// sqlPutEntry records the entry of a new log. A row already there
	// (none should be: it goes with its log) is replaced, never the
	// cause of a failed append.
	sqlPutEntry = `INSERT INTO catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
		VALUES (?, ?, ?, ?, ?, ?)` + catalogUpsert
	// sqlCopyEntry is sqlPutEntry for a copy, with the workflow id of the
	// copy's executions row (its source's).
	sqlCopyEntry = `INSERT INTO catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
		SELECT execution_id, workflow_id, ?, ?, ?, ? FROM executions WHERE execution_id = ?` + catalogUpsert
	catalogUpsert = `
		ON CONFLICT (execution_id) DO UPDATE SET workflow_id = excluded.workflow_id, tenant = excluded.tenant,
			status = excluded.status, started_at = excluded.started_at, status_at = excluded.status_at`
	// sqlMoveEntry changes only the status: the order's keys stay.
	sqlMoveEntry  = `UPDATE catalog SET status = ?, status_at = ? WHERE execution_id = ?`
	sqlDropEntry  = `DELETE FROM catalog WHERE execution_id = ?`
	sqlFirstEvent = `SELECT event_type, timestamp, payload FROM events WHERE execution_id = ? AND sequence = 0`
)

// catalogWrite records what the accepted batch b does to its catalog
// entry inside the open transaction: a first batch creates it, a later one
// moves it only when it moves the status, so a batch of step events costs
// no statement.
func catalogWrite(c *rawConn, b *appendBatch) error {
	var err error
	switch e := b.entry; {
	case b.expected == 0:
		_, err = c.exec(sqlPutEntry, e.ExecutionID, e.WorkflowID, e.Tenant, string(e.Status), e.StartedAt, e.StatusAt)
	case b.move.Moved:
		_, err = c.exec(sqlMoveEntry, string(b.move.Status), b.move.StatusAt, b.execID)
	}
	return err
}

// copyEntry records the entry of a copy, to, of a prefix through
// sequence through, inside the open transaction: started_at and tenant
// from its first event, the status from the last status-moving event of
// the prefix that remains (store.CatalogChangeOf), read from the end.
func copyEntry(c *rawConn, to string, through int64) error {
	row, found, err := c.queryRow(sqlFirstEvent, to)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("sqlite: log %q has no first event", to)
	}
	var first event.Envelope
	var ok [3]bool
	first.Type, ok[0] = row[0].(string)
	first.Timestamp, ok[1] = row[1].(int64)
	var payload string
	payload, ok[2] = row[2].(string)
	if ok != [3]bool{true, true, true} {
		return fmt.Errorf("sqlite: first event row of types %T %T %T", row[0], row[1], row[2])
	}
	first.Payload = []byte(payload)
	change, err := prefixCatalog(rawStatusReader(c, to), through)
	if err != nil {
		return err
	}
	e := store.EntryOf(to, first).Apply(change)
	_, err = c.exec(sqlCopyEntry, e.Tenant, string(e.Status), e.StartedAt, e.StatusAt, to)
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

// catalogCols are the columns scanEntry reads, in its order.
const catalogCols = `execution_id, workflow_id, tenant, status, started_at, status_at`

// catalogWhere returns the conditions of q's filters, with their
// arguments in placeholder order. The id prefix is a range of the primary
// key, compared in BINARY (byte) order, which for UTF-8 is code-point
// order: from the prefix to its successor (store.PrefixEnd).
func catalogWhere(q store.CatalogQuery) ([]string, []any) {
	var conds []string
	var args []any
	for _, f := range []struct{ col, v string }{{"workflow_id", q.WorkflowID}, {"tenant", q.Tenant}, {"status", string(q.Status)}} {
		if f.v != "" {
			conds, args = append(conds, f.col+" = ?"), append(args, f.v)
		}
	}
	if q.Prefix != "" {
		conds, args = append(conds, "execution_id >= ?"), append(args, q.Prefix)
		if end, ok := store.PrefixEnd(q.Prefix); ok {
			conds, args = append(conds, "execution_id < ?"), append(args, end)
		}
	}
	return conds, args
}

// catalogSearchSQL builds the statement of a search for a page of limit
// entries (it reads limit+1, to tell whether another follows), and its
// arguments. Past a cursor the page starts after (started, id) in the
// order: started_at <= started bounds the index range, and the OR leaves
// out the entries of that instant up to id. Its text depends only on
// which filters q sets, so a prepared statement serves every query of
// that shape.
func catalogSearchSQL(q store.CatalogQuery, limit int) (string, []any) {
	conds, args := catalogWhere(q)
	if q.After != "" {
		started, id, _ := store.ParseCatalogCursor(q.After) // valid: ValidateCatalogQuery checked it
		conds = append(conds, "started_at <= ?", "(started_at < ? OR execution_id > ?)")
		args = append(args, started, started, id)
	}
	return `SELECT ` + catalogCols + ` FROM catalog` + whereClause(conds) +
		` ORDER BY started_at DESC, execution_id LIMIT ?`, append(args, limit+1)
}

// catalogCountSQL builds the statement of a count, and its arguments.
func catalogCountSQL(q store.CatalogQuery) (string, []any) {
	conds, args := catalogWhere(q)
	return `SELECT status, COUNT(*) FROM catalog` + whereClause(conds) + ` GROUP BY status`, args
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(conds, " AND ")
}

// scanEntry reads a row of catalogCols.
func scanEntry(rows *sql.Rows) (store.CatalogEntry, error) {
	var e store.CatalogEntry
	var status string
	err := rows.Scan(&e.ExecutionID, &e.WorkflowID, &e.Tenant, &status, &e.StartedAt, &e.StatusAt)
	e.Status = store.CatalogStatus(status)
	return e, err
}

// scanCount reads a row of a count.
func scanCount(rows *sql.Rows) (catalogCount, error) {
	var c catalogCount
	var status string
	err := rows.Scan(&status, &c.n)
	c.status = store.CatalogStatus(status)
	return c, err
}

type catalogCount struct {
	status store.CatalogStatus
	n      int64
}

// catalogPage is the page of limit entries read with one more, if another
// follows.
func catalogPage(entries []store.CatalogEntry, limit int) store.CatalogPage {
	page := store.CatalogPage{Entries: entries}
	if page.Entries == nil {
		page.Entries = []store.CatalogEntry{}
	}
	if len(entries) > limit {
		page.Entries = entries[:limit]
		page.Next = store.CatalogCursor(entries[limit-1])
	}
	return page
}

func catalogCounts(rows []catalogCount) store.CatalogCounts {
	counts := store.CatalogCounts{}
	for _, c := range rows {
		counts[c.status] = c.n
	}
	return counts
}

// SearchExecutions implements store.ExecutionCatalog: one page of the
// entries q selects, newest start first, from the catalog table, which
// every Append, AppendFenced, CopyPrefix and DeleteExecution changes in its
// own transaction. A page walks one index in the search's order from the
// cursor and stops at its LIMIT — catalog_started, or the index of a
// filter (workflow, status, tenant), or the primary key's range of an id
// prefix — so it costs its own length, not the number of executions. A
// malformed q is refused with *store.InvalidCatalogQueryError before
// anything is read. A file written before the catalog existed gets it,
// filled from its logs, when Open migrates it (migration 11).
func (s *EventStore) SearchExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogPage, error) {
	if err := store.ValidateCatalogQuery(q); err != nil {
		return store.CatalogPage{}, err
	}
	limit := store.CatalogLimit(q.Limit)
	text, args := catalogSearchSQL(q, limit)
	entries, err := catalogQuery(ctx, s, "search executions", text, scanEntry, args)
	if err != nil {
		return store.CatalogPage{}, err
	}
	return catalogPage(entries, limit), nil
}

// CountExecutions implements store.ExecutionCatalog: the entries q selects
// by status, one GROUP BY over the index of its filter (q's Status, After
// and Limit are ignored). A status with no entry is absent.
func (s *EventStore) CountExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogCounts, error) {
	q.Status, q.After, q.Limit = "", "", 0
	if err := store.ValidateCatalogQuery(q); err != nil {
		return nil, err
	}
	text, args := catalogCountSQL(q)
	rows, err := catalogQuery(ctx, s, "count executions", text, scanCount, args)
	if err != nil {
		return nil, err
	}
	return catalogCounts(rows), nil
}

// catalogQuery runs the catalog statement text, prepared once per shape,
// on the read pool and scans each row.
func catalogQuery[T any](ctx context.Context, s *EventStore, op, text string, scan func(*sql.Rows) (T, error), args []any) ([]T, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := s.db.reads.catalogStmt(ctx, s.db.read, text)
	if err != nil {
		return nil, s.db.readErr(op, err)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, s.db.readErr(op, err)
	}
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, errors.Join(s.db.readErr(op, err), rows.Close())
		}
		out = append(out, x)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.db.readErr(op, err)
	}
	return out, nil
}

// catalogStmt returns the prepared statement of a catalog query, preparing
// it on first use: one per shape of query (which filters it sets, a
// cursor or none), so at most a few dozen.
func (r *readStmts) catalogStmt(ctx context.Context, read *sql.DB, text string) (*sql.Stmt, error) {
	r.catMu.Lock()
	defer r.catMu.Unlock()
	if st, ok := r.catalog[text]; ok {
		return st, nil
	}
	st, err := read.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if r.catalog == nil {
		r.catalog = map[string]*sql.Stmt{}
	}
	r.catalog[text] = st
	return st, nil
}

// The statements of an unfiltered search and count, which a read-only
// opening prepares to check that it can read the file's catalog.
var (
	sqlCatalogFirstPage, _ = catalogSearchSQL(store.CatalogQuery{}, 1)
	sqlCatalogCount, _     = catalogCountSQL(store.CatalogQuery{})
)
