package postgres

import (
	"testing"

	"github.com/loom-kernel/loom/internal/crashtest"
)

// TestCrashMatrixPostgres runs the crash matrix (internal/crashtest) over
// PostgreSQL: every append point of the matrix's flows, in every durability mode,
// each case in a new schema, recovered by a fresh runtime over the same
// stores, on the server's durability settings users get.
func TestCrashMatrixPostgres(t *testing.T) {
	crashtest.Run(t, func(t *testing.T) crashtest.Stores {
		db := openTestDB(t)
		return crashtest.Stores{Events: db.EventStore(), Snapshots: db.SnapshotStore()}
	})
}
