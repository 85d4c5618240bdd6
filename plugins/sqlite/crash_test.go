package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// TestCrashMatrixSQLite runs the crash matrix (internal/crashtest) over
// SQLite: every append point of both flows — the order flow, and the
// payment flow with its in-doubt parks and idempotency-keyed sink — in
// StepDurable and WriteBehind mode, each case on a new database file,
// recovered by a fresh runtime over the same file. The files keep the default synchronous=FULL: with
// group commit the whole matrix takes seconds, so it runs on the durability
// level users get.
func TestCrashMatrixSQLite(t *testing.T) {
	crashtest.Run(t, func(t *testing.T) crashtest.Stores {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "crash.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return crashtest.Stores{Events: db.EventStore(), Snapshots: db.SnapshotStore()}
	})
}
