package sqlite

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom/store"
)

// countContentRows counts the rows of the content table.
func countContentRows(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.read.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM content`).Scan(&n); err != nil {
		t.Fatalf("count content rows: %v", err)
	}
	return n
}

// tamper runs one statement on the file through a connection of its own,
// as another process (or a bad disk) would change it behind the store.
func tamper(t *testing.T, path, q string, args ...any) {
	t.Helper()
	other, err := openPool(fileURI(path) + "?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.ExecContext(context.Background(), q, args...)
	if err := errors.Join(err, other.Close()); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// expectCorrupt requires Get(ref) to refuse with *store.ContentCorruptError
// naming ref and the digest actual, returning no bytes.
func expectCorrupt(t *testing.T, s *ContentStore, ref, actual string) {
	t.Helper()
	got, err := s.Get(context.Background(), ref)
	var ce *store.ContentCorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrContentCorrupt) || errors.Is(err, store.ErrContentNotFound) {
		t.Fatalf("Get(%q) = %d bytes, %v; want a *store.ContentCorruptError", ref, len(got), err)
	}
	if got != nil || ce.Ref != ref || ce.Actual != actual {
		t.Fatalf("Get(%q) = %d bytes, %+v; want no bytes, Ref %q, Actual %q", ref, len(got), *ce, ref, actual)
	}
}

// TestContentGetDetectsCorruption: Get re-hashes what it reads, so a row
// altered behind the store — a flipped byte, a truncation, a wrong size —
// is refused with *store.ContentCorruptError, never returned; other blobs
// are unaffected, and Delete then Put restores the blob.
func TestContentGetDetectsCorruption(t *testing.T) {
	ctx := context.Background()
	s := openTestDB(t).ContentStore()
	data := bytes.Repeat([]byte("claim-checked result "), 100)
	ref, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	intact, err := s.Put(ctx, []byte("intact"))
	if err != nil {
		t.Fatal(err)
	}

	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x20
	tamper(t, s.Path(), `UPDATE content SET data = ? WHERE ref = ?`, flipped, ref)
	expectCorrupt(t, s, ref, store.ContentRef(flipped))

	tamper(t, s.Path(), `UPDATE content SET data = substr(?, 1, 10) WHERE ref = ?`, data, ref)
	expectCorrupt(t, s, ref, store.ContentRef(data[:10]))

	tamper(t, s.Path(), `UPDATE content SET data = ?, size = size + 1 WHERE ref = ?`, data, ref)
	expectCorrupt(t, s, ref, ref)

	if got, err := s.Get(ctx, intact); err != nil || string(got) != "intact" {
		t.Fatalf("Get(intact) = %q, %v", got, err)
	}
	if err := s.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Put(ctx, data); err != nil || again != ref {
		t.Fatalf("Put after Delete = %q, %v; want %q", again, err, ref)
	}
	if got, err := s.Get(ctx, ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after the re-Put = %d bytes, %v; want the original %d", len(got), err, len(data))
	}
}

// TestContentDuplicatePutNeedsNoWrite: a Put of bytes already stored is
// answered from the read pool without a write transaction, so it succeeds
// while another process holds the file's write lock; a Put of new bytes
// needs the lock (it fails with SQLITE_BUSY after the busy timeout) and
// succeeds once the lock is released.
func TestContentDuplicatePutNeedsNoWrite(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, WithBusyTimeout(time.Millisecond))
	s := db.ContentStore()
	ref, err := s.Put(ctx, []byte("stored"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := openPool(fileURI(db.Path()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := other.Close(); err != nil {
			t.Error(err)
		}
	}()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(errors.Join(err, lock.Close()))
	}
	again, dupErr := s.Put(ctx, []byte("stored"))
	_, newErr := s.Put(ctx, []byte("new"))
	_, rbErr := lock.ExecContext(ctx, "ROLLBACK")
	if err := errors.Join(rbErr, lock.Close()); err != nil {
		t.Fatal(err)
	}
	if dupErr != nil || again != ref {
		t.Fatalf("duplicate Put under another writer's lock = %q, %v; want %q, nil", again, dupErr, ref)
	}
	if newErr == nil {
		t.Fatal("Put of new bytes under another writer's lock succeeded; the lock was not held")
	}
	if _, err := s.Put(ctx, []byte("new")); err != nil {
		t.Fatalf("Put of new bytes once the lock is released: %v", err)
	}
}

// TestStorageCarriesContent: the preset's Content shares the file with the
// other stores, deletes, closes with Stores.Close and keeps its blobs
// across it.
func TestStorageCarriesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	data := []byte(`{"rows":[1,2,3]}`)
	st, err := Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Content.(store.ContentDeleter); !ok {
		t.Fatal("Stores.Content is not a store.ContentDeleter")
	}
	ref, err := st.Content.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Content.Get(ctx, ref); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Stores.Close = %v, want store.ErrClosed", err)
	}
	st, err = Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	if got, err := st.Content.Get(ctx, ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after reopen = %q, %v; want %q", got, err, data)
	}
}
