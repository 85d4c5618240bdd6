package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/store"
)

// ContentStore keeps the claim-checked blobs of a DB in the content table,
// one bytea row per ref, and implements store.ContentStore and
// store.ContentDeleter. Blobs are capped at store.MaxContentBytes.
//
// Put is one INSERT … ON CONFLICT DO NOTHING, its own transaction, durable
// before Put returns; a crash before the commit leaves no row, after it the
// whole blob. A ref already stored costs one indexed read and no write (the
// bytes are not even sent). Get checks what it read: bytes that no longer
// hash to their ref, or whose length is not the stored size, are reported
// as *store.ContentCorruptError and never returned (a later Put of the same
// bytes does not repair the row: delete it first). One from
// DB.ContentStore shares its DB, and Close only detaches it; one from
// OpenContentStore owns its DB, and Close closes it.
type ContentStore struct {
	view
}

var (
	_ store.ContentStore   = (*ContentStore)(nil)
	_ store.ContentDeleter = (*ContentStore)(nil)
)

// Put implements store.ContentStore: it stores data under
// store.ContentRef(data) and returns that ref once the row is durable. A
// ref already stored returns at once, writing nothing; two Puts of new
// bytes racing each other (in any processes) both succeed and leave one
// row. It refuses data over store.MaxContentBytes with
// *event.PayloadTooLargeError before hashing or writing anything.
func (s *ContentStore) Put(ctx context.Context, data []byte) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	if err := store.CheckContentSize(data, store.MaxContentBytes); err != nil {
		return "", err
	}
	ref := store.ContentRef(data)
	var found bool
	if err := s.db.pool.QueryRow(ctx, s.db.q.contentHas, ref).Scan(&found); err != nil {
		return "", s.readErr("look up content", err)
	}
	if found {
		return ref, nil
	}
	if data == nil {
		data = []byte{} // pgx binds a nil slice as NULL
	}
	if _, err := s.db.pool.Exec(ctx, s.db.q.contentPut, ref, int64(len(data)), data); err != nil {
		return "", s.readErr("put content", err)
	}
	return ref, nil
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
	err := s.db.pool.QueryRow(ctx, s.db.q.contentGet, ref).Scan(&size, &data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, store.ErrContentNotFound
	case err != nil:
		return nil, s.readErr("get content", err)
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
// one durable statement. Deleting a ref that is not stored returns nil (a
// malformed one without a query).
func (s *ContentStore) Delete(ctx context.Context, ref string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !store.IsContentRef(ref) {
		return nil
	}
	if _, err := s.db.pool.Exec(ctx, s.db.q.contentDelete, ref); err != nil {
		return s.readErr("delete content", err)
	}
	return nil
}

// Close implements store.ContentStore: later calls return store.ErrClosed.
// A store from OpenContentStore closes its DB; one from DB.ContentStore
// only detaches. A second Close returns nil.
func (s *ContentStore) Close() error { return s.close() }
