package crypto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// MaxContentIndexEntries caps the blobs one content index tracks; a Put of
// a new blob past it is refused with ErrContentIndexFull.
const MaxContentIndexEntries = 1 << 22

// ErrContentIndexFull is returned by a Put past MaxContentIndexEntries.
var ErrContentIndexFull = errors.New("crypto: content index full")

// contentIndex is the durable map from (subject, keyed digest of the
// plaintext ref) to the inner store's ref of the sealed blob: an
// append-only file of JSON lines, each synced before Put returns. A torn
// last line (a crash mid-write) is dropped at open; any other bad line
// refuses the open.
type contentIndex struct {
	path string
	mu   sync.Mutex
	f    *os.File
	// entries: subject → keyed ref → entry.
	entries map[string]map[string]indexEntry
	size    int
}

type indexEntry struct {
	Op      string `json:"op"` // "put" or "del"
	Subject string `json:"s"`
	Ref     string `json:"h"` // HMAC of the plaintext ref under the data key
	Inner   string `json:"i,omitempty"`
	KeyID   string `json:"k,omitempty"`
}

func openContentIndex(path string) (*contentIndex, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, &KeyStoreFileError{Path: path, Err: err}
	}
	ix := &contentIndex{path: path, entries: map[string]map[string]indexEntry{}}
	good := 0
	for {
		nl := bytes.IndexByte(b[good:], '\n')
		if nl < 0 {
			break // empty, or a torn last line: the write did not finish
		}
		var e indexEntry
		if err := json.Unmarshal(b[good:good+nl], &e); err != nil || (e.Op != "put" && e.Op != "del") {
			return nil, &KeyStoreFileError{Path: path, Err: fmt.Errorf("bad content index line at byte %d", good)}
		}
		ix.apply(e)
		good += nl + 1
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &KeyStoreFileError{Path: path, Err: err}
	}
	if int64(good) < int64(len(b)) {
		// Drop the torn tail durably before appending after it.
		if err = f.Truncate(int64(good)); err == nil {
			err = f.Sync()
		}
	} else if b == nil {
		err = syncDir(filepath.Dir(path)) // a new file: make its name durable
	}
	if err == nil {
		_, err = f.Seek(int64(good), 0)
	}
	if err != nil {
		_ = f.Close() // the open failed; nothing was written
		return nil, &KeyStoreFileError{Path: path, Err: err}
	}
	ix.f = f
	return ix, nil
}

func (ix *contentIndex) apply(e indexEntry) {
	m := ix.entries[e.Subject]
	switch e.Op {
	case "put":
		if m == nil {
			m = map[string]indexEntry{}
			ix.entries[e.Subject] = m
		}
		if _, ok := m[e.Ref]; !ok {
			ix.size++
		}
		m[e.Ref] = e
	case "del":
		if _, ok := m[e.Ref]; ok {
			delete(m, e.Ref)
			ix.size--
		}
		if len(m) == 0 {
			delete(ix.entries, e.Subject)
		}
	}
}

func (ix *contentIndex) get(subject, ref string) (indexEntry, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e, ok := ix.entries[subject][ref]
	return e, ok
}

// keyID returns the key id the subject's entries were sealed under.
func (ix *contentIndex) keyID(subject string) (string, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, e := range ix.entries[subject] { //loom:sorted any entry will do: one key per subject
		return e.KeyID, true
	}
	return "", false
}

// of returns every entry of subject.
func (ix *contentIndex) of(subject string) []indexEntry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]indexEntry, 0, len(ix.entries[subject]))
	for _, e := range ix.entries[subject] { //loom:sorted the caller deletes each, order-free
		out = append(out, e)
	}
	return out
}

// record appends e durably, then applies it.
func (ix *contentIndex) record(e indexEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.f == nil {
		return errIndexClosed
	}
	if e.Op == "put" && ix.size >= MaxContentIndexEntries {
		return ErrContentIndexFull
	}
	if _, err := ix.f.Write(append(line, '\n')); err != nil {
		return &KeyStoreFileError{Path: ix.path, Err: err}
	}
	if err := ix.f.Sync(); err != nil {
		return &KeyStoreFileError{Path: ix.path, Err: err}
	}
	ix.apply(e)
	return nil
}

var errIndexClosed = errors.New("crypto: content index closed")

func (ix *contentIndex) close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.f == nil {
		return nil
	}
	err := ix.f.Close()
	ix.f = nil
	return err
}
