package postgres

import (
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// unfenced is the token of a plain Append: no acquired token is newer, so
// the fence condition of the append statement always holds.
const unfenced = math.MaxInt64

// appendBatch is one validated Append, already turned into the column
// arrays of the append statement by its caller, so the leader only queues it.
type appendBatch struct {
	execID     string
	workflowID string // the first non-empty one of the batch, if any
	expected   int64
	token      int64 // unfenced for a plain Append
	n          int   // events
	indexed    bool  // the execution is in the status index (not an inbox stream)
	status     store.StatusChange
	// cataloged: the execution is in the catalog (not an inbox stream).
	// A first batch carries its entry, a later one its change.
	cataloged bool
	entry     store.CatalogEntry
	move      store.CatalogChange

	sequences  []int64
	ids        []string
	workflows  []string
	types      []string
	timestamps []int64
	payloads   []string
	metadata   []*string // nil for an event without metadata (NULL)
}

// newAppendBatch encodes a batch that store.ValidateAppend accepted. It
// returns the batch and the bytes it carries (payloads and metadata).
func newAppendBatch(execID string, expected, token int64, events []event.Envelope) (*appendBatch, int, error) {
	n := len(events)
	b := &appendBatch{
		execID: execID, expected: expected, token: token, n: n,
		sequences: make([]int64, n), ids: make([]string, n), workflows: make([]string, n),
		types: make([]string, n), timestamps: make([]int64, n), payloads: make([]string, n),
		metadata: make([]*string, n), indexed: !store.IsInboxStream(execID),
	}
	if b.indexed {
		b.status = store.StatusChangeOf(expected, events)
	}
	size := 0
	for i, e := range events {
		if b.workflowID == "" {
			b.workflowID = e.WorkflowID
		}
		b.sequences[i], b.ids[i], b.workflows[i], b.types[i], b.timestamps[i] =
			e.Sequence, e.ID, e.WorkflowID, e.Type, e.Timestamp
		b.payloads[i] = string(e.PayloadOrNull())
		size += len(b.payloads[i])
		if e.Metadata != nil { // nil stays NULL, so nil and empty stay distinct
			m, err := encodeMetadata(e.Metadata)
			if err != nil {
				return nil, 0, err
			}
			b.metadata[i] = &m
			size += len(m)
		}
	}
	if b.cataloged = b.indexed; b.cataloged {
		b.move = store.CatalogChangeOf(events)
		if expected == 0 {
			// The workflow id the statement gives the log's executions
			// row ($2).
			b.entry = store.EntryOf(execID, events[0])
			b.entry.WorkflowID = b.workflowID
			b.entry = b.entry.Apply(b.move)
		}
	}
	return b, size, nil
}

// queue adds b's append statement to a batch: the variant for a first or
// a later batch, by what b does to the status index and the catalog, with
// its parameters.
func (b *appendBatch) queue(pb *pgx.Batch, q *queries, channel string) {
	op, extra := b.indexOp()
	cat, catExtra := b.catalogOp()
	variants := &q.appendNext
	if b.expected == 0 {
		variants = &q.appendFirst
	}
	args := []any{b.execID, b.workflowID, b.expected, int64(b.n), b.token,
		b.sequences, b.ids, b.workflows, b.types, b.timestamps, b.payloads, b.metadata, channel}
	args = append(append(args, extra...), catExtra...)
	pb.Queue(variants[op][cat], args...)
}

// catalogOp is what b does to the catalog, and the parameters that part
// of the statement takes: a first batch records the entry, a later one
// moves it only when it moves the status.
func (b *appendBatch) catalogOp() (catalogOp, []any) {
	switch e := b.entry; {
	case !b.cataloged:
		return catalogKeep, nil
	case b.expected == 0:
		return catalogCreate, []any{e.Tenant, string(e.Status), e.StartedAt, e.StatusAt}
	case b.move.Moved:
		return catalogMove, []any{string(b.move.Status), b.move.StatusAt}
	}
	return catalogKeep, nil
}

// indexOp is what b does to the status index, and the parameters that
// part of the statement takes.
func (b *appendBatch) indexOp() (indexOp, []any) {
	if !b.indexed {
		return indexKeep, nil
	}
	c := b.status
	switch {
	case c.Move == store.StatusEnded:
		return indexEnd, nil
	case c.Move != store.StatusSet:
		return indexKeep, nil
	case c.Status == store.UnfinishedContinued:
		return indexContinued, []any{c.Sequence, c.Timestamp, c.Next}
	}
	return indexSet, []any{string(c.Status), c.Sequence, c.Timestamp}
}

// appendState is what a refused append is judged by: the execution's
// length and fence, read after the refusal.
type appendState struct {
	length, fence int64
}

// refusal turns a refused batch and the state read after it into its typed
// error. A fence newer than the batch's token is reported first, as the
// driver that holds it would also be refused a retry; otherwise the log's
// length. It returns nil when the state would accept the batch now (the
// log was deleted and regrown to the expected length since the refusal), so
// the writer tries the batch again.
func (b *appendBatch) refusal(st appendState) error {
	if st.fence > b.token {
		return &store.FencedError{ExecutionID: b.execID, Token: b.token, Current: st.fence}
	}
	if st.length != b.expected {
		return b.conflictAt(st.length)
	}
	return nil
}

// conflictAt is the refusal of b by a log of actual events.
func (b *appendBatch) conflictAt(actual int64) error {
	return &store.SequenceConflictError{ExecutionID: b.execID, Expected: b.expected, Actual: actual}
}
