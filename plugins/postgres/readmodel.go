package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/store"
)

// ReadModelStore keeps the read models of a DB and the watermarks of the
// projections that write them (migration 11), and implements
// store.ReadModelStore for every node sharing the schema.
//
// Apply is one transaction, durable before it returns, that takes its
// locks in one order: first the watermark's row (a conditional UPDATE from
// from, or, for the first step of a source, an INSERT … ON CONFLICT DO
// NOTHING), so of racing Applies of one step exactly one moves it and the
// others see its committed row and are refused; then the written rows that
// exist, FOR UPDATE in (kind, id) order, which are checked against the
// writes; then the inserts of the absent rows, in the same order, where a
// row a racing Apply inserted first conflicts, is locked and refuses the
// write. Two Applies writing the same row from different sources are
// serialized by its row lock (or its key), and the loser's version check
// reads the winner's commit. Any refusal rolls the transaction back:
// nothing is written. Rows live in read_models (fields as a JSON object
// beside the document), their index entries in read_model_fields, one per
// (kind, field name, value, id), which a Query with a Where walks in id
// order from its cursor. One from DB.ReadModelStore shares its DB, and
// Close only detaches it; one from OpenReadModelStore owns its DB, and
// Close closes it.
type ReadModelStore struct {
	view
}

var _ store.ReadModelStore = (*ReadModelStore)(nil)

// heldRow is a written row as the claim found it.
type heldRow struct {
	projection string
	version    int64
	fields     map[string]string
}

// rowKey is a row's key.
type rowKey struct{ kind, id string }

// Apply implements store.ReadModelStore: the call is checked by
// store.ValidateReadModelApply under the DB's limits, then run as one
// transaction (see ReadModelStore). A refusal writes nothing.
func (s *ReadModelStore) Apply(ctx context.Context, projection, source string, from, to int64, writes []store.ReadModelWrite) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateReadModelApply(projection, source, from, to, writes, s.db.opts.Limits); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sorted := store.SortReadModelWrites(writes)
	q := &s.db.q.rm
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlProjectionShared, projectionLockKey(s.db.schema, projection)); err != nil {
			return err
		}
		if err := s.moveWatermark(ctx, tx, projection, source, from, to); err != nil {
			return err
		}
		if len(sorted) == 0 {
			return nil
		}
		held, err := claimRows(ctx, tx, q, projection, sorted)
		if err != nil {
			return err
		}
		var plan writePlan
		for _, w := range sorted {
			h := held[rowKey{w.Row.Kind, w.Row.ID}]
			if err := store.CheckReadModelWrite(projection, w, h.projection, h.version); err != nil {
				return err
			}
			plan.add(w, h)
		}
		return plan.write(ctx, tx, q)
	})
	if err != nil && !isReadModelRefusal(err) {
		return s.readErr("apply read models", err)
	}
	return err
}

// The projection's lock: every Apply holds it shared for its transaction,
// Reset exclusively, so a Reset runs between Applies of its projection,
// never beside one.
const (
	sqlProjectionShared    = `SELECT pg_advisory_xact_lock_shared($1::bigint)`
	sqlProjectionExclusive = `SELECT pg_advisory_xact_lock($1::bigint)`
)

// projectionLockKey is the advisory lock key of a projection of a schema:
// a 64-bit hash of both. Two projections sharing a key only make a Reset
// of one wait for the Applies of the other.
func projectionLockKey(schema, projection string) int64 {
	h := fnv.New64a()
	h.Write([]byte("loom/readmodels/" + schema + "\x00" + projection))
	return int64(h.Sum64())
}

// isReadModelRefusal reports whether err is one of Apply's typed refusals.
func isReadModelRefusal(err error) bool {
	return errors.Is(err, store.ErrWatermarkConflict) || errors.Is(err, store.ErrReadModelVersionConflict) ||
		errors.Is(err, store.ErrReadModelOwned)
}

