package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func longState(n int) fold.State {
	var evs []event.Envelope
	add := func(typ, payload string) {
		evs = append(evs, event.Envelope{ID: "e", ExecutionID: "x", Type: typ, Sequence: int64(len(evs)),
			Timestamp: 1000, Payload: json.RawMessage(payload)})
	}
	add(event.ExecutionStarted, `{"input":{"q":"text"}}`)
	for i := range n {
		add(event.StepStarted, fmt.Sprintf(`{"stepId":"s#%d","input":{"i":%d}}`, i, i))
		add(event.StepCompleted, fmt.Sprintf(`{"stepId":"s#%d","output":{"ok":true,"n":%d}}`, i, i))
	}
	return fold.Fold(evs)
}

func TestEncodeDecodeRoundTripsAndCompresses(t *testing.T) {
	s := longState(2000)
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := fold.EncodeSnapshot(s)
	if len(b)*4 > len(plain) {
		t.Errorf("compressed %d bytes from %d: expected at least 4x smaller", len(b), len(plain))
	}
	back, err := Decode(event.SchemaVersion, b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fold.Encode(s)
	got, _ := fold.Encode(back)
	if string(got) != string(want) {
		t.Fatal("round trip changed the state")
	}
}

func TestDecodeReadsPlainJSONAndRefusesCorruption(t *testing.T) {
	s := longState(3)
	plain, _ := fold.Encode(s)
	if _, err := Decode(event.SchemaVersion, plain); err != nil {
		t.Fatalf("plain JSON: %v", err)
	}
	b, _ := Encode(s)
	b[len(b)/2] ^= 0xff
	b = append(b[:8], b[9:]...)
	if _, err := Decode(event.SchemaVersion, b); !errors.Is(err, ErrCorrupt) && !errors.Is(err, fold.ErrInvalidState) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	var ve *fold.SnapshotVersionError
	if _, err := Decode("9.0.0", plain); !errors.As(err, &ve) {
		t.Fatalf("newer schema: %v", err)
	}
}
