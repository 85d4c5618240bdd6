package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// ContentStoreSPIVersion versions the ContentStore SPI (pinned with its
// method set, ContentDeleter included, by TestSPIVersionsPinMethodSets).
const ContentStoreSPIVersion = "1.0.0"

// MaxContentBytes is the default cap on one blob: 64 MiB. A Put of more
// bytes is refused with *event.PayloadTooLargeError (Field "content") and
// stores nothing. The claim-check middleware keeps results this large out
// of the log; anything larger belongs to a streaming store, not a []byte.
const MaxContentBytes = 64 << 20

// contentRefPrefix starts every ref: the algorithm of event.SHA256.
const contentRefPrefix = "sha256:"

// contentRefLen is the length of a well-formed ref: the prefix and 64 hex
// digits.
const contentRefLen = len(contentRefPrefix) + 64

var (
	// ErrContentNotFound is returned by ContentStore.Get for a ref that
	// names no stored blob, a malformed ref included.
	ErrContentNotFound = errors.New("store: content not found")
	// ErrContentCorrupt matches *ContentCorruptError: the bytes a store read
	// back do not hash to their ref.
	ErrContentCorrupt = errors.New("store: content corrupt")
)

// ContentStore keeps immutable blobs addressed by their digest: the
// claim-check middleware (ADR 0054) stores an effect result over its inline
// cap here and records only {ref, size, digest} in the log, so replay,
// which serves the recorded envelope, never reads this store.
//
// A blob is never changed once stored: its ref is a hash of its bytes. A
// store copies what it is given and what it returns, so callers may mutate
// their buffers on either side of a call. Every method is safe for
// concurrent use; after Close every method returns ErrClosed.
type ContentStore interface {
	// Put stores data and returns its ref, ContentRef(data): the
	// event.SHA256 digest of the bytes ("sha256:<64 lower-case hex>").
	// Putting the same bytes again returns the same ref and stores nothing
	// new. It returns once the blob is durable. It refuses data over the
	// store's cap (MaxContentBytes by default) with
	// *event.PayloadTooLargeError, storing nothing. Empty data is a blob
	// like any other.
	Put(ctx context.Context, data []byte) (ref string, err error)
	// Get returns the blob under ref, or ErrContentNotFound, also for a
	// malformed ref (see IsContentRef), which never reaches storage. A
	// store that checks what it reads returns *ContentCorruptError when the
	// bytes no longer hash to ref.
	Get(ctx context.Context, ref string) ([]byte, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// ContentDeleter is an optional ContentStore capability, for the retention
// policy that decides which refs no log points at any more.
type ContentDeleter interface {
	// Delete removes the blob under ref. It is idempotent: deleting a ref
	// that is not stored, or a malformed one, is not an error. Blobs are not
	// reference-counted, so after Delete a Get of ref returns
	// ErrContentNotFound however many times the bytes were put; putting
	// them again stores them again.
	Delete(ctx context.Context, ref string) error
}

// ContentRef returns the ref a ContentStore gives data: event.SHA256(data).
func ContentRef(data []byte) string { return event.SHA256(data) }

// IsContentRef reports whether ref is well formed: "sha256:" followed by
// exactly 64 lower-case hex digits. Stores check it before any lookup, so a
// ref taken from untrusted input can never name a file, a path or a query
// fragment.
func IsContentRef(ref string) bool {
	if len(ref) != contentRefLen || ref[:len(contentRefPrefix)] != contentRefPrefix {
		return false
	}
	for i := len(contentRefPrefix); i < len(ref); i++ {
		c := ref[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckContentSize refuses data over limit (MaxContentBytes when limit < 1)
// with *event.PayloadTooLargeError, Field "content". Stores call it before
// hashing or storing anything.
func CheckContentSize(data []byte, limit int) error {
	if limit < 1 {
		limit = MaxContentBytes
	}
	if len(data) > limit {
		return &event.PayloadTooLargeError{Field: "content", Size: len(data), Limit: limit}
	}
	return nil
}

// ContentCorruptError reports that the blob stored under Ref was read back
// with bytes whose digest is Actual: the storage under the store lost or
// altered them. The bytes are not returned, and never echoed.
type ContentCorruptError struct {
	Ref    string
	Actual string
}

func (e *ContentCorruptError) Error() string {
	return "store: content " + strconv.Quote(e.Ref) + " is corrupt: its bytes hash to " + strconv.Quote(e.Actual)
}

// Is makes errors.Is(err, ErrContentCorrupt) true.
func (e *ContentCorruptError) Is(target error) bool { return target == ErrContentCorrupt }
