package crypto

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync/atomic"

	"github.com/loom-kernel/loom/store"
)

// contentOverhead is what sealing adds to a blob: nonce and GCM tag.
const contentOverhead = nonceBytes + 16

// ErrNoSubject is returned by a ContentStore call whose context names no
// subject (WithSubject) when the store has no DefaultSubject: it fails
// closed rather than store a blob unsealed.
var ErrNoSubject = errors.New("crypto: no subject for the content")

type subjectKey struct{}

// WithSubject returns a context under which ContentStore calls seal and
// open as subject.
func WithSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, subjectKey{}, subject)
}

// SubjectFromContext returns the subject WithSubject set.
func SubjectFromContext(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(subjectKey{}).(string)
	return s, ok && s != ""
}

// InnerContentStore is the store a ContentStore wraps.
type InnerContentStore interface {
	store.ContentStore
	store.ContentDeleter
}

// ContentStoreOptions configures NewContentStore.
type ContentStoreOptions struct {
	// IndexPath is the file of the durable ref index. Required.
	IndexPath string
	// DefaultSubject seals a call whose context names none; "" refuses it
	// with ErrNoSubject.
	DefaultSubject string
	// MaxBytes caps a blob (default store.MaxContentBytes minus the 28
	// bytes sealing adds, so the sealed blob fits the inner default cap).
	MaxBytes int
}

// ContentStore seals every blob under a subject's key (AES-256-GCM with a
// nonce derived from the key and the blob's ref, so the same bytes of one
// subject seal to the same blob and dedupe; across subjects they never
// share a blob). Refs stay those of the plaintext (store.ContentRef), as
// the claim-check middleware verifies; a durable index maps (subject,
// keyed digest of the ref) to the inner ref of the sealed blob. Get opens
// and re-checks the ref (*store.ContentCorruptError), a blob that does not
// open is *SealError, a blob of an erased subject is *KeyDestroyedError.
// The subject comes from the context (WithSubject) or DefaultSubject.
type ContentStore struct {
	inner   InnerContentStore
	keys    KeyStore
	index   *contentIndex
	subject string
	max     int
	closed  atomic.Bool
}

// NewContentStore wraps inner, which must implement store.ContentDeleter
// (*MissingCapabilityError otherwise), and opens the index file.
func NewContentStore(inner store.ContentStore, keys KeyStore, opts ContentStoreOptions) (*ContentStore, error) {
	if inner == nil || keys == nil || opts.IndexPath == "" {
		return nil, errors.New("crypto: NewContentStore needs an inner store, a KeyStore and ContentStoreOptions.IndexPath")
	}
	in, ok := inner.(InnerContentStore)
	if !ok {
		return nil, &MissingCapabilityError{Store: "ContentStore", Capability: "store.ContentDeleter"}
	}
	ix, err := openContentIndex(opts.IndexPath)
	if err != nil {
		return nil, err
	}
	max := opts.MaxBytes
	if max < 1 {
		max = store.MaxContentBytes - contentOverhead
	}
	return &ContentStore{inner: in, keys: keys, index: ix, subject: opts.DefaultSubject, max: max}, nil
}

func (s *ContentStore) subjectOf(ctx context.Context) (string, error) {
	if subject, ok := SubjectFromContext(ctx); ok {
		return subject, nil
	}
	if s.subject == "" {
		return "", ErrNoSubject
	}
	return s.subject, nil
}

// Put implements store.ContentStore.
func (s *ContentStore) Put(ctx context.Context, data []byte) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	if err := store.CheckContentSize(data, s.max); err != nil {
		return "", err
	}
	subject, err := s.subjectOf(ctx)
	if err != nil {
		return "", err
	}
	k, err := s.keys.Key(ctx, subject)
	if err != nil {
		return "", err
	}
	ref := store.ContentRef(data)
	keyed := keyedRef(k, ref)
	if _, ok := s.index.get(subject, keyed); ok {
		return ref, nil
	}
	aead, err := newAEAD(k.Bytes)
	if err != nil {
		return "", err
	}
	nonce := deriveNonce(k, ref)
	sealed := aead.Seal(nonce, nonce, data, contentAAD(subject, k.ID, ref))
	innerRef, err := s.inner.Put(ctx, sealed)
	if err != nil {
		return "", err
	}
	if err := s.index.record(indexEntry{Op: "put", Subject: subject, Ref: keyed, Inner: innerRef, KeyID: k.ID}); err != nil {
		return "", err
	}
	return ref, nil
}

