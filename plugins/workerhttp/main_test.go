package workerhttp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Servers, connections, drives and waits must all end with their test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
