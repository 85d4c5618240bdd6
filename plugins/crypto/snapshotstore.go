package crypto

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/loom-kernel/loom/store"
)

// SubjectResolver finds the subject an execution is sealed under ("" for
// one that is not sealed). *EventStore implements it from metadata.seal of
// sequence 0, so snapshots are sealed under the subject the log chose.
type SubjectResolver interface {
	SubjectOf(ctx context.Context, executionID string) (string, error)
}

// SubjectResolverFunc adapts a function to SubjectResolver.
type SubjectResolverFunc func(ctx context.Context, executionID string) (string, error)

// SubjectOf calls f.
func (f SubjectResolverFunc) SubjectOf(ctx context.Context, executionID string) (string, error) {
	return f(ctx, executionID)
}

// InnerSnapshotStore is the store a SnapshotStore wraps: the SPI and every
// optional capability memstore, plugins/sqlite and plugins/postgres
// implement.
type InnerSnapshotStore interface {
	store.SnapshotStore
	store.SnapshotLister
	store.SnapshotPruner
	store.SnapshotDeleter
}

// Snapshot frames: every state this wrapper writes starts with one of
// them, so a sealed and an unsealed state are never confused.
var (
	sealedFrame = []byte("\x00loom-sealed-snapshot/1\x00")
	plainFrame  = []byte("\x00loom-plain-snapshot/1\x00")
)

// MaxSnapshotHeaderBytes caps the header of a sealed snapshot frame.
const MaxSnapshotHeaderBytes = 4 << 10

// SnapshotStore seals every snapshot's whole State under its execution's
// subject (AES-256-GCM; the execution id, sequence, schema version and key
// name are the additional data). A snapshot of an erased subject reads as
// none — LoadLatest and LoadAt answer not found, so the runtime folds the
// log, whose members read as shredded markers — and Save of one is refused
// with *KeyDestroyedError. A state that does not open, or a plaintext
// state of a sealed execution, is *SealError. An execution with no subject
// is stored unsealed, framed.
type SnapshotStore struct {
	inner    InnerSnapshotStore
	keys     KeyStore
	subjects SubjectResolver
	rand     io.Reader
	closed   atomic.Bool
}

// NewSnapshotStore wraps inner. It refuses an inner store without
// ListSequences, Prune and DeleteExecution with *MissingCapabilityError.
// rnd is the nonce source (nil: crypto/rand).
func NewSnapshotStore(inner store.SnapshotStore, keys KeyStore, subjects SubjectResolver, rnd io.Reader) (*SnapshotStore, error) {
	if inner == nil || keys == nil || subjects == nil {
		return nil, errors.New("crypto: NewSnapshotStore needs an inner store, a KeyStore and a SubjectResolver")
	}
	in, ok := inner.(InnerSnapshotStore)
	if !ok {
		return nil, &MissingCapabilityError{Store: "SnapshotStore", Capability: "store.SnapshotLister, store.SnapshotPruner and store.SnapshotDeleter"}
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	return &SnapshotStore{inner: in, keys: keys, subjects: subjects, rand: rnd}, nil
}

type snapshotHeader struct {
	Subject string `json:"subject"`
	KeyID   string `json:"keyId"`
}

// Save implements store.SnapshotStore.
func (s *SnapshotStore) Save(ctx context.Context, snap store.Snapshot) error {
	if err := s.usable(); err != nil {
		return err
	}
	subject, err := s.subjects.SubjectOf(ctx, snap.ExecutionID)
	if err != nil {
		return err
	}
	if subject == "" {
		snap.State = append(bytes.Clone(plainFrame), snap.State...)
		return s.inner.Save(ctx, snap)
	}
	k, err := s.keys.Key(ctx, subject)
	if err != nil {
		return err
	}
	aead, err := newAEAD(k.Bytes)
	if err != nil {
		return err
	}
	h, err := json.Marshal(snapshotHeader{Subject: subject, KeyID: k.ID})
	if err != nil {
		return err
	}
	sealed, err := sealBytes(aead, s.rand, snap.State, snapshotAAD(snap, subject, k.ID))
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(sealedFrame)+binary.MaxVarintLen64+len(h)+len(sealed))
	out = append(out, sealedFrame...)
	out = binary.AppendUvarint(out, uint64(len(h)))
	out = append(out, h...)
	snap.State = append(out, sealed...)
	return s.inner.Save(ctx, snap)
}

