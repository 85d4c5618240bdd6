package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loom-kernel/loom/internal/groupcommit"
)

// commitGroup commits the batches of g in ONE transaction: their append
// statements go out as one pipelined pgx.Batch, which PostgreSQL runs as
// an implicit transaction ending at the batch's single Sync — one round
// trip and one commit (one WAL flush, one NOTIFY queue lock) for the group.
//
// A batch refused by its expected length or its fence inserts nothing and
// returns no row, without an error, so it never aborts its neighbours; its
// caller gets the typed refusal (see judge). If a statement fails instead
// (PostgreSQL refused a row), the whole transaction is rolled back by the
// server and each batch is retried alone, so one bad batch fails only its
// own caller. If the connection fails while the outcome is in doubt, every
// caller of the group gets an error matching ErrOutcomeUnknown.
func (w *writer) commitGroup(conn *pgx.Conn, l *groupcommit.Leadership[job], g []*request) {
	pb := &pgx.Batch{}
	for _, r := range g {
		r.Item.batch.queue(pb, &w.db.q, w.db.channel)
	}
	claimed, err := sendGroup(conn, pb, len(g))
	switch {
	case err != nil && notCommitted(err) && len(g) > 1:
		for i, r := range g {
			if conn.IsClosed() {
				l.Retry(g[i:]...)
				return
			}
			w.commitGroup(conn, l, []*request{r})
		}
		return
	case err != nil && notCommitted(err):
		g[0].Finish(w.db.readErr("append to "+strconv.Quote(g[0].Item.batch.execID), err))
		return
	case err != nil:
		err = outcomeUnknown(err)
		for _, r := range g {
			r.Finish(err)
		}
		return
	}
	var refused []*request
	accepted := 0
	for i, r := range g {
		if !claimed[i] {
			refused = append(refused, r)
			continue
		}
		accepted++
		w.counters.batches.Add(1)
		w.counters.events.Add(int64(r.Item.batch.n))
	}
	if accepted > 0 {
		w.counters.txs.Add(1)
	}
	for i, r := range g {
		if claimed[i] {
			r.Finish(nil)
			w.db.wake.Notify(r.Item.batch.execID)
		}
	}
	if len(refused) > 0 {
		w.judge(conn, l, refused)
	}
}

// sendGroup sends pb and reads one result per statement: whether the
// append claimed its row (one row returned) or was refused (none).
func sendGroup(conn *pgx.Conn, pb *pgx.Batch, n int) ([]bool, error) {
	br := conn.SendBatch(context.Background(), pb)
	claimed := make([]bool, n)
	var first error
	for i := range n {
		tag, err := br.Exec()
		if err != nil {
			first = err
			break
		}
		claimed[i] = tag.RowsAffected() == 1
	}
	// Close reads to the end of the pipeline: only then is the implicit
	// transaction committed. After a failed statement it repeats that
	// statement's error, which is reported once.
	switch cerr := br.Close(); {
	case first == nil:
		first = cerr
	case cerr != nil && cerr != first:
		first = errors.Join(first, cerr)
	}
	return claimed, first
}

// notCommitted reports whether err proves the transaction did not commit:
// nothing was sent (pgconn.SafeToRetry), or the server answered with an
// ERROR, after which it rolls the implicit transaction back. A FATAL or
// PANIC (the server ended the session, possibly after the commit) and a
// broken connection leave the outcome in doubt.
func notCommitted(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	return severity == "ERROR"
}

// judge reads the state of the executions whose batches were refused and
// gives each caller its typed error (appendBatch.refusal). A batch the
// state would now accept — its log was deleted and regrown to the expected
// length since — is tried again, at most maxRechecks times, and then
// refused with the length read.
func (w *writer) judge(conn *pgx.Conn, l *groupcommit.Leadership[job], refused []*request) {
	ids := make([]string, len(refused))
	for i, r := range refused {
		ids[i] = r.Item.batch.execID
	}
	states, err := readAppendStates(conn, w.db.q.appendState, ids)
	if err != nil {
		err = fmt.Errorf("postgres: append refused, and reading why failed: %w", w.db.readErr("read log lengths", err))
		for _, r := range refused {
			r.Finish(err)
		}
		return
	}
	for _, r := range refused {
		st := states[r.Item.batch.execID]
		err := r.Item.batch.refusal(st)
		if err == nil && r.Item.rechecks < maxRechecks {
			r.Item.rechecks++
			l.Retry(r)
			continue
		}
		if err == nil {
			err = r.Item.batch.conflictAt(st.length)
		}
		r.Finish(err)
	}
}

// readAppendStates returns the length and fence of each execution of ids
// that has a row; one missing has length 0 and no fence.
func readAppendStates(conn *pgx.Conn, sql string, ids []string) (map[string]appendState, error) {
	rows, err := conn.Query(context.Background(), sql, ids)
	if err != nil {
		return nil, err
	}
	states := make(map[string]appendState, len(ids))
	var id string
	var st appendState
	_, err = pgx.ForEachRow(rows, []any{&id, &st.length, &st.fence}, func() error {
		states[id] = st
		return nil
	})
	return states, err
}
