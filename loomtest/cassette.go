package loomtest

import (
	"flag"
	"testing"

	"github.com/loom-kernel/loom/llm"
)

// RecordFlag is the test flag that makes Cassette record from the live
// provider instead of replaying: go test ./... -run TestX -loomtest.record.
const RecordFlag = "loomtest.record"

var record = flag.Bool(RecordFlag, false,
	"loomtest: record the llm cassettes (Cassette) from the live providers; the only mode that touches the network")

// Cassette opens the llm cassette at path (testdata/cassettes/triage.json,
// say) as the model provider of the test's flows, so agent flows never
// touch the network: it replays the recorded answers and refuses any
// request the file does not hold (*llm.UnrecordedRequestError, a step
// failure the test sees). Only with -loomtest.record does it call live for
// the real provider, record each answer, and save the file when the test
// ends (a save that fails fails t). Build the flows with the cassette, then
// the Env with the flows. A cassette that cannot be opened (in replay, a
// missing file) fails t at once, naming the flag that records it.
func Cassette(t testing.TB, path string, live func() (llm.Provider, error)) *llm.Cassette {
	t.Helper()
	return openCassette(t, path, live, *record)
}

func openCassette(t testing.TB, path string, live func() (llm.Provider, error), recording bool) *llm.Cassette {
	t.Helper()
	if !recording {
		c, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Replay})
		if err != nil {
			t.Fatalf("loomtest: %v (record it with -%s)", err, RecordFlag)
		}
		return c
	}
	if live == nil {
		t.Fatalf("loomtest: cassette %s: recording (-%s) needs the live provider", path, RecordFlag)
	}
	p, err := live()
	if err != nil {
		t.Fatalf("loomtest: cassette %s: the live provider: %v", path, err)
	}
	c, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: p})
	if err != nil {
		t.Fatalf("loomtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Save(); err != nil {
			t.Errorf("loomtest: saving cassette %s: %v", path, err)
		}
	})
	return c
}
