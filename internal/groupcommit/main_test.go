package groupcommit

import (
	"testing"

	"go.uber.org/goleak"
)

// Every leader runs on a caller's goroutine and every caller returns: no
// test may leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
