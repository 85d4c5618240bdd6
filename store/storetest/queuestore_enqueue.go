package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// enqueueStores: an enqueued item is ready, and a claim hands it over.
func (k queueKit) enqueueStores(t *testing.T) {
	s := k.open(t)
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{})
	mustEnqueue(t, s, queueItem("a"))
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	c := expectClaimed(t, s, claimReq("o", claimNow, 5), "a")[0]
	if !sameItem(c.Item, queueItem("a")) || c.Attempt != 1 {
		t.Fatalf("Claim returned %+v attempt %d, want %+v attempt 1", c.Item, c.Attempt, queueItem("a"))
	}
}

// enqueueIdempotent: a second Enqueue of a held (Queue, ExecutionID)
// reports false and changes nothing, whatever else it carries; the stored
// item keeps its flow, input and priority, and a claimed item stays claimed.
func (k queueKit) enqueueIdempotent(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	first := queueItem("a")
	mustEnqueue(t, s, first)
	again := first
	again.FlowID, again.Input, again.Priority, again.Tenant = "other-flow", json.RawMessage(`{"x":1}`), 9, "t"
	for range 2 {
		added, err := s.Enqueue(ctx, again)
		if err != nil || added {
			t.Fatalf("second Enqueue(%q) = %v, %v; want false, nil", again.ExecutionID, added, err)
		}
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	c := expectClaimed(t, s, claimReq("o", claimNow, 5), "a")[0]
	if !sameItem(c.Item, first) {
		t.Fatalf("Claim after a duplicate Enqueue returned %+v, want the first item %+v", c.Item, first)
	}
	if added, err := s.Enqueue(ctx, again); err != nil || added {
		t.Fatalf("Enqueue of a claimed item = %v, %v; want false, nil", added, err)
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Claimed: 1})
	expectClaimed(t, s, claimReq("p", claimNow, 5))
}

// enqueueAfterComplete: a done item is still held: Enqueue reports false
// and the item stays done, never claimed again.
func (k queueKit) enqueueAfterComplete(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("a"))
	mustComplete(t, s, expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0])
	added, err := s.Enqueue(context.Background(), queueItem("a"))
	if err != nil || added {
		t.Fatalf("Enqueue of a done item = %v, %v; want false, nil", added, err)
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Done: 1})
	expectClaimed(t, s, claimReq("o", claimNow+10*queueTTL, 5))
}

// otherQueue: the same ExecutionID in another queue is a separate item,
// claimed, counted and completed on its own.
func (k queueKit) otherQueue(t *testing.T) {
	s := k.open(t)
	a, b := queueItem("x"), queueItem("x")
	b.Queue = "other"
	mustEnqueue(t, s, a, b)
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	expectDepth(t, s, "other", claimNow, store.QueueDepth{Ready: 1})
	mustComplete(t, s, expectClaimed(t, s, claimReq("o", claimNow, 5), "x")[0])
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Done: 1})
	expectDepth(t, s, "other", claimNow, store.QueueDepth{Ready: 1})
	req := claimReq("o", claimNow, 5)
	req.Queue = "other"
	if c := expectClaimed(t, s, req, "x")[0]; !sameItem(c.Item, b) {
		t.Fatalf("Claim of queue other returned %+v, want %+v", c.Item, b)
	}
}

