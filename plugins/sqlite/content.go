package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/loom-kernel/loom/store"
)

// ContentStore keeps the claim-checked blobs of a DB in the content table,
// one row per ref, and implements store.ContentStore and
// store.ContentDeleter. Blobs are capped at store.MaxContentBytes.
//
// Put writes on the DB's writer, in a transaction of its own that is
// durable (fsynced under SyncFull) before Put returns; a crash before the
// commit leaves no row, after it the whole blob. A ref already stored costs
// one indexed read on the read pool and no write. Get reads on the read pool
// and checks what it read: bytes that no longer hash to their ref, or whose
// length is not the stored size, are reported as *store.ContentCorruptError
// and never returned (a later Put of the same bytes does not repair the
// row: delete it first). One from DB.ContentStore shares its DB, and Close
// only detaches it; one from OpenContentStore owns its DB, and Close closes
// it.
type ContentStore struct {
	view
}

var (
	_ store.ContentStore   = (*ContentStore)(nil)
	_ store.ContentDeleter = (*ContentStore)(nil)
)

const (
	// sqlPutContent inserts a blob unless its ref is stored: the bytes under
	// a ref never change, so a duplicate leaves the row as it is.
	sqlPutContent    = `INSERT OR IGNORE INTO content (ref, size, data) VALUES (?, ?, ?)`
	sqlHasContent    = `SELECT 1 FROM content WHERE ref = ?`
	sqlGetContent    = `SELECT size, data FROM content WHERE ref = ?`
	sqlDeleteContent = `DELETE FROM content WHERE ref = ?`
)

// ContentStore returns a view of the content store. Closing it does not
// close db.
func (db *DB) ContentStore() *ContentStore { return &ContentStore{view: view{db: db}} }

// OpenContentStore is OpenEventStore for a ContentStore that owns its
// database file.
func OpenContentStore(path string, opts ...Option) (*ContentStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &ContentStore{view: view{db: db, owned: true}}, nil
}

// Put implements store.ContentStore: it stores data under
// store.ContentRef(data) and returns that ref once the row is durable. A
// ref already stored returns at once, writing nothing; two Puts of new
// bytes racing each other both succeed and leave one row. It refuses data
// over store.MaxContentBytes with *event.PayloadTooLargeError before
// hashing or writing anything. If ctx ends while the write is still queued,
// Put returns ctx.Err() and writes nothing.
func (s *ContentStore) Put(ctx context.Context, data []byte) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	if err := store.CheckContentSize(data, store.MaxContentBytes); err != nil {
		return "", err
	}
	ref := store.ContentRef(data)
	switch found, err := s.has(ctx, ref); {
	case err != nil:
		return "", err
	case found:
		return ref, nil
	}
	if data == nil {
		data = []byte{} // the driver binds a nil slice as NULL
	}
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			// Bound here, not through c.bind, so the connection's reused
			// argument buffer does not keep the blob alive after the write.
			_, err := c.execNamed(sqlPutContent, []driver.NamedValue{
				{Ordinal: 1, Value: ref}, {Ordinal: 2, Value: int64(len(data))}, {Ordinal: 3, Value: data},
			})
			return err
		})
	})
	if err != nil {
		return "", err
	}
	return ref, nil
}

// has reports whether ref is stored, on the read pool.
func (s *ContentStore) has(ctx context.Context, ref string) (bool, error) {
	var one int
	err := s.db.read.QueryRowContext(ctx, sqlHasContent, ref).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, s.db.readErr("look up content", err)
	}
	return true, nil
}

// Get implements store.ContentStore: the blob under ref, read from the last
// committed state, or store.ErrContentNotFound when there is none; a
// malformed ref returns store.ErrContentNotFound without a query. Bytes
// that do not hash to ref, or whose length is not the stored size, return
// *store.ContentCorruptError instead.
func (s *ContentStore) Get(ctx context.Context, ref string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !store.IsContentRef(ref) {
		return nil, store.ErrContentNotFound
	}
	var size int64
	var data []byte
	err := s.db.read.QueryRowContext(ctx, sqlGetContent, ref).Scan(&size, &data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrContentNotFound
	case err != nil:
		return nil, s.db.readErr("get content", err)
	}
	if actual := store.ContentRef(data); actual != ref || size != int64(len(data)) {
		return nil, &store.ContentCorruptError{Ref: ref, Actual: actual}
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// Delete implements store.ContentDeleter: it removes the blob under ref in
// one durable transaction. Deleting a ref that is not stored returns nil
// (a malformed one without writing). If ctx ends while the write is still
// queued, Delete returns ctx.Err() and deletes nothing.
func (s *ContentStore) Delete(ctx context.Context, ref string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !store.IsContentRef(ref) {
		return nil
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(sqlDeleteContent, ref)
			return err
		})
	})
}

// Close implements store.ContentStore: later calls return store.ErrClosed.
// A store from OpenContentStore closes its DB; one from DB.ContentStore
// only detaches. A second Close returns nil.
func (s *ContentStore) Close() error { return s.close() }
