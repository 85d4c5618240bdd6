package dispatch_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
)

func TestQueuesRefusesAnUnknownQueueStoringNothing(t *testing.T) {
	a := newQueueHarness(t, newHeld(), func(c *dispatch.QueueConfig) { c.Name = "reports" })
	b := newQueueHarness(t, newHeld(), func(c *dispatch.QueueConfig) { c.Name = "emails" })
	qs, err := dispatch.NewQueues(a.q, b.q)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(qs.Names(), []string{"emails", "reports"}) {
		t.Fatalf("names %v", qs.Names())
	}
	_, _, err = qs.Enqueue(t.Context(), "invoices", dispatch.EnqueueRequest{ExecutionID: "x", FlowID: "f"})
	var uq *dispatch.UnknownQueueError
	if !errors.As(err, &uq) || !errors.Is(err, dispatch.ErrUnknownQueue) || !slices.Equal(uq.Known, []string{"emails", "reports"}) {
		t.Fatalf("err = %v, want an UnknownQueueError naming the queues", err)
	}
	for _, h := range []*queueHarness{a, b} {
		if d := h.depth(t); d.Ready+d.Claimed+d.Done != 0 {
			t.Fatalf("a refused enqueue stored %+v", d)
		}
	}
	if _, added, err := qs.Enqueue(t.Context(), "reports", dispatch.EnqueueRequest{ExecutionID: "x", FlowID: "f"}); err != nil || !added {
		t.Fatalf("enqueue to a known queue: %v %v", added, err)
	}
	if d := a.depth(t); d.Ready != 1 {
		t.Fatalf("reports depth %+v", d)
	}
	var ce *dispatch.QueueConfigError
	if _, err := dispatch.NewQueues(a.q, a.q); !errors.As(err, &ce) {
		t.Fatalf("two queues of one name: %v", err)
	}
}