// enqueueRefusals: an item with no Queue, ExecutionID or FlowID, an
// over-long queue or tenant, or an Input or Meta that is not JSON is refused
// with *store.QueueItemError naming the field, and nothing is stored.
func (k queueKit) enqueueRefusals(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("keep"))
	long := strings.Repeat("t", store.MaxQueueNameLen+1)
	for _, c := range []struct {
		field  string
		change func(*store.QueueItem)
	}{
		{"Queue", func(it *store.QueueItem) { it.Queue = "" }},
		{"Queue", func(it *store.QueueItem) { it.Queue = long }},
		{"ExecutionID", func(it *store.QueueItem) { it.ExecutionID = "" }},
		{"FlowID", func(it *store.QueueItem) { it.FlowID = "" }},
		{"Tenant", func(it *store.QueueItem) { it.Tenant = long }},
		{"Input", func(it *store.QueueItem) { it.Input = json.RawMessage(`{"a":`) }},
		{"Input", func(it *store.QueueItem) { it.Input = json.RawMessage(`not json`) }},
		{"Meta", func(it *store.QueueItem) { it.Meta = json.RawMessage("\xff") }},
	} {
		for _, exec := range []string{"fresh", "keep"} {
			it := queueItem(exec)
			c.change(&it)
			added, err := s.Enqueue(context.Background(), it)
			var qe *store.QueueItemError
			if added || !errors.As(err, &qe) || qe.Field != c.field {
				t.Fatalf("Enqueue with a bad %s (%q) = %v, %v; want false and a *store.QueueItemError for %s",
					c.field, exec, added, err, c.field)
			}
		}
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	if c := expectClaimed(t, s, claimReq("o", claimNow, 5), "keep")[0]; !sameItem(c.Item, queueItem("keep")) {
		t.Fatalf("Claim after refusals returned %+v, want %+v", c.Item, queueItem("keep"))
	}
	maxTenant := queueItem("longest-tenant")
	maxTenant.Tenant = long[:store.MaxQueueNameLen]
	mustEnqueue(t, s, maxTenant)
}

// claimRefusals: a request with no Queue or Owner (*store.QueueItemError),
// a TTL below 1, a Max below 1 or invalid limits (*store.QueueLimitsError)
// is refused and claims nothing.
func (k queueKit) claimRefusals(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("a"))
	itemErr := func(err error) bool { var e *store.QueueItemError; return errors.As(err, &e) }
	limitsErr := func(err error) bool { var e *store.QueueLimitsError; return errors.As(err, &e) }
	for _, c := range []struct {
		what   string
		change func(*store.ClaimRequest)
		typed  func(error) bool
	}{
		{"no Queue", func(r *store.ClaimRequest) { r.Queue = "" }, itemErr},
		{"no Owner", func(r *store.ClaimRequest) { r.Owner = "" }, itemErr},
		{"TTL 0", func(r *store.ClaimRequest) { r.TTL = 0 }, limitsErr},
		{"TTL -1", func(r *store.ClaimRequest) { r.TTL = -1 }, limitsErr},
		{"Max 0", func(r *store.ClaimRequest) { r.Max = 0 }, limitsErr},
		{"Max -1", func(r *store.ClaimRequest) { r.Max = -1 }, limitsErr},
		{"Concurrency -1", func(r *store.ClaimRequest) { r.Limits.Concurrency = -1 }, limitsErr},
		{"PerOwner -1", func(r *store.ClaimRequest) { r.Limits.PerOwner = -1 }, limitsErr},
		{"PerPartition -1", func(r *store.ClaimRequest) { r.Limits.PerPartition = -1 }, limitsErr},
		{"Rate -1", func(r *store.ClaimRequest) { r.Limits.Rate, r.Limits.RateWindow = -1, 10 }, limitsErr},
		{"RateWindow -1", func(r *store.ClaimRequest) { r.Limits.Rate, r.Limits.RateWindow = 1, -1 }, limitsErr},
		{"Rate without RateWindow", func(r *store.ClaimRequest) { r.Limits.Rate = 1 }, limitsErr},
		{"RateWindow without Rate", func(r *store.ClaimRequest) { r.Limits.RateWindow = 100 }, limitsErr},
	} {
		req := claimReq("o", claimNow, 5)
		c.change(&req)
		got, err := s.Claim(context.Background(), req)
		if len(got) != 0 || !c.typed(err) {
			t.Fatalf("Claim with %s = %d claims, %v; want none and a typed refusal", c.what, len(got), err)
		}
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	expectClaimed(t, s, claimReq("o", claimNow, 5), "a")
}
