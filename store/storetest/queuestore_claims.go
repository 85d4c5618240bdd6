package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// claimOrder: Claim hands out higher Priority first, then earlier
// EnqueuedAt, then smaller ExecutionID (code-point order), whatever the
// order of enqueueing.
func (k queueKit) claimOrder(t *testing.T) {
	s := k.open(t)
	at := func(exec string, prio int, enq int64) store.QueueItem {
		it := queueItem(exec)
		it.Priority, it.EnqueuedAt = prio, enq
		return it
	}
	items := []store.QueueItem{
		at("p9", 9, 50), at("p5-early", 5, 10), at("p5-b", 5, 20), at("p5-c", 5, 20),
		at("p5-é", 5, 20), at("p0-a", 0, 0), at("p0-b", 0, 0), at("neg", -3, 0),
	}
	for _, i := range []int{7, 3, 0, 5, 2, 6, 4, 1} {
		mustEnqueue(t, s, items[i])
	}
	want := make([]string, len(items))
	for i, it := range items {
		want[i] = it.ExecutionID
	}
	expectClaimed(t, s, claimReq("o", claimNow, 3), want[:3]...)
	expectClaimed(t, s, claimReq("o", claimNow, 100), want[3:]...)
}

// claimMax: Claim returns at most Max items, the first ones in order, and
// fewer when fewer are ready.
func (k queueKit) claimMax(t *testing.T) {
	s := k.open(t)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		mustEnqueue(t, s, queueItem(id))
	}
	expectClaimed(t, s, claimReq("o", claimNow, 1), "a")
	expectClaimed(t, s, claimReq("o", claimNow, 2), "b", "c")
	expectClaimed(t, s, claimReq("o", claimNow, 10), "d", "e")
	expectClaimed(t, s, claimReq("o", claimNow, 10))
}

// claimTenant: a request with Tenant claims only that tenant's items, in
// order; one without claims any tenant's (and untenanted ones).
func (k queueKit) claimTenant(t *testing.T) {
	s := k.open(t)
	for _, c := range []struct{ exec, tenant string }{
		{"a1", "a"}, {"b1", "b"}, {"a2", "a"}, {"none", ""}, {"b2", "b"}, {"a3", "a"},
	} {
		it := queueItem(c.exec)
		it.Tenant = c.tenant
		mustEnqueue(t, s, it)
	}
	req := claimReq("o", claimNow, 2)
	req.Tenant = "a"
	expectClaimed(t, s, req, "a1", "a2")
	req.Tenant = "b"
	req.Max = 10
	expectClaimed(t, s, req, "b1", "b2")
	req.Tenant = "nobody"
	expectClaimed(t, s, req)
	expectClaimed(t, s, claimReq("o", claimNow, 10), "a3", "none")
}

// claimExclusive: a claimed item is not claimed again while its claim
// lives, by another owner or by its own, up to the instant before expiry.
func (k queueKit) claimExclusive(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("a"), queueItem("b"))
	c := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	expectClaimed(t, s, claimReq("p", claimNow, 10), "b")
	for _, now := range []int64{claimNow, claimNow + 1, c.ExpiresAt - 1} {
		expectClaimed(t, s, claimReq("p", now, 10))
		expectClaimed(t, s, claimReq("o", now, 10))
	}
}

// claimExpiry: a claim that expired (Now >= ExpiresAt) is claimable again,
// by anyone, with Attempt+1 and a greater Token; the item is handed to one
// claimer only.
func (k queueKit) claimExpiry(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("a"))
	first := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	second := expectClaimed(t, s, claimReq("p", first.ExpiresAt, 1), "a")[0]
	expectClaimed(t, s, claimReq("q", first.ExpiresAt, 1))
	third := expectClaimed(t, s, claimReq("o", second.ExpiresAt+5, 1), "a")[0]
	for i, pair := range [][2]store.Claim{{first, second}, {second, third}} {
		before, after := pair[0], pair[1]
		if after.Token <= before.Token || after.Attempt != before.Attempt+1 {
			t.Fatalf("claim %d after expiry = %s, want a token above %d and attempt %d",
				i+2, describeClaim(after), before.Token, before.Attempt+1)
		}
	}
	if first.Attempt != 1 {
		t.Fatalf("first claim = %s, want attempt 1", describeClaim(first))
	}
}

// claimFullItem: Claim returns the whole item as enqueued: flow, input,
// meta, tenant, priority, partition key and enqueue time.
func (k queueKit) claimFullItem(t *testing.T) {
	s := k.open(t)
	full := store.QueueItem{Queue: kitQueue, ExecutionID: "exec-é", FlowID: "billing/charge",
		Input:  json.RawMessage(`{"a":[1,2.5,"x"],"b":{"c":null},"big":12345678901234567890}`),
		Tenant: "tenant-7", Priority: 4, PartitionKey: "customer-42", EnqueuedAt: 1_700_000_000_123,
		Meta: json.RawMessage(`{"principal":"svc","trace":"00-abc-01"}`)}
	bare := store.QueueItem{Queue: kitQueue, ExecutionID: "bare", FlowID: "f"}
	mustEnqueue(t, s, full, bare)
	got := expectClaimed(t, s, claimReq("o", claimNow, 5), "exec-é", "bare")
	for i, want := range []store.QueueItem{full, bare} {
		if !sameItem(got[i].Item, want) {
			t.Fatalf("Claim returned %+v, want %+v", got[i].Item, want)
		}
	}
}

