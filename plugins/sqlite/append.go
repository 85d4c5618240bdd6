package sqlite

import (
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// eventColumns is the column count of one events row, in insert order.
const eventColumns = 8

// appendBatch is one validated Append, already turned into column values by
// its caller so the leader only binds them.
type appendBatch struct {
	execID     string
	workflowID string // the first non-empty one of the batch, if any
	expected   int64
	fenced     bool
	token      int64
	n          int   // events
	vals       []any // eventColumns values per event
	indexed    bool  // the execution is in the status index (not an inbox stream)
	status     store.StatusChange
	// cataloged: the execution is in the catalog (not an inbox stream).
	// A first batch carries its entry, a later one its change.
	cataloged bool
	entry     store.CatalogEntry
	move      store.CatalogChange
}

// newAppendBatch encodes a batch that store.ValidateAppend accepted. It
// returns the batch and the bytes it carries (payloads and metadata).
func newAppendBatch(execID string, expected int64, events []event.Envelope) (*appendBatch, int) {
	b := &appendBatch{execID: execID, expected: expected, n: len(events),
		vals: make([]any, 0, eventColumns*len(events)), indexed: !store.IsInboxStream(execID)}
	if b.indexed {
		b.status = store.StatusChangeOf(expected, events)
	}
	size := 0
	for _, e := range events {
		if b.workflowID == "" {
			b.workflowID = e.WorkflowID
		}
		var n int
		b.vals, n = appendEventValues(b.vals, execID, e)
		size += n
	}
	if b.cataloged = b.indexed; b.cataloged {
		b.move = store.CatalogChangeOf(events)
		if expected == 0 {
			// The workflow id the log's executions row gets, which
			// ListExecutions reports.
			b.entry = store.EntryOf(execID, events[0])
			b.entry.WorkflowID = b.workflowID
			b.entry = b.entry.Apply(b.move)
		}
	}
	return b, size
}

// appendEventValues appends the eventColumns values of e, stored under
// execID, to vals, and returns them with the bytes of payload and metadata.
func appendEventValues(vals []any, execID string, e event.Envelope) ([]any, int) {
	payload := string(e.PayloadOrNull())
	size := len(payload)
	var meta any // NULL for a nil map, so nil and empty stay distinct
	if e.Metadata != nil {
		m := encodeMetadata(e.Metadata)
		meta = m
		size += len(m)
	}
	return append(vals, execID, e.Sequence, e.ID, e.WorkflowID, e.Type, e.Timestamp, payload, meta), size
}

// Writer-side statements.
const (
	sqlFenceToken = `SELECT token FROM fences WHERE execution_id = ?`
	// sqlLastSequence is one seek to the end of the log's primary-key range.
	sqlLastSequence = `SELECT MAX(sequence) FROM events WHERE execution_id = ?`
	sqlCreateLog    = `INSERT INTO executions (execution_id, workflow_id) VALUES (?, ?) ON CONFLICT (execution_id) DO NOTHING`
	insertEventHead = `INSERT INTO events (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata) VALUES `
)

// storedLength returns the number of events of execID, read inside the open
// transaction.
func storedLength(c *rawConn, execID string) (int64, error) {
	row, _, err := c.queryRow(sqlLastSequence, execID)
	if err != nil || row[0] == nil {
		return 0, err
	}
	last, ok := row[0].(int64)
	if !ok {
		return 0, fmt.Errorf("sqlite: last sequence of %q is %T, not an integer", execID, row[0])
	}
	return last + 1, nil
}

// claim checks b's fence and expected length inside the open transaction.
// The length comes from pending (the lengths batches accepted earlier in the
// same group will leave, since rows are inserted only after every claim),
// else from the writer's lengthCache, else from the log itself. It returns
// the typed refusal (nothing changed), or an error for a failed statement.
// The first batch of a log also records it in executions, for listing.
// An accepted batch changes the status index (indexChange) and the
// catalog (catalogWrite) with it.
func claim(c *rawConn, b *appendBatch, pending map[string]int64) (refusal, err error) {
	if b.fenced {
		cur, found, err := c.queryInt64(sqlFenceToken, b.execID)
		if err != nil {
			return nil, err
		}
		if found && cur > b.token {
			return &store.FencedError{ExecutionID: b.execID, Token: b.token, Current: cur}, nil
		}
	}
	actual, ok := pending[b.execID]
	if !ok {
		actual, ok = c.lengths.get(b.execID)
	}
	if !ok {
		if actual, err = storedLength(c, b.execID); err != nil {
			return nil, err
		}
	}
	if actual != b.expected {
		return &store.SequenceConflictError{ExecutionID: b.execID, Expected: b.expected, Actual: actual}, nil
	}
	if b.expected == 0 {
		if _, err := c.exec(sqlCreateLog, b.execID, b.workflowID); err != nil {
			return nil, err
		}
	}
	if b.indexed {
		if err := indexChange(c, b.execID, b.expected == 0, b.status); err != nil {
			return nil, err
		}
	}
	if b.cataloged {
		if err := catalogWrite(c, b); err != nil {
			return nil, err
		}
	}
	pending[b.execID] = b.expected + int64(b.n)
	return nil, nil
}

// Multi-row inserts: a chunk holds a power of two of rows, at most
// maxChunkRows (512 variables, far below SQLite's 32 766) and, past one row,
// at most maxChunkBytes of payload, so the driver's copy of a chunk stays
// small while most rows share a statement.
const (
	maxChunkRows  = 64
	maxChunkBytes = 1 << 20
)

// insertSQL[k] inserts 1<<k rows into events.
var insertSQL = multiRowSQL(insertEventHead, "")

// multiRowSQL returns the statements head VALUES … tail of 1, 2, 4, …
// maxChunkRows rows of eventColumns values.
func multiRowSQL(head, tail string) []string {
	var out []string
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", eventColumns), ", ") + ")"
	for n := 1; n <= maxChunkRows; n *= 2 {
		out = append(out, head+strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")+tail)
	}
	return out
}

// insertEvents writes the events of batches with as few statements as the
// chunk limits allow.
func insertEvents(c *rawConn, batches []*appendBatch) error {
	var rows [][]any // one slice of eventColumns values per row
	for _, b := range batches {
		for i := 0; i < b.n; i++ {
			rows = append(rows, b.vals[i*eventColumns:(i+1)*eventColumns])
		}
	}
	return insertRows(c, insertSQL, rows)
}

// insertRows writes rows of eventColumns values with the statements of
// multiRowSQL, as few as the chunk limits allow.
func insertRows(c *rawConn, stmts []string, rows [][]any) error {
	for len(rows) > 0 {
		k := chunkLog2(rows)
		n := 1 << k
		args := c.args[:0]
		for _, row := range rows[:n] {
			for _, v := range row {
				args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: v})
			}
		}
		c.args = args
		if _, err := c.execNamed(stmts[k], args); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// chunkLog2 picks the size of the next chunk: the largest power of two
// that fits the rows left, maxChunkRows and maxChunkBytes.
func chunkLog2(rows [][]any) int {
	k := 0
	for 1<<(k+1) <= len(rows) && 1<<(k+1) <= maxChunkRows {
		k++
	}
	for k > 0 && chunkBytes(rows[:1<<k]) > maxChunkBytes {
		k--
	}
	return k
}

func chunkBytes(rows [][]any) int {
	n := 0
	for _, r := range rows {
		n += len(r[6].(string))
		if m, ok := r[7].(string); ok {
			n += len(m)
		}
	}
	return n
}
