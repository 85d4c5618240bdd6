package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ContentStoreFactory builds the stores RunContentStore checks.
type ContentStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it. It is called once
	// per subtest and may call t.Fatal (t.TempDir is the place for files).
	New func(t *testing.T) store.ContentStore
	// Reopen is optional: it reopens the durable storage behind a store New
	// returned, after the kit closed it. When nil the Reopen subtest is left
	// out.
	Reopen func(t *testing.T, closed store.ContentStore) store.ContentStore
	// Count is optional: it returns how many distinct blobs s holds, read
	// behind the SPI (a store method, a SQL count), so the kit can check
	// that a duplicate Put stores nothing new. When nil those checks are
	// left out and the kit logs it.
	Count func(t *testing.T, s store.ContentStore) int
	// MaxBytes is the store's blob cap; 0 means store.MaxContentBytes. The
	// kit always checks that MaxBytes+1 bytes are refused; it also stores a
	// blob of exactly MaxBytes when that is at most 1 MiB (a small-cap run),
	// since a 64 MiB write costs seconds.
	MaxBytes int
}

// contentKit carries the factory through the ContentStore subtests.
type contentKit struct{ f ContentStoreFactory }

// RunContentStore runs the ContentStore conformance kit against the stores
// f builds, one fresh store per named subtest: a round trip of text,
// binary, NUL-filled and empty blobs byte for byte (the large ones cut to
// the cap when f.MaxBytes is smaller); the ref format
// ("sha256:" and 64 lower-case hex, equal to event.SHA256, checked against
// fixed vectors); the same bytes giving the same ref and one blob; isolation
// from the caller's buffers; Get of a missing ref and of malformed ones
// (wrong prefix, case, length, path and SQL fragments, control bytes)
// returning store.ErrContentNotFound without touching stored blobs; a 16
// MiB blob; the cap (typed *event.PayloadTooLargeError, storing nothing);
// 32 concurrent writers putting one shared blob and their own; Delete when
// the store is a store.ContentDeleter (idempotent, not reference-counted,
// re-Put restores); Close; and Reopen when f.Reopen is set.
func RunContentStore(t *testing.T, f ContentStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: ContentStoreFactory.New is nil")
	}
	if f.MaxBytes < 1 {
		f.MaxBytes = store.MaxContentBytes
	}
	if f.Count == nil {
		t.Log("storetest: ContentStoreFactory.Count is nil, so the kit cannot check that a duplicate Put stores nothing new")
	}
	k := contentKit{f: f}
	t.Run("RoundTrip", k.roundTrip)
	t.Run("RefFormat", k.refFormat)
	t.Run("SameBytesSameRef", k.sameBytes)
	t.Run("CallerMutationIsolation", k.mutationIsolation)
	t.Run("GetMissing", k.getMissing)
	t.Run("MalformedRefs", k.malformedRefs)
	t.Run("LargeBlob", k.largeBlob)
	t.Run("TooLarge", k.tooLarge)
	t.Run("ConcurrentPuts", k.concurrentPuts)
	t.Run("Delete", k.delete)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: ContentStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// open returns a fresh store for one subtest.
func (k contentKit) open(t *testing.T) store.ContentStore {
	t.Helper()
	return openStore(t, "ContentStoreFactory.New", k.f.New)
}

// sized returns n, or the store's cap when that is smaller, so a
// small-cap run stores the same kinds of blobs.
func (k contentKit) sized(n int) int { return min(n, k.f.MaxBytes) }

// expectCount requires s to hold want blobs, when the factory can count.
func (k contentKit) expectCount(t *testing.T, s store.ContentStore, want int) {
	t.Helper()
	if k.f.Count == nil {
		return
	}
	if got := k.f.Count(t, s); got != want {
		t.Fatalf("the store holds %d blobs, want %d", got, want)
	}
}

// blobBytes returns size deterministic, varied bytes (every byte value
// occurs) from seed: a ChaCha8 stream, fast enough for 16 MiB under -race.
func blobBytes(seed uint64, size int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, size)
	if _, err := rand.NewChaCha8(key).Read(b); err != nil {
		panic(err) // ChaCha8.Read never fails
	}
	return b
}

// mustPutContent puts data, requires the ref to be event.SHA256(data), and
// returns it.
func mustPutContent(t *testing.T, s store.ContentStore, data []byte) string {
	t.Helper()
	ref, err := s.Put(context.Background(), data)
	if err != nil {
		t.Fatalf("Put(%s): %v", excerpt(data), err)
	}
	if want := event.SHA256(data); ref != want {
		t.Fatalf("Put(%s) = ref %q, want %q (event.SHA256 of the bytes)", excerpt(data), ref, want)
	}
	return ref
}

