package sqlite

import (
	"fmt"

	msqlite "modernc.org/sqlite"
)

// MaxCachedLengths caps the log lengths the writer remembers; past it the
// cache starts over, and the next append of each log reads its length once.
const MaxCachedLengths = 1 << 16

// lengthCache remembers, on the writer, how many events each recently
// written log holds, so the sequence check of an append costs no query.
//
// It is only trusted while this connection is the file's only writer. The
// SQLite pager's data version (SQLITE_FCNTL_DATA_VERSION) changes on every
// commit, this connection's or another's, possibly in another process; the
// cache records it after each of its own commits and, once a new
// transaction holds the write lock, drops every entry if it moved. A failed
// transaction drops every entry too. So a stale length is never used: the
// worst case is one extra read per log.
type lengthCache struct {
	fc      msqlite.FileControl
	version uint32
	known   bool // version is the one after this connection's last commit
	lengths map[string]int64
}

func newLengthCache(dc any) (*lengthCache, error) {
	fc, ok := dc.(msqlite.FileControl)
	if !ok {
		return nil, fmt.Errorf("sqlite: driver connection %T has no file control", dc)
	}
	return &lengthCache{fc: fc, lengths: make(map[string]int64)}, nil
}

func (lc *lengthCache) dataVersion() (uint32, error) {
	v, err := lc.fc.FileControlDataVersion("main")
	if err != nil {
		return 0, fmt.Errorf("sqlite: read data version: %w", err)
	}
	return v, nil
}

// began is called inside a new write transaction: it drops the entries if
// anyone else committed since this connection's last commit.
func (lc *lengthCache) began() error {
	v, err := lc.dataVersion()
	if err != nil {
		return err
	}
	if !lc.known || v != lc.version {
		clear(lc.lengths)
	}
	lc.known = false
	return nil
}

// committed records the data version this connection's commit left. It
// cannot fail the commit, which is already durable: if the version cannot
// be read, the cache is dropped instead.
func (lc *lengthCache) committed() {
	v, err := lc.dataVersion()
	if err != nil {
		lc.reset()
		return
	}
	lc.version, lc.known = v, true
}

// reset forgets everything, after a rolled-back or failed transaction.
func (lc *lengthCache) reset() {
	clear(lc.lengths)
	lc.known = false
}

// get returns the cached length of execID.
func (lc *lengthCache) get(execID string) (int64, bool) {
	n, ok := lc.lengths[execID]
	return n, ok
}

// set records the length of execID once the transaction that wrote it
// has committed.
func (lc *lengthCache) set(execID string, n int64) {
	if len(lc.lengths) >= MaxCachedLengths {
		clear(lc.lengths)
	}
	lc.lengths[execID] = n
}

// forget drops execID, for writes that change a log outside appends.
func (lc *lengthCache) forget(execID string) { delete(lc.lengths, execID) }
