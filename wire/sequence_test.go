package wire_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/wire"
)

// TestSequenceArithmeticCannotOverflow asks for sequences at the top of
// int64: execution.state at math.MaxInt64 is past the end of the log and
// says where the log ends (the runtime's at+1 used to wrap to a negative
// bound and answer "no such execution"); a page from near the top is
// empty, not an error; a fork there is out of range.
func TestSequenceArithmeticCannotOverflow(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"m-1","wait":true}}`)
	last := strconv.Itoa(eventCount(t, e, "m-1") - 1)
	for _, at := range []string{"9223372036854775807", "9223372036854775806"} {
		resp := e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.state","params":{"executionId":"m-1","at":`+at+`}}`)
		if errCode(t, resp) != wire.CodeSequenceOutOfRange {
			t.Fatalf("state at %s: %v, want CodeSequenceOutOfRange", at, resp)
		}
		d := resp["error"].(map[string]any)["data"].(map[string]any)
		if d["last"].(json.Number).String() != last || d["at"].(json.Number).String() != at {
			t.Fatalf("state at %s: data %v, want at %s and last %s (the end of the log)", at, d, at, last)
		}
		resp = e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.fork","params":{"executionId":"m-1","at":`+at+`}}`)
		if errCode(t, resp) != wire.CodeSequenceOutOfRange {
			t.Fatalf("fork at %s: %v", at, resp)
		}
	}
	for _, from := range []string{"9223372036854775807", "9223372036854775000"} {
		page := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":4,"method":"execution.events","params":{"executionId":"m-1","from":`+from+`,"limit":1000}}`))
		if evs := page["events"].([]any); len(evs) != 0 || page["next"] != nil {
			t.Fatalf("a page from %s: %v", from, page)
		}
	}
	st := stateOf(t, result(t, e.rpc(t, `{"jsonrpc":"2.0","id":5,"method":"execution.state","params":{"executionId":"m-1","at":`+last+`}}`)))
	if st["sequence"].(json.Number).String() != last {
		t.Fatalf("state at the last sequence: %v", st)
	}
}
