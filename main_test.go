package loom_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Flow branches, journal tails and waits must all end with their runtime:
// no test may leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
