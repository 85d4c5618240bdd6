package postgres

import (
	"context"
	"encoding/json"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// sqlBackfillCatalog fills the catalog table of a schema written before it
// existed, in SQL, one row per log that is not an inbox stream: the
// workflow id of its executions row, started_at from its first event, and
// the status of its last status-moving event by store.CatalogStatusOf's
// rule (a backward scan of the events key per log, stopping at the
// first): STARTED and RESUMED set running, SUSPENDED suspended, COMPLETED,
// FAILED and CANCELLED their own, a kernel-stamped CONTINUED (metadata
// kernel: true) continued; a log with none is pending at its first event.
// A CONTINUED whose metadata holds a \u0000 or surrogate escape, which
// PostgreSQL's json refuses to de-escape, may or may not be stamped: its
// row is marked 'unsure', and fillCatalog, in the same transaction, decides
// it in Go along with every tenant (which SQL cannot read as
// store.TenantOf does).
const sqlBackfillCatalog = `INSERT INTO {s}.catalog (execution_id, workflow_id, tenant, status, started_at, status_at)
	SELECT x.execution_id, x.workflow_id, '',
		CASE
			WHEN l.event_type IS NULL THEN 'pending'
			WHEN l.event_type IN ('EXECUTION_STARTED', 'EXECUTION_RESUMED') THEN 'running'
			WHEN l.event_type = 'EXECUTION_SUSPENDED' THEN 'suspended'
			WHEN l.event_type = 'EXECUTION_COMPLETED' THEN 'completed'
			WHEN l.event_type = 'EXECUTION_FAILED' THEN 'failed'
			WHEN l.event_type = 'EXECUTION_CANCELLED' THEN 'cancelled'
			WHEN l.unsure THEN 'unsure'
			ELSE 'continued'
		END,
		f.timestamp_ms, COALESCE(l.timestamp_ms, f.timestamp_ms)
	FROM {s}.executions x
	JOIN {s}.events f ON f.execution_id = x.execution_id AND f.sequence = 0
	LEFT JOIN LATERAL (
		SELECT e.event_type, e.timestamp_ms, e.metadata ~ '\\u(0000|[dD][89abAB])' AS unsure
		FROM {s}.events e
		WHERE e.execution_id = x.execution_id AND (
			e.event_type IN ('EXECUTION_STARTED', 'EXECUTION_SUSPENDED', 'EXECUTION_RESUMED',
				'EXECUTION_COMPLETED', 'EXECUTION_FAILED', 'EXECUTION_CANCELLED')
			OR e.event_type = 'EXECUTION_CONTINUED' AND CASE
				WHEN e.metadata IS NULL THEN false
				WHEN e.metadata ~ '\\u(0000|[dD][89abAB])' THEN true
				ELSE (e.metadata::json -> 'kernel')::text = 'true'
			END)
		ORDER BY e.sequence DESC LIMIT 1
	) l ON true
	WHERE x.length > 0 AND left(x.execution_id, 15) <> '__loom_inbox__:'`

// fillPage bounds the rows fillCatalog holds at once.
const fillPage = 1000

// fillCatalog finishes migration 12 inside its transaction, in the schema
// s (quoted): it decides the 'unsure' rows of sqlBackfillCatalog by reading
// their logs' status events from the end in Go (store.CatalogStatusOf),
// and sets the tenant of every log whose first event is EXECUTION_STARTED
// to store.TenantOf it, a page of rows at a time. It ends with ANALYZE, so
// the planner knows the filled table from the first search on (it would
// otherwise guess each filter's share, and sort what a bitmap scan found,
// until autovacuum analyzes it).
func fillCatalog(ctx context.Context, tx pgx.Tx, s string) error {
	unsure := strings.ReplaceAll(`SELECT execution_id FROM {s}.catalog WHERE status = 'unsure' LIMIT $1`, "{s}", s)
	move := strings.ReplaceAll(`UPDATE {s}.catalog SET status = $2,
		status_at = CASE WHEN $2 = 'pending' THEN started_at ELSE $3 END WHERE execution_id = $1`, "{s}", s)
	last := lastStatusEventSQL(s)
	for {
		rows, err := tx.Query(ctx, unsure, fillPage)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			change, err := prefixCatalog(txStatusReader(ctx, tx, last, id), math.MaxInt64)
			if err != nil {
				return err
			}
			status := store.CatalogPending
			if change.Moved {
				status = change.Status
			}
			if _, err := tx.Exec(ctx, move, id, string(status), change.StatusAt); err != nil {
				return err
			}
		}
	}
	if err := fillTenants(ctx, tx, s); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `ANALYZE `+s+`.catalog`)
	return err
}

// fillTenants sets the catalog's tenants from each log's first event.
func fillTenants(ctx context.Context, tx pgx.Tx, s string) error {
	page := strings.ReplaceAll(`SELECT k.execution_id, e.payload FROM {s}.catalog k
		JOIN {s}.events e ON e.execution_id = k.execution_id AND e.sequence = 0
		WHERE k.execution_id > $1 AND e.event_type = 'EXECUTION_STARTED'
		ORDER BY k.execution_id LIMIT $2`, "{s}", s)
	set := strings.ReplaceAll(`UPDATE {s}.catalog k SET tenant = u.tenant
		FROM unnest($1::text[], $2::text[]) AS u(id, tenant) WHERE k.execution_id = u.id`, "{s}", s)
	for after := ""; ; {
		rows, err := tx.Query(ctx, page, after, fillPage)
		if err != nil {
			return err
		}
		var ids, tenants []string
		var id string
		var payload []byte
		n := 0
		_, err = pgx.ForEachRow(rows, []any{&id, &payload}, func() error {
			n, after = n+1, id
			first := event.Envelope{Type: event.ExecutionStarted, Payload: json.RawMessage(payload)}
			if tenant := store.TenantOf(first); tenant != "" {
				ids, tenants = append(ids, id), append(tenants, tenant)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := tx.Exec(ctx, set, ids, tenants); err != nil {
				return err
			}
		}
		if n < fillPage {
			return nil
		}
	}
}
