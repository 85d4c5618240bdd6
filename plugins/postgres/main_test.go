package postgres

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails the whole package at once, with one message, when no
// server is configured: the PostgreSQL tests never skip.
func TestMain(m *testing.M) {
	if os.Getenv(dsnEnv) == "" {
		fmt.Fprintf(os.Stderr, "FAIL: %s is not set: the plugins/postgres tests need a PostgreSQL server and never skip.\n"+
			"Run ./scripts/test.sh, which starts a throwaway cluster, or start one by hand:\n"+
			"\teval \"$(./scripts/pg-start.sh)\" && go test ./plugins/postgres/ ; ./scripts/pg-stop.sh\n", dsnEnv)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
