// Package projection folds executions' events into read models: rows in a
// store.ReadModelStore that screens and queries read, kept up to date from
// the log.
//
// A Projection is a Go fold: Handle sees each event of each execution it
// selects, in sequence order, with a Tx that reads the current rows and
// buffers its writes. The Runner applies one execution's new events at a
// time as one store.ReadModelStore Apply, which moves the projection's
// watermark for that execution in the same transaction (a monotonic
// compare-and-set): an event is folded into the rows exactly once, whatever
// crashes, and several processes may run the same projection without locks
// — the one that loses a race finds the watermark moved and skips what the
// winner folded.
//
// A read model is a cache of the log, never an authority: Rebuild resets
// the projection and folds every execution again from its first event, and
// gives the same rows (Handle must be a function of the rows and the event
// only: no clock, no randomness, no map order; the event's recorded
// timestamp is data).
//
// WatchQuery keeps a read-model query live: it delivers the page as it
// stands, then again each time it changes (woken at once by a Runner of
// this process, and by polling for other writers), each page with a
// digest a client can hold across a reconnect (LiveOptions.Held) so it is
// never sent one page twice. A Handle that panics is isolated: the panic
// is a *PanicError naming the projection and the event, and nothing of
// that execution's batch is written.
//
// The log's compacted history is not re-read: a projection catching up an
// execution compacted past its watermark is refused with
// *CompactedSourceError (run projections before compaction, or rebuild
// from the archive).
package projection

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Projection is one read model's fold over the log.
type Projection struct {
	// Name identifies the projection: its watermarks and rows are its own
	// in the ReadModelStore. Required; an event id (event.ValidateID).
	Name string
	// Flows, when set, selects the executions of these flows (the flow
	// their first event names); empty selects every execution.
	Flows []string
	// Handle folds one event into the rows. An error stops the catch-up of
	// that execution (nothing of its batch is written) and is returned
	// from CatchUp.
	Handle func(tx *Tx, e event.Envelope) error
}

// Runner keeps projections caught up with an event store.
type Runner struct {
	events      store.EventStore
	models      store.ReadModelStore
	projections []Projection
	// BatchEvents bounds the events folded into one Apply (default 256).
	batch int
	// changes wakes live queries after an Apply that wrote rows.
	changes *changes
}

// MaxRetries bounds the re-folds of one batch after a row version conflict
// (another source's Apply changed a row this batch read).
const MaxRetries = 64

// New returns a Runner of projections over events, writing into models. It
// refuses a projection without a name or a Handle, and two of one name.
func New(events store.EventStore, models store.ReadModelStore, projections ...Projection) (*Runner, error) {
	if events == nil || models == nil {
		return nil, errors.New("projection: New needs an event store and a read-model store")
	}
	seen := map[string]bool{}
	for i, p := range projections {
		if err := event.ValidateID("projection name", p.Name); err != nil {
			return nil, fmt.Errorf("projection %d: %w", i, err)
		}
		if p.Handle == nil {
			return nil, fmt.Errorf("projection %q: Handle is required", p.Name)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("projection %q: the name is used twice", p.Name)
		}
		seen[p.Name] = true
	}
	return &Runner{events: events, models: models, projections: slices.Clone(projections), batch: 256, changes: &changes{}}, nil
}

// Result says what a CatchUp folded.
type Result struct {
	// Events folded per projection, and executions caught up.
	Events     map[string]int `json:"events"`
	Executions int            `json:"executions"`
}

// CatchUp folds, for every projection, every execution's events past its
// watermark, an execution at a time. It pages the store's listing (every
// execution, O(executions) plus the new events) and is safe to run
// concurrently with itself in other processes.
func (r *Runner) CatchUp(ctx context.Context) (Result, error) {
	res := Result{Events: map[string]int{}}
	marks, err := r.allWatermarks(ctx)
	if err != nil {
		return res, err
	}
	for after := ""; ; {
		page, err := r.events.ListExecutions(ctx, after, 256)
		if err != nil {
			return res, err
		}
		for _, x := range page.Executions {
			if store.IsInboxStream(x.ExecutionID) || x.Length == 0 {
				continue
			}
			touched := false
			for _, p := range r.projections {
				if !p.selects(x.WorkflowID) {
					continue
				}
				w, ok := marks[p.Name][x.ExecutionID]
				if !ok {
					w = store.NoWatermark
				}
				if w >= x.Length-1 {
					continue
				}
				n, err := r.catchUpOne(ctx, p, x.ExecutionID, w)
				if err != nil {
					return res, err
				}
				res.Events[p.Name] += n
				touched = touched || n > 0
			}
			if touched {
				res.Executions++
			}
		}
		if after = page.Next; after == "" {
			return res, nil
		}
	}
}

