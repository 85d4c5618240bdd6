package postgres

import (
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/store"
)

// readModelQueries are the statements of the ReadModelStore, with the
// schema filled in (buildReadModelQueries).
type readModelQueries struct {
	watermark, watermarkInsert, watermarkMove, watermarks string

	claim, held, update, delete, post, unpost string

	get, queryAll string

	resetLockRows, resetFields, resetRows, resetMarks string
}

// rmCols are the columns scanReadModels reads, in its order.
const rmCols = `r.id, r.projection, r.version, r.fields, r.doc`

// buildReadModelQueries fills the schema s (already quoted) into every
// read-model statement. Arrays are passed in (kind, id) order, so every
// statement that takes row locks takes them in one order.
func buildReadModelQueries(s string) readModelQueries {
	return readModelQueries{
		watermark: `SELECT sequence FROM ` + s + `.read_model_watermarks WHERE projection = $1 AND source = $2`,
		// The first Apply of a source: the insert waits for a racing
		// inserter of the same key to end, then does nothing if it
		// committed. $3 is the new watermark.
		watermarkInsert: `INSERT INTO ` + s + `.read_model_watermarks (projection, source, sequence) VALUES ($1, $2, $3)
			ON CONFLICT (projection, source) DO NOTHING RETURNING sequence`,
		// A later Apply: the compare-and-set from $3 to $4. A racing Apply
		// holds the row lock until it ends; READ COMMITTED then re-checks
		// the WHERE against its committed row, so only one of them moves
		// the watermark from $3.
		watermarkMove: `UPDATE ` + s + `.read_model_watermarks SET sequence = $4
			WHERE projection = $1 AND source = $2 AND sequence = $3 RETURNING sequence`,
		watermarks: `SELECT source, sequence FROM ` + s + `.read_model_watermarks
			WHERE projection = $1 AND source > $2 ORDER BY source LIMIT $3`,

		// The claim of every row an Apply writes, in key order, in one
		// statement: a row that exists conflicts, and DO UPDATE … WHERE
		// false changes nothing and returns nothing for it but locks it; a
		// row that does not is inserted as the write would insert it (a
		// placeholder, for a write that turns out to be refused or a
		// delete, which the transaction rolls back or deletes). Either way
		// the Apply holds every key it writes, taken in one order, before
		// it checks or writes anything else. A row a racing transaction
		// holds is waited for; one it inserted and committed meanwhile
		// conflicts. $1 projection, then kind, id, fields and doc arrays.
		// It returns the keys it inserted.
		claim: `INSERT INTO ` + s + `.read_models AS r (kind, id, projection, version, fields, doc)
			SELECT u.kind, u.id, $1, 1, u.fields, u.doc
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(kind, id, fields, doc, n)
			ORDER BY u.n
			ON CONFLICT (kind, id) DO UPDATE SET version = r.version WHERE false
			RETURNING r.kind, r.id`,
		// The claimed rows that existed, as committed: the Apply holds
		// their locks, so they cannot change before it ends.
		held: `SELECT r.kind, r.id, r.projection, r.version, r.fields FROM ` + s + `.read_models r
			JOIN unnest($1::text[], $2::text[]) AS k(kind, id) ON r.kind = k.kind AND r.id = k.id`,
		// Updates and deletes of rows the lock holds and the checks passed.
		update: `UPDATE ` + s + `.read_models r SET version = r.version + 1, fields = u.fields, doc = u.doc
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(kind, id, fields, doc)
			WHERE r.kind = u.kind AND r.id = u.id`,
		delete: `DELETE FROM ` + s + `.read_models r USING unnest($1::text[], $2::text[]) AS u(kind, id)
			WHERE r.kind = u.kind AND r.id = u.id`,
		post: `INSERT INTO ` + s + `.read_model_fields (kind, name, value, id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
		unpost: `DELETE FROM ` + s + `.read_model_fields f
			USING unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(kind, name, value, id)
			WHERE f.kind = u.kind AND f.name = u.name AND f.value = u.value AND f.id = u.id`,

		get:      `SELECT ` + rmCols + ` FROM ` + s + `.read_models r WHERE r.kind = $1 AND r.id = $2`,
		queryAll: `SELECT ` + rmCols + ` FROM ` + s + `.read_models r WHERE r.kind = $1 AND r.id > $2 ORDER BY r.id LIMIT $3`,

		// Reset holds the projection's lock (projectionLockKey)
		// exclusively, which waits for the Applies of the projection in
		// flight (each holds it shared) and keeps new ones out, then locks
		// the projection's rows in key order (as an Apply of another
		// projection claims them, before refusing to write another's row),
		// then deletes the rows' index entries by their key, the rows and
		// the watermarks.
		resetLockRows: `SELECT kind, id FROM ` + s + `.read_models WHERE projection = $1 ORDER BY kind, id FOR UPDATE`,
		resetFields: `DELETE FROM ` + s + `.read_model_fields f
			USING ` + s + `.read_models r CROSS JOIN LATERAL json_each_text(r.fields::json) AS j(key, value)
			WHERE r.projection = $1 AND f.kind = r.kind AND f.name = j.key AND f.value = j.value AND f.id = r.id`,
		resetRows:  `DELETE FROM ` + s + `.read_models WHERE projection = $1`,
		resetMarks: `DELETE FROM ` + s + `.read_model_watermarks WHERE projection = $1`,
	}
}

// readModelQuerySQL builds the statement of a query with a Where, in
// schema s, and its arguments: the entries of the first pair (in name
// order) walked in id order from the cursor, joined by key to those of the
// other pairs and to the rows.
func readModelQuerySQL(s string, q store.ReadModelQuery) (string, []any) {
	names := store.SortedFieldNames(q.Where)
	args := []any{q.Kind, names[0], q.Where[names[0]], q.After, q.Limit + 1}
	var b strings.Builder
	b.WriteString(`SELECT ` + rmCols + ` FROM ` + s + `.read_model_fields f0`)
	for i, name := range names[1:] {
		f := "f" + strconv.Itoa(i+1)
		args = append(args, name, q.Where[name])
		b.WriteString(` JOIN ` + s + `.read_model_fields ` + f + ` ON ` + f + `.kind = f0.kind AND ` +
			f + `.name = $` + strconv.Itoa(len(args)-1) + ` AND ` + f + `.value = $` + strconv.Itoa(len(args)) +
			` AND ` + f + `.id = f0.id`)
	}
	b.WriteString(` JOIN ` + s + `.read_models r ON r.kind = f0.kind AND r.id = f0.id` +
		` WHERE f0.kind = $1 AND f0.name = $2 AND f0.value = $3 AND f0.id > $4 ORDER BY f0.id LIMIT $5`)
	return b.String(), args
}
