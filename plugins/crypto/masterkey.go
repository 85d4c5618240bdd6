package crypto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
)

// MasterKeyBytes is the size of a master key.
const MasterKeyBytes = 32

var (
	// ErrMasterKey matches *MasterKeyError.
	ErrMasterKey = errors.New("crypto: bad master key")
	// ErrMasterKeyMismatch is returned by OpenFileKeyStore when the master
	// key is not the one the file was created under.
	ErrMasterKeyMismatch = errors.New("crypto: master key does not match the keystore")
)

// MasterKeyError refuses a master key: none given, both given, a file that
// cannot be read, or one of the wrong size. It never holds key bytes.
type MasterKeyError struct {
	Reason string
	Err    error
}

func (e *MasterKeyError) Error() string {
	s := "crypto: bad master key: " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrMasterKey) true.
func (e *MasterKeyError) Is(target error) bool { return target == ErrMasterKey }

// Unwrap returns the file error, if any.
func (e *MasterKeyError) Unwrap() error { return e.Err }

// KeyStoreFileError reports a keystore file that cannot be read, parsed or
// written. On a write failure the previous file is intact.
type KeyStoreFileError struct {
	Path string
	Err  error
}

func (e *KeyStoreFileError) Error() string {
	return "crypto: keystore file " + strconv.Quote(e.Path) + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *KeyStoreFileError) Unwrap() error { return e.Err }

// loadMasterKey returns a private copy of the master key opts names.
func loadMasterKey(opts FileKeyStoreOptions) ([]byte, error) {
	switch {
	case opts.MasterKey != nil && opts.MasterKeyFile != "":
		return nil, &MasterKeyError{Reason: "both MasterKey and MasterKeyFile are set"}
	case opts.MasterKeyFile != "":
		b, err := os.ReadFile(opts.MasterKeyFile)
		if err != nil {
			return nil, &MasterKeyError{Reason: "cannot read " + strconv.Quote(opts.MasterKeyFile), Err: err}
		}
		return parseMasterKey(b)
	case opts.MasterKey != nil:
		if len(opts.MasterKey) != MasterKeyBytes {
			return nil, &MasterKeyError{Reason: strconv.Itoa(len(opts.MasterKey)) + " bytes, want " + strconv.Itoa(MasterKeyBytes)}
		}
		return bytes.Clone(opts.MasterKey), nil
	}
	return nil, &MasterKeyError{Reason: "neither MasterKey nor MasterKeyFile is set"}
}

// parseMasterKey reads 32 raw bytes, or 64 hex digits and an optional
// trailing newline.
func parseMasterKey(b []byte) ([]byte, error) {
	if len(b) == MasterKeyBytes {
		return bytes.Clone(b), nil
	}
	text := bytes.TrimRight(b, "\r\n")
	if len(text) == 2*MasterKeyBytes {
		k, err := hex.DecodeString(string(text))
		if err == nil {
			return k, nil
		}
	}
	return nil, &MasterKeyError{Reason: "the key file holds " + strconv.Itoa(len(b)) +
		" bytes, want " + strconv.Itoa(MasterKeyBytes) + " raw bytes or " + strconv.Itoa(2*MasterKeyBytes) + " hex digits"}
}