// CatchUpExecution folds one execution's new events into every projection
// that selects it: for an app that knows what changed (a hook after a
// commit), so readers need not wait for the next CatchUp.
func (r *Runner) CatchUpExecution(ctx context.Context, executionID string) (int, error) {
	head, err := store.ReadRange(ctx, r.events, executionID, 0, 1)
	if err != nil || len(head) == 0 {
		return 0, err
	}
	total := 0
	for _, p := range r.projections {
		if !p.selects(head[0].WorkflowID) {
			continue
		}
		w, _, err := r.models.Watermark(ctx, p.Name, executionID)
		if err != nil {
			return total, err
		}
		n, err := r.catchUpOne(ctx, p, executionID, w)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Rebuild resets projection name (its rows and watermarks) and folds every
// execution again from its first event.
func (r *Runner) Rebuild(ctx context.Context, name string) (Result, error) {
	i := slices.IndexFunc(r.projections, func(p Projection) bool { return p.Name == name })
	if i < 0 {
		return Result{}, fmt.Errorf("projection: no projection %q in this runner", name)
	}
	if err := r.models.Reset(ctx, name); err != nil {
		return Result{}, err
	}
	r.changed()
	one := &Runner{events: r.events, models: r.models, projections: r.projections[i : i+1], batch: r.batch, changes: r.changes}
	return one.CatchUp(ctx)
}

// Query reads rows of the runner's read-model store.
func (r *Runner) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	return r.models.Query(ctx, q)
}

// CompactedSourceError refuses to catch up an execution whose log was
// compacted past the projection's watermark: the events it has not folded
// are in the archive, not the log.
type CompactedSourceError struct {
	Projection, ExecutionID string
	Watermark, Through      int64
}

func (e *CompactedSourceError) Error() string {
	return fmt.Sprintf("projection %q: %q is compacted through #%d and the projection has folded only through #%d: run projections before compacting, or rebuild from the archive",
		e.Projection, e.ExecutionID, e.Through, e.Watermark)
}

// catchUpOne folds executionID's events after w into p, a batch per Apply,
// and returns the events folded. A watermark moved by another runner is
// taken as it is: what it folded is not folded again.
func (r *Runner) catchUpOne(ctx context.Context, p Projection, executionID string, w int64) (int, error) {
	folded, size := 0, r.batch
	for retries := 0; ; {
		evs, err := store.ReadRange(ctx, r.events, executionID, w+1, w+1+int64(size))
		if err != nil {
			return folded, err
		}
		if len(evs) == 0 {
			return folded, nil
		}
		if evs[0].Sequence != w+1 {
			return folded, &CompactedSourceError{Projection: p.Name, ExecutionID: executionID, Watermark: w, Through: evs[0].Sequence - 1}
		}
		tx := &Tx{ctx: ctx, models: r.models, projection: p.Name, pending: map[rowKey]*pendingWrite{}}
		for _, e := range evs {
			if err := p.handle(tx, executionID, e); err != nil {
				var pe *PanicError
				if errors.As(err, &pe) {
					return folded, err
				}
				return folded, fmt.Errorf("projection %q: %s #%d (%s): %w", p.Name, executionID, e.Sequence, e.Type, err)
			}
			if tx.err != nil {
				return folded, tx.err
			}
		}
		to := evs[len(evs)-1].Sequence
		writes := tx.writes()
		if len(writes) > store.MaxReadModelWrites && size > 1 {
			size /= 2 // too many rows for one Apply: fold fewer events at a time
			continue
		}
		err = r.models.Apply(ctx, p.Name, executionID, w, to, writes)
		var wc *store.WatermarkConflictError
		var vc *store.ReadModelVersionConflictError
		switch {
		case err == nil:
			folded += len(evs)
			w = to
			retries = 0
			if len(writes) > 0 {
				r.changed()
			}
		case errors.As(err, &wc):
			// Another runner folded (part of) this: go on from where it is.
			if w, _, err = r.models.Watermark(ctx, p.Name, executionID); err != nil {
				return folded, err
			}
		case errors.As(err, &vc) && retries < MaxRetries:
			retries++ // a row changed under the batch: fold it again on the new rows
		default:
			return folded, fmt.Errorf("projection %q: applying %s #%d..#%d: %w", p.Name, executionID, w+1, to, err)
		}
	}
}

// PanicError is a Handle that panicked: the panic is recovered, nothing of
// its batch is written (the rows and the watermark stay where they were),
// and the log is never touched. Fix the projection, then catch up again;
// the events are folded from the watermark.
type PanicError struct {
	Projection, ExecutionID string
	Sequence                int64
	Type                    string
	Value                   any
	Stack                   []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("projection %q panicked on %s #%d (%s): %v; nothing of its batch was written", e.Projection, e.ExecutionID, e.Sequence, e.Type, e.Value)
}

// handle calls Handle, turning a panic into a *PanicError.
func (p Projection) handle(tx *Tx, executionID string, e event.Envelope) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Projection: p.Name, ExecutionID: executionID, Sequence: e.Sequence, Type: e.Type, Value: v, Stack: debug.Stack()}
		}
	}()
	return p.Handle(tx, e)
}