// moveWatermark is the compare-and-set of the watermark from from to to,
// inside tx; it returns *store.WatermarkConflictError with the committed
// watermark when another writer got there first.
func (s *ReadModelStore) moveWatermark(ctx context.Context, tx pgx.Tx, projection, source string, from, to int64) error {
	q := &s.db.q.rm
	var rows pgx.Rows
	var err error
	if from == store.NoWatermark {
		rows, err = tx.Query(ctx, q.watermarkInsert, projection, source, to)
	} else {
		rows, err = tx.Query(ctx, q.watermarkMove, projection, source, from, to)
	}
	if err != nil {
		return err
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(moved) == 1 {
		return err
	}
	actual := store.NoWatermark
	switch err := tx.QueryRow(ctx, q.watermark, projection, source).Scan(&actual); {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	}
	if err := store.CheckWatermark(projection, source, from, actual); err != nil {
		return err
	}
	// The watermark is at from now, but was not when the statement ran
	// (a Reset or another Apply in between): a conflict all the same.
	return &store.WatermarkConflictError{Projection: projection, Source: source, Expected: from, Actual: actual}
}

// claimRows claims every row of writes (the claim statement: the rows
// that exist locked, those that do not inserted), in key order, and
// returns the ones that existed, by key, as committed.
func claimRows(ctx context.Context, tx pgx.Tx, q *readModelQueries, projection string, writes []store.ReadModelWrite) (map[rowKey]heldRow, error) {
	n := len(writes)
	kinds, ids, fields, docs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, w := range writes {
		kinds[i], ids[i], fields[i], docs[i] = w.Row.Kind, w.Row.ID, "{}", ""
		if !w.Delete { // a delete's fields and doc are unchecked: never sent
			fields[i], docs[i] = store.ReadModelFieldsJSON(w.Row.Fields), string(w.Row.Doc)
		}
	}
	rows, err := tx.Query(ctx, q.claim, projection, kinds, ids, fields, docs)
	if err != nil {
		return nil, err
	}
	inserted := make(map[rowKey]bool, n)
	var k rowKey
	if _, err := pgx.ForEachRow(rows, []any{&k.kind, &k.id}, func() error { inserted[k] = true; return nil }); err != nil {
		return nil, err
	}
	var heldKinds, heldIDs []string
	for i := range writes {
		if !inserted[rowKey{kinds[i], ids[i]}] {
			heldKinds, heldIDs = append(heldKinds, kinds[i]), append(heldIDs, ids[i])
		}
	}
	held := make(map[rowKey]heldRow, len(heldKinds))
	if len(heldKinds) == 0 {
		return held, nil
	}
	if rows, err = tx.Query(ctx, q.held, heldKinds, heldIDs); err != nil {
		return nil, err
	}
	var h heldRow
	var text string
	_, err = pgx.ForEachRow(rows, []any{&k.kind, &k.id, &h.projection, &h.version, &text}, func() error {
		f, err := store.ParseReadModelFields(text)
		if err != nil {
			return fmt.Errorf("postgres: read model %q/%q: fields: %w", k.kind, k.id, err)
		}
		h.fields = f
		held[k] = h
		return nil
	})
	if err == nil && len(held) != len(heldKinds) {
		err = fmt.Errorf("postgres: %d claimed read models are neither inserted nor held", len(heldKinds)-len(held))
	}
	return held, err
}

// writePlan gathers the statements' arrays of an Apply whose checks
// passed, in key order: what the claim did not already write.
type writePlan struct {
	updateKinds, updateIDs, updateFields, updateDocs []string
	deleteKinds, deleteIDs                           []string
	post, unpost                                     fieldEntries
}

// fieldEntries are index entries, as the four arrays of (kind, name,
// value, id).
type fieldEntries struct{ kinds, names, values, ids []string }

func (f *fieldEntries) add(kind, name, value, id string) {
	f.kinds, f.names, f.values, f.ids = append(f.kinds, kind), append(f.names, name), append(f.values, value), append(f.ids, id)
}

// add plans write w over the row held (version 0 when the claim inserted
// it).
func (p *writePlan) add(w store.ReadModelWrite, held heldRow) {
	kind, id := w.Row.Kind, w.Row.ID
	after := w.Row.Fields
	switch {
	case w.Delete && held.version == 0: // the claim's placeholder
		p.deleteKinds, p.deleteIDs = append(p.deleteKinds, kind), append(p.deleteIDs, id)
		return
	case w.Delete:
		after = nil
		p.deleteKinds, p.deleteIDs = append(p.deleteKinds, kind), append(p.deleteIDs, id)
	case held.version == 0: // the claim inserted the row as written
	default:
		p.updateKinds, p.updateIDs = append(p.updateKinds, kind), append(p.updateIDs, id)
		p.updateFields, p.updateDocs = append(p.updateFields, store.ReadModelFieldsJSON(after)), append(p.updateDocs, string(w.Row.Doc))
	}
	before := held.fields
	for _, name := range store.SortedFieldNames(before) {
		if v, ok := after[name]; !ok || v != before[name] {
			p.unpost.add(kind, name, before[name], id)
		}
	}
	for _, name := range store.SortedFieldNames(after) {
		if v, ok := before[name]; !ok || v != after[name] {
			p.post.add(kind, name, after[name], id)
		}
	}
}

// write sends the planned updates, deletes and index changes in one batch.
func (p *writePlan) write(ctx context.Context, tx pgx.Tx, q *readModelQueries) error {
	b := &pgx.Batch{}
	if len(p.updateKinds) > 0 {
		b.Queue(q.update, p.updateKinds, p.updateIDs, p.updateFields, p.updateDocs)
	}
	if len(p.deleteKinds) > 0 {
		b.Queue(q.delete, p.deleteKinds, p.deleteIDs)
	}
	if len(p.unpost.kinds) > 0 {
		b.Queue(q.unpost, p.unpost.kinds, p.unpost.names, p.unpost.values, p.unpost.ids)
	}
	if len(p.post.kinds) > 0 {
		b.Queue(q.post, p.post.kinds, p.post.names, p.post.values, p.post.ids)
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// Watermark implements store.ReadModelStore.
func (s *ReadModelStore) Watermark(ctx context.Context, projection, source string) (int64, bool, error) {
	if err := s.check(); err != nil {
		return store.NoWatermark, false, err
	}
	if err := store.ValidateWatermarkKey(projection, source); err != nil {
		return store.NoWatermark, false, err
	}
	var seq int64
	switch err := s.db.pool.QueryRow(ctx, s.db.q.rm.watermark, projection, source).Scan(&seq); {
	case errors.Is(err, pgx.ErrNoRows):
		return store.NoWatermark, false, nil
	case err != nil:
		return store.NoWatermark, false, s.readErr("read watermark", err)
	}
	return seq, true, nil
}

// Watermarks implements store.ReadModelStore: a page of the watermarks key
// from after.
func (s *ReadModelStore) Watermarks(ctx context.Context, projection, after string, limit int) (store.WatermarkPage, error) {
	if err := s.check(); err != nil {
		return store.WatermarkPage{}, err
	}
	if err := store.ValidateProjection(projection); err != nil {
		return store.WatermarkPage{}, err
	}
	if err := store.ValidateReadModelCursor(after); err != nil {
		return store.WatermarkPage{}, err
	}
	limit = store.ReadModelPageLimit(limit)
	rows, err := s.db.pool.Query(ctx, s.db.q.rm.watermarks, projection, after, limit+1)
	if err != nil {
		return store.WatermarkPage{}, s.readErr("list watermarks", err)
	}
	page := store.WatermarkPage{Watermarks: []store.Watermark{}}
	w := store.Watermark{Projection: projection}
	if _, err := pgx.ForEachRow(rows, []any{&w.Source, &w.Sequence}, func() error {
		page.Watermarks = append(page.Watermarks, w)
		return nil
	}); err != nil {
		return store.WatermarkPage{}, s.readErr("list watermarks", err)
	}
	if len(page.Watermarks) > limit {
		page.Watermarks = page.Watermarks[:limit]
		page.Next = page.Watermarks[limit-1].Source
	}
	return page, nil
}

// Get implements store.ReadModelStore.
func (s *ReadModelStore) Get(ctx context.Context, kind, id string) (store.ReadModel, bool, error) {
	if err := s.check(); err != nil {
		return store.ReadModel{}, false, err
	}
	if err := store.ValidateReadModelKey(kind, id); err != nil {
		return store.ReadModel{}, false, err
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.rm.get, kind, id)
	if err != nil {
		return store.ReadModel{}, false, s.readErr("read read model", err)
	}
	got, err := scanReadModels(kind, rows)
	if err != nil {
		return store.ReadModel{}, false, s.readErr("read read model", err)
	}
	if len(got) == 0 {
		return store.ReadModel{}, false, nil
	}
	return got[0], true, nil
}

// Query implements store.ReadModelStore: with no Where, a walk of the rows
// key of the kind from q.After; with one, a walk of the read_model_fields
// key of its first pair from q.After, joined by key to the other pairs'
// entries and to the rows. It reads one row past the page to know whether
// another follows.
func (s *ReadModelStore) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	if err := s.check(); err != nil {
		return store.ReadModelPage{}, err
	}
	q, err := store.ValidateReadModelQuery(q)
	if err != nil {
		return store.ReadModelPage{}, err
	}
	var rows pgx.Rows
	if len(q.Where) == 0 {
		rows, err = s.db.pool.Query(ctx, s.db.q.rm.queryAll, q.Kind, q.After, q.Limit+1)
	} else {
		text, args := readModelQuerySQL(pgx.Identifier{s.db.schema}.Sanitize(), q)
		rows, err = s.db.pool.Query(ctx, text, args...)
	}
	if err != nil {
		return store.ReadModelPage{}, s.readErr("query read models", err)
	}
	got, err := scanReadModels(q.Kind, rows)
	if err != nil {
		return store.ReadModelPage{}, s.readErr("query read models", err)
	}
	page := store.ReadModelPage{Rows: got}
	if len(got) > q.Limit {
		page.Rows = got[:q.Limit]
		page.Next = got[q.Limit-1].ID
	}
	return page, nil
}

// scanReadModels reads rows of rmCols, of kind.
func scanReadModels(kind string, rows pgx.Rows) ([]store.ReadModel, error) {
	out := []store.ReadModel{}
	r := store.ReadModel{Kind: kind}
	var fields, doc string
	_, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Projection, &r.Version, &fields, &doc}, func() error {
		f, err := store.ParseReadModelFields(fields)
		if err != nil {
			return fmt.Errorf("fields of %q/%q: %w", kind, r.ID, err)
		}
		m := r
		m.Fields, m.Doc = f, []byte(doc)
		out = append(out, m)
		return nil
	})
	return out, err
}

// Reset implements store.ReadModelStore: in one transaction, with the
// projection's lock held exclusively, its rows are locked in key order,
// then its index entries, rows and watermarks deleted.
func (s *ReadModelStore) Reset(ctx context.Context, projection string) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateProjection(projection); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q := &s.db.q.rm
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlProjectionExclusive, projectionLockKey(s.db.schema, projection)); err != nil {
			return err
		}
		for _, stmt := range []string{q.resetLockRows, q.resetFields, q.resetRows, q.resetMarks} {
			if _, err := tx.Exec(ctx, stmt, projection); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.readErr("reset read models", err)
	}
	return nil
}

// Close detaches the store: later calls return store.ErrClosed. A store
// from OpenReadModelStore closes its DB; one from DB.ReadModelStore only
// detaches. A second Close returns nil.
func (s *ReadModelStore) Close() error { return s.close() }

// OpenReadModelStore is OpenEventStore for a ReadModelStore that owns its
// DB.
func OpenReadModelStore(ctx context.Context, opts Options) (*ReadModelStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ReadModelStore{view: view{db: db, owned: true}}, nil
}
