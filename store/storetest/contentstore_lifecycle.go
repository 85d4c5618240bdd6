package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Sizes of the concurrency subtest.
const (
	contentWriters = 32 // goroutines, each with its own blob and the shared one
	contentRounds  = 4  // Puts of each blob per goroutine
)

// writerBlob is the blob of writer w alone; sizes differ per writer.
func writerBlob(w int) []byte { return blobBytes(uint64(1000+w), 1000+97*w) }

// concurrentPuts: 32 goroutines at once each put one shared blob and
// their own, several times, reading both back as they go; every Put
// returns the bytes' ref, and afterwards the store holds exactly 33 blobs,
// each intact.
func (k contentKit) concurrentPuts(t *testing.T) {
	s := k.open(t)
	shared := blobBytes(100, 4096)
	sharedRef := event.SHA256(shared)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range contentWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := writeContent(context.Background(), s, shared, sharedRef, writerBlob(w)); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	k.expectCount(t, s, contentWriters+1)
	expectContent(t, s, sharedRef, shared)
	for w := range contentWriters {
		own := writerBlob(w)
		expectContent(t, s, event.SHA256(own), own)
	}
}

// writeContent is one concurrent writer's work; it returns the first
// unexpected outcome.
func writeContent(ctx context.Context, s store.ContentStore, shared []byte, sharedRef string, own []byte) error {
	ownRef := event.SHA256(own)
	for range contentRounds {
		for _, b := range []struct {
			data []byte
			ref  string
		}{{shared, sharedRef}, {own, ownRef}} {
			ref, err := s.Put(ctx, bytes.Clone(b.data))
			if err != nil {
				return fmt.Errorf("Put(%d bytes): %w", len(b.data), err)
			}
			if ref != b.ref {
				return fmt.Errorf("Put(%d bytes) = %q, want %q", len(b.data), ref, b.ref)
			}
			got, err := s.Get(ctx, ref)
			if err != nil {
				return fmt.Errorf("Get(%q) after its Put: %w", ref, err)
			}
			if !bytes.Equal(got, b.data) {
				return fmt.Errorf("Get(%q) = %s, want %s", ref, excerpt(got), excerpt(b.data))
			}
		}
	}
	return nil
}

// mustDeleteContent deletes ref and requires nil.
func mustDeleteContent(t *testing.T, d store.ContentDeleter, ref string) {
	t.Helper()
	if err := d.Delete(context.Background(), ref); err != nil {
		t.Fatalf("Delete(%q): %v", ref, err)
	}
}

// delete: Delete removes one blob and no other, however many times its
// bytes were put (no reference count); deleting it again, or a ref never
// stored, returns nil; putting the bytes again stores them again.
func (k contentKit) delete(t *testing.T) {
	s := k.open(t)
	d, ok := s.(store.ContentDeleter)
	if !ok {
		t.Skip("the store is not a store.ContentDeleter")
	}
	a, b := []byte("blob a"), []byte("blob b")
	refA := mustPutContent(t, s, a)
	mustPutContent(t, s, a)
	refB := mustPutContent(t, s, b)
	mustDeleteContent(t, d, refA)
	expectNoContent(t, s, refA)
	expectContent(t, s, refB, b)
	k.expectCount(t, s, 1)
	mustDeleteContent(t, d, refA)
	mustDeleteContent(t, d, event.SHA256([]byte("never stored")))
	expectContent(t, s, refB, b)
	if again := mustPutContent(t, s, a); again != refA {
		t.Fatalf("Put after Delete = %q, want %q", again, refA)
	}
	expectContent(t, s, refA, a)
	k.expectCount(t, s, 2)
}

// closed: after Close every method returns store.ErrClosed, Delete too
// when the store has it.
func (k contentKit) closed(t *testing.T) {
	s := k.open(t)
	ref := mustPutContent(t, s, []byte("x"))
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	_, err := s.Put(ctx, []byte("y"))
	check("Put", err)
	_, err = s.Get(ctx, ref)
	check("Get", err)
	if d, ok := s.(store.ContentDeleter); ok {
		check("Delete", d.Delete(ctx, ref))
	}
}

// reopen: every blob survives a close and a reopen byte for byte (empty
// and binary ones included), a deleted one stays deleted, and a duplicate
// Put after the reopen still stores nothing new.
func (k contentKit) reopen(t *testing.T) {
	s := k.open(t)
	blobs := k.roundTripBlobs()
	refs := make(map[string]string, len(blobs))
	for name, data := range blobs {
		refs[name] = mustPutContent(t, s, data)
	}
	gone := []byte("deleted before the reopen")
	goneRef := mustPutContent(t, s, gone)
	wantCount := len(blobs) + 1
	if d, ok := s.(store.ContentDeleter); ok {
		mustDeleteContent(t, d, goneRef)
		wantCount--
	}
	closeStore(t, s)
	s = openStore(t, "ContentStoreFactory.Reopen", func(t *testing.T) store.ContentStore { return k.f.Reopen(t, s) })
	for name, data := range blobs {
		expectContent(t, s, refs[name], data)
	}
	if wantCount == len(blobs) {
		expectNoContent(t, s, goneRef)
	}
	k.expectCount(t, s, wantCount)
	mustPutContent(t, s, blobs["all-bytes"])
	k.expectCount(t, s, wantCount)
}
