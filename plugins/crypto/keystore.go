package crypto

import (
	"context"
	"errors"
	"strconv"
)

// KeyStoreSPIVersion versions the KeyStore SPI: a MINOR bump adds an
// optional interface, a MAJOR bump changes a method's contract.
const KeyStoreSPIVersion = "1.0.0"

// DataKeyBytes is the size of a data key: AES-256.
const DataKeyBytes = 32

// DataKey is one subject's data key. ID names it in every seal; Bytes is the
// AES-256 key, which callers never store, log or compare outside this
// package.
type DataKey struct {
	Subject string
	ID      string
	Bytes   []byte
}

// KeyStore holds one data key per subject (a person, a tenant: whoever
// erasure is requested for). It is the only place key material lives; the
// wrappers ask it for a key on every seal and every open, so a Destroy is
// seen by every wrapper over the same KeyStore at once.
//
// A KMS implementation satisfies the same interface: Key generates (or
// unwraps) a data key under a KMS key-encryption key and caches it, Open
// unwraps by id, Destroy schedules the KMS deletion of the wrapped key and
// records the proof. Every method is safe for concurrent use.
type KeyStore interface {
	// Key returns the subject's data key, creating it durably on first use
	// (the write path). For a destroyed subject it returns
	// *KeyDestroyedError and creates nothing: data of an erased subject is
	// never written again.
	Key(ctx context.Context, subject string) (DataKey, error)
	// Open returns the data key keyID of subject (the read path). It
	// returns *KeyDestroyedError when that subject's key was destroyed, and
	// ErrKeyNotFound when this store never held keyID for subject (another
	// keystore, a forged seal).
	Open(ctx context.Context, subject, keyID string) (DataKey, error)
	// Destroy makes the subject's key unrecoverable, durably, and returns
	// the proof it records. Destroying a destroyed subject returns the
	// recorded proof again; destroying a subject that never had a key
	// records a proof with an empty KeyID, so no key is created for it
	// later either.
	Destroy(ctx context.Context, subject string) (DestructionProof, error)
	// Close releases the store; later calls return ErrKeyStoreClosed.
	Close() error
}

// ProofVerifier is an optional KeyStore capability: it checks a
// DestructionProof it issued.
type ProofVerifier interface {
	// VerifyProof returns nil iff p was issued by this store (its Digest
	// matches under the store's master key) and the subject is destroyed.
	VerifyProof(ctx context.Context, p DestructionProof) error
}

// DestructionProof records that a subject's key was destroyed.
type DestructionProof struct {
	// Version is the proof format, ProofVersion.
	Version int    `json:"v"`
	Subject string `json:"subject"`
	// KeyID is the id of the destroyed key, as every seal of it names it
	// ("" when the subject never had a key).
	KeyID string `json:"keyId"`
	// DestroyedAt is epoch milliseconds from the keystore's injected clock.
	DestroyedAt int64 `json:"destroyedAt"`
	// Digest is hex HMAC-SHA256 under the master key of the version,
	// subject, key id and time: only the keystore that destroyed the key
	// can issue or verify it, and it reveals nothing of the key.
	Digest string `json:"digest"`
}

// ProofVersion is the DestructionProof format this package writes.
const ProofVersion = 1

var (
	// ErrKeyDestroyed matches *KeyDestroyedError.
	ErrKeyDestroyed = errors.New("crypto: key destroyed")
	// ErrKeyNotFound is returned by KeyStore.Open for a key id the store
	// never held for the subject.
	ErrKeyNotFound = errors.New("crypto: key not found")
	// ErrKeyStoreClosed is returned by every method of a closed KeyStore.
	ErrKeyStoreClosed = errors.New("crypto: keystore closed")
	// ErrInvalidSubject is returned for an empty or oversized subject, or
	// one with a control character.
	ErrInvalidSubject = errors.New("crypto: invalid subject")
	// ErrProofInvalid is returned by VerifyProof for a proof the store did
	// not issue.
	ErrProofInvalid = errors.New("crypto: destruction proof invalid")
)

// KeyDestroyedError reports that Subject's key was destroyed (crypto-
// shredded): its sealed data can never be opened again.
type KeyDestroyedError struct {
	Subject string
	Proof   DestructionProof
}

func (e *KeyDestroyedError) Error() string {
	return "crypto: the key of subject " + strconv.Quote(e.Subject) + " was destroyed"
}

// Is makes errors.Is(err, ErrKeyDestroyed) true.
func (e *KeyDestroyedError) Is(target error) bool { return target == ErrKeyDestroyed }