// renew: Renew by the live claim moves ExpiresAt to now+ttl and keeps
// Token, Attempt and ClaimedAt; the item then stays claimed past its first
// expiry and is completed with the renewed claim. A Renew at or after the
// stored expiry is ErrClaimLost.
func (k queueKit) renew(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	mustEnqueue(t, s, queueItem("a"), queueItem("b"))
	c := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	renewed, err := s.Renew(ctx, c, c.ExpiresAt-1, 5*queueTTL)
	if err != nil {
		t.Fatalf("Renew(%s): %v", describeClaim(c), err)
	}
	want := c
	want.ExpiresAt = c.ExpiresAt - 1 + 5*queueTTL
	if renewed.Owner != want.Owner || renewed.Token != want.Token || renewed.Attempt != want.Attempt ||
		renewed.ClaimedAt != want.ClaimedAt || renewed.ExpiresAt != want.ExpiresAt || !sameItem(renewed.Item, c.Item) {
		t.Fatalf("Renew(%s) = %s, want %s", describeClaim(c), describeClaim(renewed), describeClaim(want))
	}
	mustComplete(t, s, expectClaimed(t, s, claimReq("p", c.ExpiresAt, 10), "b")[0])
	expectClaimed(t, s, claimReq("p", renewed.ExpiresAt-1, 10))
	expectDepth(t, s, kitQueue, renewed.ExpiresAt-1, store.QueueDepth{Claimed: 1, Done: 1})
	expectDepth(t, s, kitQueue, renewed.ExpiresAt, store.QueueDepth{Ready: 1, Done: 1})
	again, err := s.Renew(ctx, renewed, renewed.ExpiresAt-1, queueTTL)
	if err != nil || again.ExpiresAt != renewed.ExpiresAt-1+queueTTL {
		t.Fatalf("second Renew = %s, %v; want it until %d", describeClaim(again), err, renewed.ExpiresAt-1+queueTTL)
	}
	_, err = s.Renew(ctx, again, again.ExpiresAt, queueTTL)
	expectClaimLost(t, "Renew at the expiry", err)
	_, err = s.Renew(ctx, again, again.ExpiresAt+queueTTL, queueTTL)
	expectClaimLost(t, "Renew after the expiry", err)
	expectDepth(t, s, kitQueue, again.ExpiresAt, store.QueueDepth{Ready: 1, Done: 1})
}

// staleClaim: once an expired claim is taken over, Renew, Complete and
// Release by the old one are store.ErrClaimLost and change nothing (the
// new owner still renews and completes); so are calls with a Token that
// is not the item's current one, and calls for an item never enqueued.
func (k queueKit) staleClaim(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	mustEnqueue(t, s, queueItem("a"))
	old := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	cur := expectClaimed(t, s, claimReq("p", old.ExpiresAt, 1), "a")[0]
	now := old.ExpiresAt + 1
	_, err := s.Renew(ctx, old, now, queueTTL)
	expectClaimLost(t, "Renew by a taken-over claim", err)
	expectClaimLost(t, "Complete by a taken-over claim", s.Complete(ctx, old))
	expectClaimLost(t, "Release by a taken-over claim", s.Release(ctx, old))
	forged := cur
	forged.Token = cur.Token + 1
	_, err = s.Renew(ctx, forged, now, queueTTL)
	expectClaimLost(t, "Renew with a token not yet granted", err)
	expectClaimLost(t, "Complete with a token not yet granted", s.Complete(ctx, forged))
	expectClaimLost(t, "Release with a token not yet granted", s.Release(ctx, forged))
	expectDepth(t, s, kitQueue, now, store.QueueDepth{Claimed: 1})
	expectClaimed(t, s, claimReq("q", now, 1))
	ghost := cur
	ghost.Item = queueItem("never-enqueued")
	_, err = s.Renew(ctx, ghost, now, queueTTL)
	expectClaimLost(t, "Renew of an item never enqueued", err)
	expectClaimLost(t, "Complete of an item never enqueued", s.Complete(ctx, ghost))
	expectClaimLost(t, "Release of an item never enqueued", s.Release(ctx, ghost))
	renewed, err := s.Renew(ctx, cur, now, queueTTL)
	if err != nil {
		t.Fatalf("Renew by the current claim %s: %v", describeClaim(cur), err)
	}
	mustComplete(t, s, renewed)
	expectDepth(t, s, kitQueue, now, store.QueueDepth{Done: 1})
}