// LoadLatest implements store.SnapshotStore.
func (s *SnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	if err := s.usable(); err != nil {
		return store.Snapshot{}, false, err
	}
	snap, ok, err := s.inner.LoadLatest(ctx, executionID)
	return s.open(ctx, snap, ok, err)
}

// LoadAt implements store.SnapshotStore.
func (s *SnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	if err := s.usable(); err != nil {
		return store.Snapshot{}, false, err
	}
	snap, ok, err := s.inner.LoadAt(ctx, executionID, atMost)
	return s.open(ctx, snap, ok, err)
}

// ListSequences implements store.SnapshotLister.
func (s *SnapshotStore) ListSequences(ctx context.Context, executionID string) ([]int64, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	return s.inner.ListSequences(ctx, executionID)
}

// Prune implements store.SnapshotPruner.
func (s *SnapshotStore) Prune(ctx context.Context, executionID string, below int64) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	return s.inner.Prune(ctx, executionID, below)
}

// DeleteExecution implements store.SnapshotDeleter.
func (s *SnapshotStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.inner.DeleteExecution(ctx, executionID)
}

// Close closes the inner store (not the KeyStore).
func (s *SnapshotStore) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	return s.inner.Close()
}

func (s *SnapshotStore) usable() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

func (s *SnapshotStore) open(ctx context.Context, snap store.Snapshot, ok bool, err error) (store.Snapshot, bool, error) {
	if err != nil || !ok {
		return snap, ok, err
	}
	fail := func(reason string, err error) (store.Snapshot, bool, error) {
		return store.Snapshot{}, false, &SealError{ExecutionID: snap.ExecutionID, Sequence: snap.Sequence,
			Field: "snapshot", Reason: reason, Err: err}
	}
	if rest, ok := bytes.CutPrefix(snap.State, plainFrame); ok {
		subject, err := s.subjects.SubjectOf(ctx, snap.ExecutionID)
		if err != nil {
			return store.Snapshot{}, false, err
		}
		if subject != "" {
			return fail("a plaintext checkpoint of an execution sealed under a subject", nil)
		}
		snap.State = rest
		return snap, true, nil
	}
	rest, ok := bytes.CutPrefix(snap.State, sealedFrame)
	if !ok {
		return fail("not a frame this store wrote", nil)
	}
	n, size := binary.Uvarint(rest)
	if size <= 0 || n > MaxSnapshotHeaderBytes || uint64(len(rest)-size) < n {
		return fail("malformed frame header", nil)
	}
	var h snapshotHeader
	if err := json.Unmarshal(rest[size:size+int(n)], &h); err != nil || h.Subject == "" || h.KeyID == "" {
		return fail("malformed frame header", err)
	}
	k, err := s.keys.Open(ctx, h.Subject, h.KeyID)
	if errors.Is(err, ErrKeyDestroyed) {
		return store.Snapshot{}, false, nil
	}
	if err != nil {
		return fail("the key of the seal is not available", err)
	}
	aead, err := newAEAD(k.Bytes)
	if err != nil {
		return fail("bad data key", err)
	}
	plain, err := openBytes(aead, rest[size+int(n):], snapshotAAD(snap, h.Subject, h.KeyID))
	if err != nil {
		return fail("authentication failed", err)
	}
	snap.State = plain
	return snap, true, nil
}

func snapshotAAD(snap store.Snapshot, subject, keyID string) []byte {
	return []byte("loom-crypto/snapshot/v1\x00" + snap.ExecutionID + "\x00" + strconv.FormatInt(snap.Sequence, 10) +
		"\x00" + snap.SchemaVersion + "\x00" + subject + "\x00" + keyID)
}
