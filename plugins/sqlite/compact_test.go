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