// complete: Complete marks the item done: Depth counts it Done, it is never
// claimed again (not after its claim would have expired either), and a
// second Complete, a Release or a Renew of it is store.ErrClaimLost.
func (k queueKit) complete(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	mustEnqueue(t, s, queueItem("a"), queueItem("b"))
	c := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	mustComplete(t, s, c)
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1, Done: 1})
	expectClaimLost(t, "second Complete", s.Complete(ctx, c))
	expectClaimLost(t, "Release after Complete", s.Release(ctx, c))
	_, err := s.Renew(ctx, c, claimNow, queueTTL)
	expectClaimLost(t, "Renew after Complete", err)
	expectClaimed(t, s, claimReq("p", c.ExpiresAt+queueTTL, 10), "b")
	expectClaimed(t, s, claimReq("p", c.ExpiresAt+100*queueTTL, 10), "b")
	expectDepth(t, s, kitQueue, c.ExpiresAt+200*queueTTL, store.QueueDepth{Ready: 1, Done: 1})
}

// release: Release makes the item ready at once (before its claim would
// expire); the next claim of it is attempt 2 with a greater token, and the
// released claim is lost.
func (k queueKit) release(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	mustEnqueue(t, s, queueItem("a"))
	c := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	mustReleaseClaim(t, s, c)
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: 1})
	expectClaimLost(t, "second Release", s.Release(ctx, c))
	expectClaimLost(t, "Complete after Release", s.Complete(ctx, c))
	_, err := s.Renew(ctx, c, claimNow, queueTTL)
	expectClaimLost(t, "Renew after Release", err)
	next := expectClaimed(t, s, claimReq("p", claimNow, 1), "a")[0]
	if next.Token <= c.Token || next.Attempt != 2 {
		t.Fatalf("claim after Release = %s, want a token above %d and attempt 2", describeClaim(next), c.Token)
	}
	expectClaimLost(t, "Complete by the released claim", s.Complete(ctx, c))
	mustComplete(t, s, next)
}

// readyTenants: ReadyTenants lists, sorted and once each, the non-empty
// tenants of the queue with a ready item at now — an expired claim's item
// included, a live claim's and a done item's not, another queue's not.
func (k queueKit) readyTenants(t *testing.T) {
	s := k.open(t)
	expectTenants(t, s, claimNow)
	for _, c := range []struct{ exec, tenant string }{
		{"c1", "c"}, {"a1", "a"}, {"b1", "b"}, {"a2", "a"}, {"d1", "d"}, {"e1", "e"}, {"none", ""},
	} {
		it := queueItem(c.exec)
		it.Tenant = c.tenant
		mustEnqueue(t, s, it)
	}
	other := queueItem("z1")
	other.Queue, other.Tenant = "other", "z"
	mustEnqueue(t, s, other)
	expectTenants(t, s, claimNow, "a", "b", "c", "d", "e")
	byTenant := func(tenant string, now int64) store.Claim {
		req := claimReq("o", now, 1)
		req.Tenant = tenant
		return claim(t, s, req)[0]
	}
	mustComplete(t, s, byTenant("b", claimNow))
	live := byTenant("c", claimNow)
	byTenant("a", claimNow)
	expiring := byTenant("d", claimNow-queueTTL)
	expectTenants(t, s, claimNow, "a", "d", "e")
	expectTenants(t, s, expiring.ExpiresAt-1, "a", "e")
	expectTenants(t, s, live.ExpiresAt, "a", "c", "d", "e")
}

// expectTenants requires ReadyTenants of the kit's queue at now to be want.
func expectTenants(t *testing.T, s store.QueueStore, now int64, want ...string) {
	t.Helper()
	got, err := s.ReadyTenants(context.Background(), kitQueue, now)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ReadyTenants(%q, %d) = %q, %v; want %q, nil", kitQueue, now, got, err, want)
	}
}

// depth: Depth counts, at the time asked, ready items (expired claims'
// included), live claims and done items, per queue.
func (k queueKit) depth(t *testing.T) {
	s := k.open(t)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		mustEnqueue(t, s, queueItem(id))
	}
	early := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	late := expectClaimed(t, s, claimReq("o", claimNow+500, 1), "b")[0]
	mustComplete(t, s, expectClaimed(t, s, claimReq("o", claimNow+500, 1), "c")[0])
	expectDepth(t, s, kitQueue, claimNow+500, store.QueueDepth{Ready: 2, Claimed: 2, Done: 1})
	expectDepth(t, s, kitQueue, early.ExpiresAt, store.QueueDepth{Ready: 3, Claimed: 1, Done: 1})
	expectDepth(t, s, kitQueue, late.ExpiresAt, store.QueueDepth{Ready: 4, Done: 1})
	expectDepth(t, s, "other", claimNow, store.QueueDepth{})
}
