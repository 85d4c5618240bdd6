package dispatch_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Dispatches, flow drives and waits must all end with their runtime: no test
// may leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