// expectContent requires Get(ref) to return exactly want.
func expectContent(t *testing.T, s store.ContentStore, ref string, want []byte) {
	t.Helper()
	got, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatalf("Get(%q): %v", ref, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %s, want %s", ref, excerpt(got), excerpt(want))
	}
}

// expectNoContent requires Get(ref) to return store.ErrContentNotFound.
func expectNoContent(t *testing.T, s store.ContentStore, ref string) {
	t.Helper()
	got, err := s.Get(context.Background(), ref)
	if !errors.Is(err, store.ErrContentNotFound) {
		t.Fatalf("Get(%q) = %s, %v; want store.ErrContentNotFound", ref, excerpt(got), err)
	}
}

// roundTripBlobs are the blobs RoundTrip and Reopen store: text, every
// byte value, NULs, invalid UTF-8, one byte, empty, and one spanning many
// database pages (70 KiB, or the cap when it is smaller).
func (k contentKit) roundTripBlobs() map[string][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return map[string][]byte{
		"json":      []byte("{ \"big\" : 12345678901234567890, \"f\":1.0, \"html\":\"<>&\", \"u\":\"é日本\" }"),
		"all-bytes": all,
		"nuls":      {0, 0, 0, 0},
		"not-utf8":  {0xff, 0xfe, 0xc3, 0x28, '\n', '\r'},
		"one-byte":  {'x'},
		"empty":     {},
		"70KiB":     blobBytes(70, k.sized(70<<10)),
	}
}

// roundTrip: each blob reads back byte for byte under the ref Put returned;
// a nil slice and an empty one are the same empty blob.
func (k contentKit) roundTrip(t *testing.T) {
	s := k.open(t)
	blobs := k.roundTripBlobs()
	refs := make(map[string]string, len(blobs))
	for name, data := range blobs {
		refs[name] = mustPutContent(t, s, data)
	}
	for name, data := range blobs {
		expectContent(t, s, refs[name], data)
	}
	if ref := mustPutContent(t, s, nil); ref != refs["empty"] {
		t.Fatalf("Put(nil) = %q, want the ref of the empty blob %q", ref, refs["empty"])
	}
	expectContent(t, s, refs["empty"], nil)
	k.expectCount(t, s, len(blobs))
}

// refFormat: refs are "sha256:" and 64 lower-case hex digits, pass
// store.IsContentRef, and match the published SHA-256 vectors, so a ref
// written by this store is the one any other implementation computes.
func (k contentKit) refFormat(t *testing.T) {
	s := k.open(t)
	vectors := map[string]string{
		"":    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	}
	for in, want := range vectors {
		if got := mustPutContent(t, s, []byte(in)); got != want {
			t.Fatalf("Put(%q) = %q, want %q", in, got, want)
		}
	}
	ref := mustPutContent(t, s, blobBytes(1, 1000))
	hex, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" || !store.IsContentRef(ref) {
		t.Fatalf("ref %q is not \"sha256:\" and 64 lower-case hex digits", ref)
	}
}

// sameBytes: putting the same bytes again, from another buffer, returns
// the same ref and stores nothing new; other bytes get another ref.
func (k contentKit) sameBytes(t *testing.T) {
	s := k.open(t)
	a := blobBytes(2, k.sized(5000))
	ref := mustPutContent(t, s, a)
	for range 3 {
		if again := mustPutContent(t, s, bytes.Clone(a)); again != ref {
			t.Fatalf("Put of the same bytes = %q, then %q", ref, again)
		}
	}
	k.expectCount(t, s, 1)
	b := bytes.Clone(a)
	b[len(b)-1] ^= 1
	other := mustPutContent(t, s, b)
	if other == ref {
		t.Fatalf("bytes differing in their last bit share ref %q", ref)
	}
	k.expectCount(t, s, 2)
	expectContent(t, s, ref, a)
	expectContent(t, s, other, b)
}

// mutationIsolation: changing the buffer given to Put, or one returned by
// Get, changes nothing stored.
func (k contentKit) mutationIsolation(t *testing.T) {
	s := k.open(t)
	in := []byte("claim-checked result")
	want := bytes.Clone(in)
	ref := mustPutContent(t, s, in)
	in[0] = 'X'
	expectContent(t, s, ref, want)
	got, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	got[0] = 'Y'
	expectContent(t, s, ref, want)
}

// getMissing: a well-formed ref of bytes never stored, or of bytes close
// to stored ones, is not found.
func (k contentKit) getMissing(t *testing.T) {
	s := k.open(t)
	expectNoContent(t, s, event.SHA256([]byte("never stored")))
	mustPutContent(t, s, []byte("stored"))
	expectNoContent(t, s, event.SHA256([]byte("stored ")))
	expectNoContent(t, s, event.SHA256(nil))
}
