package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// malformedRefs returns refs a store must treat as naming nothing, derived
// from the well-formed ref of a stored blob so that a lax comparison (case,
// prefix, trimming) would find it.
func malformedRefs(stored string) []string {
	hex := strings.TrimPrefix(stored, "sha256:")
	return []string{
		"",
		"sha256:",
		"sha256",
		hex,                                 // no prefix
		"SHA256:" + hex,                     // prefix case
		"sha256:" + strings.ToUpper(hex),    // digit case
		"sha512:" + hex,                     // another algorithm
		"sha256:" + hex[:63],                // short
		stored + "0",                        // long
		" " + stored,                        // padded
		stored + "\n",                       // trailing newline
		stored[:len(stored)-1] + "\x00",     // NUL
		"sha256:" + strings.Repeat("g", 64), // not hex
		"sha256:" + hex[:62] + "\xc3\xa9",   // non-ASCII of the right length
		"sha256:../../../../../../etc/passwd",
		"../" + stored,
		"/" + stored,
		stored + "/..",
		"sha256:" + hex[:53] + "' OR '1'='1",
		"%",
		"\xff",
	}
}

// malformedRefs: Get of a malformed ref returns store.ErrContentNotFound
// (never a panic, another error, or the blob it resembles); Delete of one,
// when the store has it, returns nil and deletes nothing.
func (k contentKit) malformedRefs(t *testing.T) {
	s := k.open(t)
	data := []byte("the only blob")
	ref := mustPutContent(t, s, data)
	deleter, canDelete := s.(store.ContentDeleter)
	for _, bad := range malformedRefs(ref) {
		if store.IsContentRef(bad) {
			t.Fatalf("store.IsContentRef(%q) = true", bad)
		}
		expectNoContent(t, s, bad)
		if canDelete {
			if err := deleter.Delete(context.Background(), bad); err != nil {
				t.Fatalf("Delete(%q) = %v, want nil", bad, err)
			}
		}
	}
	expectContent(t, s, ref, data)
	k.expectCount(t, s, 1)
}

// largeBlob: a 16 MiB blob of varied binary bytes (or one of the cap, when
// that is smaller) reads back exactly, and putting it again returns the
// same ref.
func (k contentKit) largeBlob(t *testing.T) {
	s := k.open(t)
	data := blobBytes(16, k.sized(16<<20))
	ref := mustPutContent(t, s, data)
	expectContent(t, s, ref, data)
	if again := mustPutContent(t, s, data); again != ref {
		t.Fatalf("Put of the same %d bytes = %q, then %q", len(data), ref, again)
	}
	k.expectCount(t, s, 1)
}

// tooLarge: a blob one byte over the store's cap is refused with an
// *event.PayloadTooLargeError (Field "content", its size and the cap) that
// matches event.ErrPayloadTooLarge, and nothing is stored. With a small
// cap (at most 1 MiB), a blob of exactly the cap is stored.
func (k contentKit) tooLarge(t *testing.T) {
	s := k.open(t)
	limit := k.f.MaxBytes
	over := make([]byte, limit+1)
	over[limit] = 1
	ref, err := s.Put(context.Background(), over)
	var tl *event.PayloadTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, event.ErrPayloadTooLarge) {
		t.Fatalf("Put(%d bytes) = %q, %v; want an *event.PayloadTooLargeError", len(over), ref, err)
	}
	if tl.Field != "content" || tl.Size != limit+1 || tl.Limit != limit {
		t.Fatalf("Put(%d bytes) refused with %+v, want Field \"content\", Size %d, Limit %d", len(over), *tl, limit+1, limit)
	}
	expectNoContent(t, s, event.SHA256(over))
	k.expectCount(t, s, 0)
	if limit > 1<<20 {
		return
	}
	atCap := blobBytes(3, limit)
	expectContent(t, s, mustPutContent(t, s, atCap), atCap)
	k.expectCount(t, s, 1)
}
