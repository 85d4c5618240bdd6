package crypto

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
)

// MaxFileKeyStoreSubjects caps the subjects (live and destroyed) one file
// keystore holds; Key refuses a new subject past it with
// ErrKeyStoreFull. Every change rewrites the whole file, so the file is for
// one node with up to this many subjects; beyond it, use a KMS KeyStore.
const MaxFileKeyStoreSubjects = 1 << 20

// fileFormat is the version of the keystore file.
const fileFormat = 1

// saltBytes and keyIDBytes size the random per-subject salt and key id.
const (
	saltBytes  = 32
	keyIDBytes = 16
)

// ErrKeyStoreFull is returned by Key for a new subject once the file holds
// MaxFileKeyStoreSubjects subjects.
var ErrKeyStoreFull = errors.New("crypto: keystore full")

// FileKeyStoreOptions configures OpenFileKeyStore. Exactly one of
// MasterKey and MasterKeyFile is set.
type FileKeyStoreOptions struct {
	// MasterKey is the 32-byte master key the app supplies.
	MasterKey []byte
	// MasterKeyFile names a file holding the master key: 32 raw bytes, or
	// 64 hex digits with an optional trailing newline.
	MasterKeyFile string
	// Clock stamps destruction proofs (default time.Now).
	Clock func() time.Time
	// Rand is the source of salts and key ids (default crypto/rand).
	Rand io.Reader
}

// FileKeyStore is a KeyStore in one file, for one node: each subject's
// data key is derived with HKDF-SHA256 from the master key and a random
// per-subject salt kept in the file; Destroy deletes the salt, so the key
// can never be derived again, and records the proof. Every change is
// written to a temporary file, synced and renamed over the old one (and the
// directory synced), so a crash leaves the old file or the new one, never a
// torn one. One process owns the file: two processes writing it lose
// changes.
type FileKeyStore struct {
	path   string
	master []byte
	clock  func() time.Time
	rand   io.Reader

	mu     sync.Mutex
	closed bool
	file   keyFile
}

// keyFile is the on-disk form. Check is an HMAC of a fixed label under the
// master key, so a wrong master key is refused at open.
type keyFile struct {
	Format    int                         `json:"format"`
	Check     string                      `json:"check"`
	Subjects  map[string]subjectEntry     `json:"subjects"`
	Destroyed map[string]DestructionProof `json:"destroyed"`
}

type subjectEntry struct {
	KeyID     string `json:"keyId"`
	Salt      string `json:"salt"`
	CreatedAt int64  `json:"createdAt"`
}

// OpenFileKeyStore opens the keystore file at path, creating it when it
// does not exist. It refuses a missing, unreadable or wrong-size master key
// with *MasterKeyError, a master key other than the one the file was
// created under with ErrMasterKeyMismatch, and a file it cannot parse with
// *KeyStoreFileError; in every refusal it writes nothing.
func OpenFileKeyStore(path string, opts FileKeyStoreOptions) (*FileKeyStore, error) {
	master, err := loadMasterKey(opts)
	if err != nil {
		return nil, err
	}
	ks := &FileKeyStore{path: path, master: master, clock: opts.Clock, rand: opts.Rand}
	if ks.clock == nil {
		ks.clock = time.Now
	}
	if ks.rand == nil {
		ks.rand = rand.Reader
	}
	check := ks.mac("loom-crypto/keystore-check/v1")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		ks.file = keyFile{Format: fileFormat, Check: check,
			Subjects: map[string]subjectEntry{}, Destroyed: map[string]DestructionProof{}}
		if err := ks.write(ks.file); err != nil {
			return nil, err
		}
		return ks, nil
	case err != nil:
		return nil, &KeyStoreFileError{Path: path, Err: err}
	}
	if err := json.Unmarshal(b, &ks.file); err != nil {
		return nil, &KeyStoreFileError{Path: path, Err: err}
	}
	if ks.file.Format != fileFormat {
		return nil, &KeyStoreFileError{Path: path, Err: fmt.Errorf("format %d, want %d", ks.file.Format, fileFormat)}
	}
	if !hmac.Equal([]byte(ks.file.Check), []byte(check)) {
		return nil, ErrMasterKeyMismatch
	}
	if ks.file.Subjects == nil {
		ks.file.Subjects = map[string]subjectEntry{}
	}
	if ks.file.Destroyed == nil {
		ks.file.Destroyed = map[string]DestructionProof{}
	}
	return ks, nil
}

// Path returns the keystore file's path.
func (ks *FileKeyStore) Path() string { return ks.path }

