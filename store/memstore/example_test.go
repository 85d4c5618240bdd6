package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// ExampleNewEventStore appends the first events of an execution, reads them
// back, and shows that a second writer at the same sequence is refused.
func ExampleNewEventStore() {
	ctx := context.Background()
	s := memstore.NewEventStore()

	events := []event.Envelope{
		{ID: "e0", WorkflowID: "checkout", ExecutionID: "order-42", Type: event.ExecutionStarted,
			Sequence: 0, Timestamp: 1_700_000_000_000, Payload: json.RawMessage(`{"total":12.50}`)},
		{ID: "e1", WorkflowID: "checkout", ExecutionID: "order-42", Type: event.StepCompleted,
			Sequence: 1, Timestamp: 1_700_000_000_250, Payload: json.RawMessage(`{"stepId":"charge","output":{"id":12345678901234567890}}`)},
	}
	if err := s.Append(ctx, "order-42", 0, events); err != nil {
		fmt.Println("append:", err)
		return
	}

	log, err := s.ReadFrom(ctx, "order-42", 0)
	if err != nil {
		fmt.Println("read:", err)
		return
	}
	for _, e := range log {
		fmt.Println(e.Sequence, e.Type, string(e.Payload))
	}

	err = s.Append(ctx, "order-42", 0, events[:1])
	fmt.Println("duplicate refused:", errors.Is(err, store.ErrSequenceConflict))

	if err := s.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// 0 EXECUTION_STARTED {"total":12.50}
	// 1 STEP_COMPLETED {"stepId":"charge","output":{"id":12345678901234567890}}
	// duplicate refused: true
}