// Get implements store.ContentStore.
func (s *ContentStore) Get(ctx context.Context, ref string) ([]byte, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if !store.IsContentRef(ref) {
		return nil, store.ErrContentNotFound
	}
	subject, err := s.subjectOf(ctx)
	if err != nil {
		return nil, err
	}
	keyID, ok := s.index.keyID(subject)
	if !ok {
		return nil, store.ErrContentNotFound
	}
	k, err := s.keys.Open(ctx, subject, keyID)
	if err != nil {
		return nil, err
	}
	e, ok := s.index.get(subject, keyedRef(k, ref))
	if !ok {
		return nil, store.ErrContentNotFound
	}
	sealed, err := s.inner.Get(ctx, e.Inner)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(k.Bytes)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error {
		return &SealError{ExecutionID: "", Field: "content " + ref, Reason: "authentication failed", Err: err}
	}
	if len(sealed) < nonceBytes {
		return nil, fail(errors.New("sealed blob too short"))
	}
	plain, err := aead.Open(nil, sealed[:nonceBytes], sealed[nonceBytes:], contentAAD(subject, k.ID, ref))
	if err != nil {
		return nil, fail(err)
	}
	if actual := store.ContentRef(plain); actual != ref {
		return nil, &store.ContentCorruptError{Ref: ref, Actual: actual}
	}
	return plain, nil
}

// Delete implements store.ContentDeleter: idempotent, like the inner one.
func (s *ContentStore) Delete(ctx context.Context, ref string) error {
	if err := s.usable(); err != nil {
		return err
	}
	if !store.IsContentRef(ref) {
		return nil
	}
	subject, err := s.subjectOf(ctx)
	if err != nil {
		return err
	}
	keyID, ok := s.index.keyID(subject)
	if !ok {
		return nil
	}
	k, err := s.keys.Open(ctx, subject, keyID)
	if errors.Is(err, ErrKeyDestroyed) {
		return nil // PurgeSubject removes an erased subject's blobs
	}
	if err != nil {
		return err
	}
	e, ok := s.index.get(subject, keyedRef(k, ref))
	if !ok {
		return nil
	}
	if err := s.inner.Delete(ctx, e.Inner); err != nil {
		return err
	}
	return s.index.record(indexEntry{Op: "del", Subject: subject, Ref: e.Ref})
}

// PurgeSubject deletes every sealed blob of subject from the inner store
// (after EraseSubject they can never be opened; this returns the space)
// and returns how many it deleted. It needs no key.
func (s *ContentStore) PurgeSubject(ctx context.Context, subject string) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range s.index.of(subject) {
		if err := s.inner.Delete(ctx, e.Inner); err != nil {
			return n, err
		}
		if err := s.index.record(indexEntry{Op: "del", Subject: subject, Ref: e.Ref}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Close closes the index and the inner store (not the KeyStore).
func (s *ContentStore) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	err := s.index.close()
	if ierr := s.inner.Close(); err == nil {
		err = ierr
	}
	return err
}

func (s *ContentStore) usable() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// keyedRef hides the plaintext ref in the index: HMAC under the data key.
func keyedRef(k DataKey, ref string) string {
	m := hmac.New(sha256.New, k.Bytes)
	m.Write([]byte("loom-crypto/content-ref/v1\x00" + ref))
	return hex.EncodeToString(m.Sum(nil))
}

// deriveNonce makes sealing deterministic per (key, blob): the same bytes
// seal to the same blob, which only reveals that a subject stored the same
// bytes twice.
func deriveNonce(k DataKey, ref string) []byte {
	m := hmac.New(sha256.New, k.Bytes)
	m.Write([]byte("loom-crypto/content-nonce/v1\x00" + ref))
	return bytes.Clone(m.Sum(nil)[:nonceBytes])
}

func contentAAD(subject, keyID, ref string) []byte {
	return []byte("loom-crypto/content/v1\x00" + subject + "\x00" + keyID + "\x00" + ref)
}
