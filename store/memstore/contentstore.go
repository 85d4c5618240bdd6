package memstore

import (
	"bytes"
	"context"
	"sync"

	"github.com/loom-kernel/loom/store"
)

var (
	_ store.ContentStore   = (*ContentStore)(nil)
	_ store.ContentDeleter = (*ContentStore)(nil)
)

// ContentStore is the in-memory store.ContentStore, with
// store.ContentDeleter; build one with NewContentStore. It is safe for
// concurrent use: Put and Delete hold the write lock, Get the read lock.
//
// It trusts its own memory: Get returns the copy Put made without hashing it
// again (a store over a disk or a network checks instead, and reports
// *store.ContentCorruptError). Put hashes outside the lock, so concurrent
// Puts of large blobs hash in parallel; a duplicate Put costs its hash and
// one map lookup, and keeps the blob already stored.
type ContentStore struct {
	maxBytes int
	mu       sync.RWMutex
	closed   bool
	blobs    map[string][]byte // ref -> the store's own copy
	size     int64             // total bytes held
}

// ContentOption configures a ContentStore.
type ContentOption func(*ContentStore)

// WithMaxContentBytes sets the largest blob Put accepts; n < 1 keeps the
// default, store.MaxContentBytes.
func WithMaxContentBytes(n int) ContentOption {
	return func(s *ContentStore) {
		if n > 0 {
			s.maxBytes = n
		}
	}
}

// NewContentStore returns an empty in-memory content store. By default
// (the one default set) Put accepts blobs of up to store.MaxContentBytes.
func NewContentStore(opts ...ContentOption) *ContentStore {
	s := &ContentStore{maxBytes: store.MaxContentBytes, blobs: make(map[string][]byte)}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Put stores a copy of data under store.ContentRef(data) and returns that
// ref; bytes already stored are kept as they are. It refuses data over the
// store's cap (store.MaxContentBytes unless WithMaxContentBytes set it) with
// *event.PayloadTooLargeError, storing nothing. A closed store returns
// store.ErrClosed.
func (s *ContentStore) Put(ctx context.Context, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := store.CheckContentSize(data, s.maxBytes); err != nil {
		return "", err
	}
	ref := store.ContentRef(data)
	s.mu.RLock()
	closed, have := s.closed, s.blobs[ref] != nil
	s.mu.RUnlock()
	if closed {
		return "", store.ErrClosed
	}
	if have {
		return ref, nil // no copy for a duplicate
	}
	blob := make([]byte, len(data)) // non-nil even when empty: nil means absent
	copy(blob, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", store.ErrClosed
	}
	if s.blobs[ref] == nil {
		s.blobs[ref] = blob
		s.size += int64(len(blob))
	}
	return ref, nil
}

// Get returns a copy of the blob under ref, or store.ErrContentNotFound
// when there is none or ref is malformed.
func (s *ContentStore) Get(ctx context.Context, ref string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if !store.IsContentRef(ref) {
		return nil, store.ErrContentNotFound
	}
	blob, ok := s.blobs[ref]
	if !ok {
		return nil, store.ErrContentNotFound
	}
	return bytes.Clone(blob), nil
}

// Delete implements store.ContentDeleter: it removes the blob under ref.
// Deleting a ref that is not stored, or a malformed one, returns nil.
func (s *ContentStore) Delete(ctx context.Context, ref string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if blob, ok := s.blobs[ref]; ok {
		s.size -= int64(len(blob))
		delete(s.blobs, ref)
	}
	return nil
}

// Stats reports how many blobs the store holds and their total size in
// bytes (each distinct blob counted once). A closed store returns
// store.ErrClosed.
func (s *ContentStore) Stats() (blobs int, total int64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, 0, store.ErrClosed
	}
	return len(s.blobs), s.size, nil
}

// Close marks the store closed and drops its blobs. The first Close returns
// nil; every later call of any method returns store.ErrClosed.
func (s *ContentStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.blobs, s.size = nil, 0
	return nil
}