// allWatermarks reads every projection's watermarks, by source.
func (r *Runner) allWatermarks(ctx context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, p := range r.projections {
		m := map[string]int64{}
		for after := ""; ; {
			page, err := r.models.Watermarks(ctx, p.Name, after, store.MaxReadModelQueryLimit)
			if err != nil {
				return nil, err
			}
			for _, w := range page.Watermarks {
				m[w.Source] = w.Sequence
			}
			if after = page.Next; after == "" {
				break
			}
		}
		out[p.Name] = m
	}
	return out, nil
}

func (p Projection) selects(flowID string) bool {
	return len(p.Flows) == 0 || slices.Contains(p.Flows, flowID)
}

// rowKey is a row's key.
type rowKey struct{ kind, id string }

// pendingWrite is a row as the batch has left it.
type pendingWrite struct {
	row     store.ReadModel
	present bool  // as the batch sees it
	expect  int64 // the version read from the store (0: absent)
	written bool
}

// Tx is what a Handle reads and writes: the rows as the store holds them,
// with the batch's own writes on top. Its writes reach the store with the
// watermark, in one Apply.
type Tx struct {
	ctx        context.Context
	models     store.ReadModelStore
	projection string
	pending    map[rowKey]*pendingWrite
	err        error
}

// Get returns the row (kind, id) as the batch sees it.
func (t *Tx) Get(kind, id string) (store.ReadModel, bool) {
	p := t.entry(kind, id)
	if p == nil || !p.present {
		return store.ReadModel{}, false
	}
	return p.row, true
}

// Put stores row (its Kind and ID are the key).
func (t *Tx) Put(row store.ReadModel) {
	if p := t.entry(row.Kind, row.ID); p != nil {
		p.row, p.present, p.written = row, true, true
	}
}

// Delete removes the row (kind, id).
func (t *Tx) Delete(kind, id string) {
	if p := t.entry(kind, id); p != nil {
		p.present, p.written = false, true
	}
}

// entry is the batch's view of (kind, id), read from the store the first
// time; nil after a read failed (the batch then fails).
func (t *Tx) entry(kind, id string) *pendingWrite {
	k := rowKey{kind, id}
	if p, ok := t.pending[k]; ok {
		return p
	}
	row, ok, err := t.models.Get(t.ctx, kind, id)
	if err != nil {
		t.fail(err)
		return nil
	}
	if ok && row.Projection != t.projection {
		t.fail(fmt.Errorf("projection %q: the row %s/%s belongs to projection %q", t.projection, kind, id, row.Projection))
		return nil
	}
	p := &pendingWrite{row: row, present: ok}
	if ok {
		p.expect = row.Version
	}
	t.pending[k] = p
	return p
}

func (t *Tx) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// writes are the batch's writes in key order (deterministic), each
// expecting the version the batch read.
func (t *Tx) writes() []store.ReadModelWrite {
	keys := make([]rowKey, 0, len(t.pending))
	for k := range t.pending { //loom:sorted below
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rowKey) int {
		if c := strings.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	var out []store.ReadModelWrite
	for _, k := range keys {
		p := t.pending[k]
		switch {
		case !p.written, !p.present && p.expect == 0:
			continue // only read, or written and removed again
		case !p.present:
			out = append(out, store.ReadModelWrite{Row: store.ReadModel{Kind: k.kind, ID: k.id}, ExpectVersion: p.expect, Delete: true})
		default:
			row := p.row
			row.Kind, row.ID = k.kind, k.id
			out = append(out, store.ReadModelWrite{Row: row, ExpectVersion: p.expect})
		}
	}
	return out
}
