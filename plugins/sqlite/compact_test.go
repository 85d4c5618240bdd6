package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// TestCompactThroughTheStoragePreset runs the compaction kit over the
// Storage preset on one file, reopened.
func TestCompactThroughTheStoragePreset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	storetest.RunCompaction(t, storetest.CompactionFactory{Open: func(t *testing.T) (store.Set, func() error) {
		st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st.StoreSet(), st.Close
	}})
}

// TestCompactionCrashes kills a compaction at each of its writes on a real
// file and reopens it.
func TestCompactionCrashes(t *testing.T) {
	storetest.RunCompactionCrashes(t, func(t *testing.T) storetest.CompactionFactory {
		path := filepath.Join(t.TempDir(), "loom.db")
		return storetest.CompactionFactory{Open: func(t *testing.T) (store.Set, func() error) {
			st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			return st.StoreSet(), st.Close
		}}
	})
}
