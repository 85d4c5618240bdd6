package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// sqlBackfillCatalog fills the catalog table of a file written before it
// existed, in SQL, one row per log that is not an inbox stream: the
// workflow id of its executions row, started_at from its first event, and
// the status of its last status-moving event by store.CatalogStatusOf's
// rule (one backward seek per log on the events key): STARTED and RESUMED
// set running, SUSPENDED suspended, COMPLETED, FAILED and CANCELLED their
// own, a kernel-stamped CONTINUED (metadata kernel: true) continued; a log
// with none is pending at its first event. A CONTINUED whose metadata
// SQLite cannot parse (JSON nested past its depth limit) may or may not be
// stamped: its row is marked 'unsure', and fillCatalog, in the same
// transaction, decides it in Go along with every tenant (which SQL cannot
// read as store.TenantOf does).
const sqlBackfillCatalog = `INSERT INTO catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
	SELECT l.id, l.workflow_id, '',
		CASE
			WHEN e.event_type IS NULL THEN 'pending'
			WHEN e.event_type IN ('EXECUTION_STARTED', 'EXECUTION_RESUMED') THEN 'running'
			WHEN e.event_type = 'EXECUTION_SUSPENDED' THEN 'suspended'
			WHEN e.event_type = 'EXECUTION_COMPLETED' THEN 'completed'
			WHEN e.event_type = 'EXECUTION_FAILED' THEN 'failed'
			WHEN e.event_type = 'EXECUTION_CANCELLED' THEN 'cancelled'
			WHEN json_valid(e.metadata) THEN 'continued'
			ELSE 'unsure'
		END,
		f.timestamp, COALESCE(e.timestamp, f.timestamp)
	FROM (
		SELECT x.execution_id AS id, x.workflow_id,
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
	JOIN events f ON f.execution_id = l.id AND f.sequence = 0
	LEFT JOIN events e ON e.execution_id = l.id AND e.sequence = l.last`

// fillPage bounds the rows fillCatalog holds at once.
const fillPage = 1000

// fillCatalog finishes migration 11 inside its transaction: it decides the
// 'unsure' rows of sqlBackfillCatalog by reading their logs' status events
// from the end in Go (store.CatalogStatusOf), and sets the tenant of every
// log whose first event is EXECUTION_STARTED to store.TenantOf it, a page
// of rows at a time.
func fillCatalog(ctx context.Context, c *sql.Conn) error {
	for {
		ids, err := queryStrings(ctx, c, `SELECT execution_id FROM catalog WHERE status = 'unsure' LIMIT ?`, fillPage)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return fillTenants(ctx, c)
		}
		for _, id := range ids {
			change, err := prefixCatalog(connStatusReader(ctx, c, id), math.MaxInt64)
			if err == nil && change.Moved {
				_, err = c.ExecContext(ctx, sqlMoveEntry, string(change.Status), change.StatusAt, id)
			} else if err == nil {
				_, err = c.ExecContext(ctx, `UPDATE catalog SET status = 'pending', status_at = started_at WHERE execution_id = ?`, id)
			}
			if err != nil {
				return err
			}
		}
	}
}

// fillTenants sets the catalog's tenants from each log's first event.
func fillTenants(ctx context.Context, c *sql.Conn) error {
	const page = `SELECT k.execution_id, e.payload FROM catalog k
		JOIN events e ON e.execution_id = k.execution_id AND e.sequence = 0
		WHERE k.execution_id > ? AND e.event_type = 'EXECUTION_STARTED'
		ORDER BY k.execution_id LIMIT ?`
	type tenantOf struct{ id, tenant string }
	for after := ""; ; {
		rows, err := c.QueryContext(ctx, page, after, fillPage)
		if err != nil {
			return err
		}
		var found []tenantOf
		n := 0
		for rows.Next() {
			var id string
			var payload []byte
			if err := rows.Scan(&id, &payload); err != nil {
				return errors.Join(err, rows.Close())
			}
			n, after = n+1, id
			first := event.Envelope{Type: event.ExecutionStarted, Payload: json.RawMessage(payload)}
			if tenant := store.TenantOf(first); tenant != "" {
				found = append(found, tenantOf{id, tenant})
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, f := range found {
			if _, err := c.ExecContext(ctx, `UPDATE catalog SET tenant = ? WHERE execution_id = ?`, f.tenant, f.id); err != nil {
				return err
			}
		}
		if n < fillPage {
			return nil
		}
	}
}

// connStatusReader reads the status events of execID on c.
func connStatusReader(ctx context.Context, c *sql.Conn, execID string) statusReader {
	return func(bound int64) (event.Envelope, bool, error) {
		var e event.Envelope
		var payload []byte
		var meta sql.NullString
		err := c.QueryRowContext(ctx, sqlLastStatusEvent, execID, bound).Scan(&e.Sequence, &e.Type, &e.Timestamp, &payload, &meta)
		if errors.Is(err, sql.ErrNoRows) {
			return e, false, nil
		}
		if err != nil {
			return e, false, err
		}
		e.Payload = json.RawMessage(payload)
		if meta.Valid {
			if e.Metadata, err = decodeMetadata(meta.String); err != nil {
				return e, false, err
			}
		}
		return e, true, nil
	}
}

// queryStrings returns the first column of every row of q.
func queryStrings(ctx context.Context, c *sql.Conn, q string, args ...any) ([]string, error) {
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		out = append(out, s)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}