// Key implements KeyStore.
func (ks *FileKeyStore) Key(ctx context.Context, subject string) (DataKey, error) {
	if err := validSubject(subject); err != nil {
		return DataKey{}, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err := ks.usable(ctx); err != nil {
		return DataKey{}, err
	}
	if p, ok := ks.file.Destroyed[subject]; ok {
		return DataKey{}, &KeyDestroyedError{Subject: subject, Proof: p}
	}
	if e, ok := ks.file.Subjects[subject]; ok {
		return ks.derive(subject, e)
	}
	if len(ks.file.Subjects)+len(ks.file.Destroyed) >= MaxFileKeyStoreSubjects {
		return DataKey{}, ErrKeyStoreFull
	}
	var id [keyIDBytes]byte
	var salt [saltBytes]byte
	if _, err := io.ReadFull(ks.rand, id[:]); err != nil {
		return DataKey{}, fmt.Errorf("crypto: key id: %w", err)
	}
	if _, err := io.ReadFull(ks.rand, salt[:]); err != nil {
		return DataKey{}, fmt.Errorf("crypto: salt: %w", err)
	}
	e := subjectEntry{KeyID: hex.EncodeToString(id[:]), Salt: hex.EncodeToString(salt[:]), CreatedAt: ks.clock().UnixMilli()}
	next := ks.file.clone()
	next.Subjects[subject] = e
	if err := ks.write(next); err != nil {
		return DataKey{}, err
	}
	ks.file = next
	return ks.derive(subject, e)
}

// Open implements KeyStore.
func (ks *FileKeyStore) Open(ctx context.Context, subject, keyID string) (DataKey, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err := ks.usable(ctx); err != nil {
		return DataKey{}, err
	}
	if p, ok := ks.file.Destroyed[subject]; ok {
		return DataKey{}, &KeyDestroyedError{Subject: subject, Proof: p}
	}
	e, ok := ks.file.Subjects[subject]
	if !ok || e.KeyID != keyID {
		return DataKey{}, ErrKeyNotFound
	}
	return ks.derive(subject, e)
}

// Destroy implements KeyStore: it removes the subject's salt and records
// the proof in one atomic rewrite of the file.
func (ks *FileKeyStore) Destroy(ctx context.Context, subject string) (DestructionProof, error) {
	if err := validSubject(subject); err != nil {
		return DestructionProof{}, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err := ks.usable(ctx); err != nil {
		return DestructionProof{}, err
	}
	if p, ok := ks.file.Destroyed[subject]; ok {
		return p, nil
	}
	p := DestructionProof{Version: ProofVersion, Subject: subject,
		KeyID: ks.file.Subjects[subject].KeyID, DestroyedAt: ks.clock().UnixMilli()}
	p.Digest = ks.proofDigest(p)
	next := ks.file.clone()
	delete(next.Subjects, subject)
	next.Destroyed[subject] = p
	if err := ks.write(next); err != nil {
		return DestructionProof{}, err
	}
	ks.file = next
	return p, nil
}

// VerifyProof implements ProofVerifier.
func (ks *FileKeyStore) VerifyProof(ctx context.Context, p DestructionProof) error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err := ks.usable(ctx); err != nil {
		return err
	}
	if p.Version != ProofVersion || !hmac.Equal([]byte(p.Digest), []byte(ks.proofDigest(p))) {
		return ErrProofInvalid
	}
	if _, ok := ks.file.Destroyed[p.Subject]; !ok {
		return ErrProofInvalid
	}
	return nil
}

// Close implements KeyStore. It zeroes the master key held in memory.
func (ks *FileKeyStore) Close() error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.closed {
		return ErrKeyStoreClosed
	}
	ks.closed = true
	clear(ks.master)
	return nil
}

func (ks *FileKeyStore) usable(ctx context.Context) error {
	if ks.closed {
		return ErrKeyStoreClosed
	}
	return ctx.Err()
}

// derive computes the data key: HKDF-SHA256(master, salt, info), info
// naming the subject and the key id, so two subjects never share a key
// even under one salt.
func (ks *FileKeyStore) derive(subject string, e subjectEntry) (DataKey, error) {
	salt, err := hex.DecodeString(e.Salt)
	if err != nil || len(salt) != saltBytes {
		return DataKey{}, &KeyStoreFileError{Path: ks.path, Err: errors.New("bad salt of subject " + strconv.Quote(subject))}
	}
	info := "loom-crypto/data-key/v1\x00" + subject + "\x00" + e.KeyID
	k, err := hkdf.Key(sha256.New, ks.master, salt, info, DataKeyBytes)
	if err != nil {
		return DataKey{}, fmt.Errorf("crypto: derive: %w", err)
	}
	return DataKey{Subject: subject, ID: e.KeyID, Bytes: k}, nil
}

func (ks *FileKeyStore) mac(msg string) string {
	m := hmac.New(sha256.New, ks.master)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func (ks *FileKeyStore) proofDigest(p DestructionProof) string {
	return ks.mac("loom-crypto/destruction/v" + strconv.Itoa(p.Version) + "\x00" + p.Subject + "\x00" +
		p.KeyID + "\x00" + strconv.FormatInt(p.DestroyedAt, 10))
}

// write replaces the file atomically: temp file, fsync, rename, fsync of
// the directory.
func (ks *FileKeyStore) write(f keyFile) (err error) {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("crypto: encode keystore: %w", err)
	}
	dir := filepath.Dir(ks.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(ks.path)+".tmp-*")
	if err != nil {
		return &KeyStoreFileError{Path: ks.path, Err: err}
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name()) // best effort; the old file is intact
		}
	}()
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), ks.path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return &KeyStoreFileError{Path: ks.path, Err: err}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f keyFile) clone() keyFile {
	out := keyFile{Format: f.Format, Check: f.Check,
		Subjects:  make(map[string]subjectEntry, len(f.Subjects)+1),
		Destroyed: make(map[string]DestructionProof, len(f.Destroyed)+1)}
	for k, v := range f.Subjects { //loom:sorted copy, order-free
		out.Subjects[k] = v
	}
	for k, v := range f.Destroyed { //loom:sorted copy, order-free
		out.Destroyed[k] = v
	}
	return out
}

func validSubject(subject string) error {
	if err := event.ValidateID("subject", subject); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSubject, err)
	}
	return nil
}
