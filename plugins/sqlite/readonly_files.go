package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The files behind a read-only store: what is on disk, whether it changed,
// and the private copy a read-only open may need.

// fileState is what the files on disk look like: the database file and its
// three possible companions.
type fileState struct {
	db, wal, shm, journal os.FileInfo // nil when absent
	hotJournal            bool
}

// statFiles looks at the database file and its companions without opening
// any but a rollback journal's header (a regular file). Every file present
// must be a regular file.
func statFiles(path string) (fileState, error) {
	var st fileState
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, fmt.Errorf("sqlite: no store at %s: %w", path, fs.ErrNotExist)
	case err != nil:
		return st, fmt.Errorf("sqlite: %w", err)
	case !info.Mode().IsRegular():
		return st, &NotAStoreError{Path: path, Reason: "is " + fileKind(info.Mode()) + ", not a database file"}
	}
	st.db = info
	for _, side := range []struct {
		suffix string
		into   *os.FileInfo
	}{{"-wal", &st.wal}, {"-shm", &st.shm}, {"-journal", &st.journal}} {
		info, err := os.Stat(path + side.suffix)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return st, fmt.Errorf("sqlite: %w", err)
		case !info.Mode().IsRegular():
			return st, &NotAStoreError{Path: path, Reason: "has a " + side.suffix + " that is " + fileKind(info.Mode()) +
				", not a file SQLite wrote"}
		}
		*side.into = info
	}
	if st.journal != nil && st.journal.Size() >= int64(len(journalMagic)) {
		st.hotJournal, err = hasJournalHeader(path + "-journal")
		if err != nil {
			return st, fmt.Errorf("sqlite: %w", err)
		}
	}
	return st, nil
}

// journalMagic starts the header of a rollback journal that still has to
// be played back; a committed one is deleted, truncated or zeroed.
var journalMagic = []byte{0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7}

func hasJournalHeader(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close() // opened for reading: nothing to lose
	head := make([]byte, len(journalMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false, nil // shorter than a header: not a journal to play back
	}
	return bytes.Equal(head, journalMagic), nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// mode picks how files can be read without writing to them.
func (st fileState) mode() ReadMode {
	switch {
	case st.hotJournal:
		return ReadSnapshot
	case st.wal != nil && st.wal.Size() > 0 && st.shm != nil:
		return ReadWAL
	case st.wal != nil && st.wal.Size() > 0:
		return ReadSnapshot // a -wal whose index SQLite would have to create
	}
	return ReadFile
}

// sameFile reports whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// needsReopen reports whether a connection opened over old cannot serve
// the files as they are now: another mode, another database file, another
// -shm (a writer that stopped and started again), or, for an immutable
// file or a private copy, any change of it at all (an immutable connection
// trusts the pages it has read).
func needsReopen(old, now fileState) bool {
	mode := old.mode()
	switch {
	case mode != now.mode(), !os.SameFile(old.db, now.db):
		return true
	case mode == ReadFile:
		return !sameFile(old.db, now.db)
	case mode == ReadWAL:
		return !os.SameFile(old.shm, now.shm)
	case mode == ReadSnapshot:
		return !sameFile(old.db, now.db) || !sameFile(old.wal, now.wal) || !sameFile(old.journal, now.journal)
	}
	return false
}

// changed reports whether anything on disk moved between old and now.
func changed(old, now fileState) bool {
	return !sameFile(old.db, now.db) || !sameFile(old.wal, now.wal) || !sameFile(old.shm, now.shm) ||
		!sameFile(old.journal, now.journal)
}

// open opens files in their mode and checks the schema.
func (db *ReadOnlyDB) open(files fileState) (c *readConn, err error) {
	c = &readConn{mode: files.mode(), files: files}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.close())
		}
	}()
	path := db.path
	if c.mode == ReadSnapshot {
		if c.tmp, path, err = copyForReading(db.path, files); err != nil {
			return c, err
		}
	}
	if c.pool, err = openPool(db.dsn(path, c.mode)); err != nil {
		return c, err
	}
	c.pool.SetMaxOpenConns(db.opts.readConns)
	c.pool.SetMaxIdleConns(db.opts.readConns)
	if err := db.checkSchema(c); err != nil {
		return c, err
	}
	return c, nil
}

// dsn is the URI of path for mode: immutable for a file no log holds
// commits for, a read-only -shm for a write-ahead log, and the plain file
// for a private copy, which SQLite may repair.
func (db *ReadOnlyDB) dsn(path string, mode ReadMode) string {
	q := []string{"_pragma=busy_timeout(" + strconv.FormatInt(db.opts.busyTimeout.Milliseconds(), 10) + ")"}
	switch mode {
	case ReadFile:
		q = append(q, "mode=ro", "immutable=1")
	case ReadWAL:
		q = append(q, "mode=ro", "readonly_shm=1")
	}
	return fileURI(path) + "?" + strings.Join(append(q, "_pragma=query_only(1)"), "&")
}

// copyForReading copies the database file and the companion SQLite needs
// to play back (its hot journal, or its -wal) into a new temporary
// directory, and lets SQLite repair the copy there. It returns the
// directory and the copy's path.
func copyForReading(path string, files fileState) (dir, copied string, err error) {
	dir, err = os.MkdirTemp("", "loom-readonly-")
	if err != nil {
		return "", "", fmt.Errorf("sqlite: a private copy of %s: %w", path, err)
	}
	copied = filepath.Join(dir, "store.db")
	suffixes := []string{""}
	switch {
	case files.hotJournal:
		suffixes = append(suffixes, "-journal")
	case files.wal != nil:
		suffixes = append(suffixes, "-wal")
	}
	for _, s := range suffixes {
		if err := copyFile(path+s, copied+s); err != nil {
			return dir, "", fmt.Errorf("sqlite: a private copy of %s: %w", path+s, err)
		}
	}
	// One read-write connection plays the journal back (or recovers the
	// log) in the copy, and checkpoints it on close.
	repair, err := openPool(fileURI(copied) + "?_pragma=busy_timeout(5000)")
	if err != nil {
		return dir, "", err
	}
	_, qerr := repair.Exec(`SELECT count(*) FROM sqlite_master`)
	if err := errors.Join(qerr, repair.Close()); err != nil {
		return dir, "", &NotAStoreError{Path: path, Reason: "cannot be read: " + err.Error()}
	}
	return dir, copied, nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close() // opened for reading: nothing to lose
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
