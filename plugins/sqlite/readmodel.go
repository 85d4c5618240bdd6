package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/store"
)

// ReadModelStore keeps the read models of a DB and the watermarks of the
// projections that write them (migration 10), and implements
// store.ReadModelStore.
//
// Apply is one write transaction on the DB's writer (BEGIN IMMEDIATE, so
// the watermark and row checks read what no other connection, in any
// process, can change before the commit), durable before it returns: it
// reads the watermark, then each written row in store.SortReadModelWrites
// order, refusing at the first mismatch (the transaction rolls back,
// leaving nothing), writes the rows and their index entries, and moves the
// watermark. Rows live in read_models, one per (kind, id), with their
// fields as a JSON object beside the document; read_model_fields holds one
// row per (kind, field name, value, id), so a Query with a Where walks
// that key from its cursor, in id order, and never the rows of the kind
// that lack the pair. Reads go to the read pool. One from
// DB.ReadModelStore shares its DB, and Close only detaches it; one from
// OpenReadModelStore owns its DB, and Close closes it.
type ReadModelStore struct {
	view
}

var _ store.ReadModelStore = (*ReadModelStore)(nil)

// Read-model statements of the writer.
const (
	sqlRMWatermark    = `SELECT sequence FROM read_model_watermarks WHERE projection = ? AND source = ?`
	sqlRMSetWatermark = `INSERT INTO read_model_watermarks (projection, source, sequence) VALUES (?, ?, ?)
		ON CONFLICT (projection, source) DO UPDATE SET sequence = excluded.sequence`
	sqlRMHeld   = `SELECT projection, version, fields FROM read_models WHERE kind = ? AND id = ?`
	sqlRMInsert = `INSERT INTO read_models (kind, id, projection, version, fields, doc) VALUES (?, ?, ?, 1, ?, ?)`
	sqlRMUpdate = `UPDATE read_models SET version = ?, fields = ?, doc = ? WHERE kind = ? AND id = ?`
	sqlRMDelete = `DELETE FROM read_models WHERE kind = ? AND id = ?`
	sqlRMPost   = `INSERT INTO read_model_fields (kind, name, value, id) VALUES (?, ?, ?, ?)`
	sqlRMUnpost = `DELETE FROM read_model_fields WHERE kind = ? AND name = ? AND value = ? AND id = ?`
	// Reset's three deletes: the index entries of the projection's rows
	// (read from each row's fields, so each is deleted by its key), the
	// rows, the watermarks.
	sqlRMResetFields = `DELETE FROM read_model_fields WHERE (kind, name, value, id) IN (
		SELECT r.kind, j.key, j.value, r.id FROM read_models r, json_each(r.fields) j WHERE r.projection = ?)`
	sqlRMResetRows       = `DELETE FROM read_models WHERE projection = ?`
	sqlRMResetWatermarks = `DELETE FROM read_model_watermarks WHERE projection = ?`
)

// Read-model statements of the read pool.
const (
	rmCols          = `r.id, r.projection, r.version, r.fields, r.doc`
	sqlRMGet        = `SELECT ` + rmCols + ` FROM read_models r WHERE r.kind = ? AND r.id = ?`
	sqlRMQueryAll   = `SELECT ` + rmCols + ` FROM read_models r WHERE r.kind = ? AND r.id > ? ORDER BY r.id LIMIT ?`
	sqlRMWatermarks = `SELECT source, sequence FROM read_model_watermarks
		WHERE projection = ? AND source > ? ORDER BY source LIMIT ?`
)

// Apply implements store.ReadModelStore: the call is checked by
// store.ValidateReadModelApply under the DB's limits, then run as one
// writer transaction (see ReadModelStore). A refusal writes nothing.
func (s *ReadModelStore) Apply(ctx context.Context, projection, source string, from, to int64, writes []store.ReadModelWrite) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateReadModelApply(projection, source, from, to, writes, s.db.opts.limits); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sorted := store.SortReadModelWrites(writes)
	return s.db.w.run(ctx, func(c *rawConn) error {
		if err := s.check(); err != nil {
			return err
		}
		return c.inTx(func() error {
			actual, found, err := c.queryInt64(sqlRMWatermark, projection, source)
			if err != nil {
				return err
			}
			if !found {
				actual = store.NoWatermark
			}
			if err := store.CheckWatermark(projection, source, from, actual); err != nil {
				return err
			}
			for _, w := range sorted {
				if err := applyWrite(c, projection, w); err != nil {
					return err
				}
			}
			_, err = c.exec(sqlRMSetWatermark, projection, source, to)
			return err
		})
	})
}

