package schedule

import (
	"testing"

	"go.uber.org/goleak"
)

// The runtimes the tests start must stop with them: no goroutine may be
// left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
