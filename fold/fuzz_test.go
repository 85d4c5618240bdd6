package fold

import (
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// FuzzApply feeds arbitrary payloads and metadata to every handler over a
// running, a parked and a terminal state: Apply must never panic, never
// mutate its input, and always produce an encodable state.
func FuzzApply(f *testing.F) {
	for typ, p := range samplePayloads {
		f.Add(typ, p, `{"kernel":true}`)
	}
	f.Add(event.ExecutionResumed, `{"eventType":"g","payload":null,"waitId":"w"}`, `{"kernel":true,"flowEmit":"d"}`)
	f.Add(event.ExecutionStarted, `{"input":1,"carry":{"resources":{"tokens":1e308},"inbox":{"":{"consumed":-1}}}}`, `{}`)
	f.Add(event.ExecutionSuspended, `{"on":1,"waits":{}}`, `{"forkChain":[1],"kernel":true}`)
	f.Add(event.StepFailed, `[1,2]`, `null`)
	f.Add(event.ResourceMetered, `{"tokens":"x","custom":{"a":-0}}`, `{}`)
	bases := []State{
		newLog().started().add(event.StepStarted, `{"stepId":"s","input":1}`).fold(),
		parkedWithSiblingFailure().kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m"}`).fold(),
		newLog().started().add(event.ExecutionCompleted, `{"output":1}`).fold(),
	}
	f.Fuzz(func(t *testing.T, typ, payload, meta string) {
		e := event.Envelope{ID: "e", ExecutionID: "x", Type: typ, Sequence: 99, Timestamp: 5}
		if json.Valid([]byte(payload)) {
			e.Payload = json.RawMessage(payload)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(meta), &m) == nil {
			e.Metadata = m
		}
		// Stores refuse envelopes Validate refuses; Apply must still not
		// panic on them, and must fold the valid ones into encodable states.
		valid := event.Validate(e, event.Limits{}) == nil
		for _, s := range bases {
			before := mustEncode(t, s)
			after := Apply(s, e)
			if mustEncode(t, s) != before {
				t.Fatalf("Apply mutated its input")
			}
			if _, err := Encode(after); valid && err != nil {
				t.Fatalf("result does not encode: %v", err)
			}
		}
	})
}