// applyWrite checks w against its stored row and, when it may go ahead,
// writes it and moves its index entries, inside the open transaction.
func applyWrite(c *rawConn, projection string, w store.ReadModelWrite) error {
	kind, id := w.Row.Kind, w.Row.ID
	row, found, err := c.queryRow(sqlRMHeld, kind, id)
	if err != nil {
		return err
	}
	var owner string
	var version int64
	var before map[string]string
	if found {
		text, ok := row[2].(string)
		owner, _ = row[0].(string)
		version, _ = row[1].(int64)
		if !ok || version < 1 {
			return fmt.Errorf("sqlite: read model row of types %T %T %T", row[0], row[1], row[2])
		}
		if before, err = store.ParseReadModelFields(text); err != nil {
			return fmt.Errorf("sqlite: read model %q/%q: fields: %w", kind, id, err)
		}
	}
	if err := store.CheckReadModelWrite(projection, w, owner, version); err != nil {
		return err
	}
	after := w.Row.Fields
	switch {
	case w.Delete && !found:
		return nil
	case w.Delete:
		after = nil
		_, err = c.exec(sqlRMDelete, kind, id)
	case !found:
		_, err = c.exec(sqlRMInsert, kind, id, projection, store.ReadModelFieldsJSON(after), string(w.Row.Doc))
	default:
		_, err = c.exec(sqlRMUpdate, version+1, store.ReadModelFieldsJSON(after), string(w.Row.Doc), kind, id)
	}
	if err != nil {
		return err
	}
	return moveFields(c, kind, id, before, after)
}

// moveFields changes the index entries of row (kind, id) from the fields
// before to after, touching only the pairs that differ.
func moveFields(c *rawConn, kind, id string, before, after map[string]string) error {
	for _, name := range store.SortedFieldNames(before) {
		if v, ok := after[name]; !ok || v != before[name] {
			if _, err := c.exec(sqlRMUnpost, kind, name, before[name], id); err != nil {
				return err
			}
		}
	}
	for _, name := range store.SortedFieldNames(after) {
		if v, ok := before[name]; !ok || v != after[name] {
			if _, err := c.exec(sqlRMPost, kind, name, after[name], id); err != nil {
				return err
			}
		}
	}
	return nil
}

// Watermark implements store.ReadModelStore, on the read pool.
func (s *ReadModelStore) Watermark(ctx context.Context, projection, source string) (int64, bool, error) {
	if err := s.check(); err != nil {
		return store.NoWatermark, false, err
	}
	if err := store.ValidateWatermarkKey(projection, source); err != nil {
		return store.NoWatermark, false, err
	}
	var seq int64
	switch err := s.db.reads.rmWatermark.QueryRowContext(ctx, projection, source).Scan(&seq); {
	case errors.Is(err, sql.ErrNoRows):
		return store.NoWatermark, false, nil
	case err != nil:
		return store.NoWatermark, false, s.db.readErr("read watermark", err)
	}
	return seq, true, nil
}

// Watermarks implements store.ReadModelStore: a page of the watermarks key
// from after, on the read pool.
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
	rows, err := s.db.reads.rmWatermarks.QueryContext(ctx, projection, after, limit+1)
	if err != nil {
		return store.WatermarkPage{}, s.db.readErr("list watermarks", err)
	}
	page := store.WatermarkPage{Watermarks: []store.Watermark{}}
	for rows.Next() {
		w := store.Watermark{Projection: projection}
		if err := rows.Scan(&w.Source, &w.Sequence); err != nil {
			return store.WatermarkPage{}, errors.Join(s.db.readErr("list watermarks", err), rows.Close())
		}
		page.Watermarks = append(page.Watermarks, w)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return store.WatermarkPage{}, s.db.readErr("list watermarks", err)
	}
	if len(page.Watermarks) > limit {
		page.Watermarks = page.Watermarks[:limit]
		page.Next = page.Watermarks[limit-1].Source
	}
	return page, nil
}

// Get implements store.ReadModelStore, on the read pool.
func (s *ReadModelStore) Get(ctx context.Context, kind, id string) (store.ReadModel, bool, error) {
	if err := s.check(); err != nil {
		return store.ReadModel{}, false, err
	}
	if err := store.ValidateReadModelKey(kind, id); err != nil {
		return store.ReadModel{}, false, err
	}
	rows, err := s.db.reads.rmGet.QueryContext(ctx, kind, id)
	if err != nil {
		return store.ReadModel{}, false, s.db.readErr("read read model", err)
	}
	got, err := scanReadModels(kind, rows, 1)
	if err != nil {
		return store.ReadModel{}, false, s.db.readErr("read read model", err)
	}
	if len(got) == 0 {
		return store.ReadModel{}, false, nil
	}
	return got[0], true, nil
}

