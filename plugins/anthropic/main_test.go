package anthropic_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Servers, connections and streams must all end with their test: a stream
// left open is a body the provider forgot to close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