// Query implements store.ReadModelStore on the read pool: with no Where, a
// walk of the rows key of the kind from q.After; with one, a walk of the
// read_model_fields key of its first pair (in name order) from q.After,
// joined to the entries of the other pairs and to the rows by key, each a
// primary-key lookup. It reads one row past the page to know whether
// another follows.
func (s *ReadModelStore) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	if err := s.check(); err != nil {
		return store.ReadModelPage{}, err
	}
	q, err := store.ValidateReadModelQuery(q)
	if err != nil {
		return store.ReadModelPage{}, err
	}
	var rows *sql.Rows
	if len(q.Where) == 0 {
		rows, err = s.db.reads.rmQueryAll.QueryContext(ctx, q.Kind, q.After, q.Limit+1)
	} else {
		text, args := readModelQuerySQL(q)
		var st *sql.Stmt
		if st, err = s.db.reads.whereStmt(ctx, s.db.read, len(q.Where), text); err == nil {
			rows, err = st.QueryContext(ctx, args...)
		}
	}
	if err != nil {
		return store.ReadModelPage{}, s.db.readErr("query read models", err)
	}
	got, err := scanReadModels(q.Kind, rows, q.Limit+1)
	if err != nil {
		return store.ReadModelPage{}, s.db.readErr("query read models", err)
	}
	page := store.ReadModelPage{Rows: got}
	if len(got) > q.Limit {
		page.Rows = got[:q.Limit]
		page.Next = got[q.Limit-1].ID
	}
	return page, nil
}

// whereStmt returns the prepared statement of a query with pairs pairs,
// whose text is text, preparing it on read at first use: the text depends
// only on the number of pairs.
func (r *readStmts) whereStmt(ctx context.Context, read *sql.DB, pairs int, text string) (*sql.Stmt, error) {
	r.rmMu.Lock()
	defer r.rmMu.Unlock()
	if st, ok := r.rmWhere[pairs]; ok {
		return st, nil
	}
	st, err := read.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if r.rmWhere == nil {
		r.rmWhere = map[int]*sql.Stmt{}
	}
	r.rmWhere[pairs] = st
	return st, nil
}

// readModelQuerySQL builds the statement of a query with a Where, and its
// arguments in the order of their placeholders. CROSS JOIN makes SQLite
// keep the join order as written, so the walk of the first pair's entries
// in id order drives the query and ORDER BY needs no sort.
func readModelQuerySQL(q store.ReadModelQuery) (string, []any) {
	names := store.SortedFieldNames(q.Where)
	var b strings.Builder
	b.WriteString(`SELECT ` + rmCols + ` FROM read_model_fields f0`)
	args := make([]any, 0, 3*len(names)+3)
	for i, name := range names[1:] {
		f := fmt.Sprintf("f%d", i+1)
		b.WriteString(` CROSS JOIN read_model_fields ` + f + ` ON ` + f + `.kind = f0.kind AND ` +
			f + `.name = ? AND ` + f + `.value = ? AND ` + f + `.id = f0.id`)
		args = append(args, name, q.Where[name])
	}
	b.WriteString(` CROSS JOIN read_models r ON r.kind = f0.kind AND r.id = f0.id` +
		` WHERE f0.kind = ? AND f0.name = ? AND f0.value = ? AND f0.id > ? ORDER BY f0.id LIMIT ?`)
	args = append(args, q.Kind, names[0], q.Where[names[0]], q.After, q.Limit+1)
	return b.String(), args
}

// scanReadModels reads up to max rows of rmCols, of kind, and closes rows.
func scanReadModels(kind string, rows *sql.Rows, max int) ([]store.ReadModel, error) {
	out := []store.ReadModel{}
	for len(out) < max && rows.Next() {
		r := store.ReadModel{Kind: kind}
		var fields, doc string
		if err := rows.Scan(&r.ID, &r.Projection, &r.Version, &fields, &doc); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		f, err := store.ParseReadModelFields(fields)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("fields of %q/%q: %w", kind, r.ID, err), rows.Close())
		}
		r.Fields, r.Doc = f, []byte(doc)
		out = append(out, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return out, nil
}

// Reset implements store.ReadModelStore: the projection's index entries,
// rows and watermarks are deleted in one writer transaction.
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
	return s.db.w.run(ctx, func(c *rawConn) error {
		if err := s.check(); err != nil {
			return err
		}
		return c.inTx(func() error {
			for _, q := range []string{sqlRMResetFields, sqlRMResetRows, sqlRMResetWatermarks} {
				if _, err := c.exec(q, projection); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Close detaches the store: later calls return store.ErrClosed. A store
// from OpenReadModelStore closes its DB; one from DB.ReadModelStore only
// detaches. A second Close returns nil.
func (s *ReadModelStore) Close() error { return s.close() }

// OpenReadModelStore is OpenEventStore for a ReadModelStore that owns its
// database file.
func OpenReadModelStore(path string, opts ...Option) (*ReadModelStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &ReadModelStore{view: view{db: db, owned: true}}, nil
}
