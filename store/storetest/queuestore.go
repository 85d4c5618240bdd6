package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// QueueStoreFactory returns a fresh, empty store.QueueStore for
// RunQueueStore; the kit closes it. It is called once per subtest and may
// call t.Fatal (t.TempDir is the place for files).
type QueueStoreFactory func(t *testing.T) store.QueueStore

// queueKit carries the factory through the QueueStore subtests.
type queueKit struct{ f QueueStoreFactory }

// RunQueueStore runs the QueueStore conformance kit against the stores f
// builds, one fresh store per named subtest: idempotent Enqueue (a second
// Enqueue of a (Queue, ExecutionID), done or not, reports false and changes
// nothing; another queue is another item), refused items and claim requests
// (typed, storing or claiming nothing), claim order (Priority, EnqueuedAt,
// ExecutionID), Max, the Tenant filter, exclusivity and takeover at expiry
// (Now >= ExpiresAt; a greater Token, Attempt+1), the full item handed
// over, every limit (Concurrency, PerOwner, PerPartition, Rate over
// RateWindow) checked atomically, 8 claimers racing under Concurrency 3,
// Renew, Complete and Release by the current claim and ErrClaimLost for a
// stale one, ReadyTenants, Depth, and Close.
//
// The contract the kit pins down, beyond the SPI comments:
//   - A claim is live at t iff t < ExpiresAt and its item is not done; an
//     item is ready at t iff it is not done and holds no live claim.
//   - Renew keeps Token, Attempt and ClaimedAt and sets ExpiresAt to
//     now+ttl; it refuses a claim that is not current or has expired
//     (now >= the stored ExpiresAt). Complete and Release take no time, so
//     they judge a claim current by its Token alone.
//   - Rate counts claims by their ClaimedAt, whatever became of them later
//     (completing or releasing a claim does not give its rate back).
//   - ReadyTenants lists only non-empty tenants ("" is no tenant).
//   - Item Input and Meta come back as equal JSON (whitespace may differ).
func RunQueueStore(t *testing.T, f QueueStoreFactory) {
	t.Helper()
	if f == nil {
		t.Fatal("storetest: QueueStoreFactory is nil")
	}
	k := queueKit{f: f}
	t.Run("EnqueueStores", k.enqueueStores)
	t.Run("EnqueueIsIdempotent", k.enqueueIdempotent)
	t.Run("EnqueueIdempotentAfterComplete", k.enqueueAfterComplete)
	t.Run("SameExecutionInAnotherQueueIsSeparate", k.otherQueue)
	t.Run("EnqueueRefusesInvalidItems", k.enqueueRefusals)
	t.Run("ClaimRefusesInvalidRequests", k.claimRefusals)
	t.Run("ClaimOrderPriorityEnqueuedAtID", k.claimOrder)
	t.Run("ClaimMaxBounds", k.claimMax)
	t.Run("ClaimTenantFilter", k.claimTenant)
	t.Run("ClaimedItemNotClaimedAgainWhileLive", k.claimExclusive)
	t.Run("ExpiredClaimIsClaimableAgain", k.claimExpiry)
	t.Run("ClaimReturnsFullItem", k.claimFullItem)
	t.Run("LimitConcurrency", k.limitConcurrency)
	t.Run("LimitPerOwner", k.limitPerOwner)
	t.Run("LimitPerPartition", k.limitPerPartition)
	t.Run("LimitRate", k.limitRate)
	t.Run("LimitRateCountsReclaims", k.limitRateCountsReclaims)
	t.Run("ExpiredClaimsDoNotCountTowardLimits", k.limitsIgnoreExpired)
	t.Run("ConcurrentClaimsHonourConcurrency", k.concurrentClaims)
	t.Run("ConcurrentClaimAndComplete", k.concurrentClaimComplete)
	t.Run("RenewExtendsLiveClaim", k.renew)
	t.Run("StaleClaimIsLost", k.staleClaim)
	t.Run("CompleteMarksDone", k.complete)
	t.Run("ReleaseMakesReadyAtOnce", k.release)
	t.Run("ReadyTenants", k.readyTenants)
	t.Run("Depth", k.depth)
	t.Run("Closed", k.closed)
}

// Defaults of the kit's items and claims.
const (
	kitQueue = "q"
	kitFlow  = "flow"
	queueTTL = 1_000 // claim length, in milliseconds
	claimNow = 10_000
)

// open returns a fresh store for one subtest.
func (k queueKit) open(t *testing.T) store.QueueStore {
	t.Helper()
	return openStore(t, "QueueStoreFactory", k.f)
}

// queueItem is item exec of the kit's queue, enqueued at 0, with a small
// JSON input naming it.
func queueItem(exec string) store.QueueItem {
	name, err := json.Marshal(exec)
	if err != nil {
		panic(err) // a Go string always marshals
	}
	return store.QueueItem{Queue: kitQueue, ExecutionID: exec, FlowID: kitFlow,
		Input: json.RawMessage(`{"exec":` + string(name) + `}`)}
}

// claimReq asks for up to max items of the kit's queue for owner at now.
func claimReq(owner string, now int64, max int) store.ClaimRequest {
	return store.ClaimRequest{Queue: kitQueue, Owner: owner, Now: now, TTL: queueTTL, Max: max}
}

// mustEnqueue enqueues items and requires each to be new.
func mustEnqueue(t *testing.T, s store.QueueStore, items ...store.QueueItem) {
	t.Helper()
	for _, it := range items {
		added, err := s.Enqueue(context.Background(), it)
		if err != nil || !added {
			t.Fatalf("Enqueue(%q in %q) = %v, %v; want true, nil", it.ExecutionID, it.Queue, added, err)
		}
	}
}

// claim calls Claim and fails the test on an error. It also checks what
// every claim must hold: at most req.Max of them, each of req.Queue (and
// req.Tenant when set), for req.Owner from req.Now to req.Now+req.TTL, a
// positive attempt, and no item twice.
func claim(t *testing.T, s store.QueueStore, req store.ClaimRequest) []store.Claim {
	t.Helper()
	got, err := s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("Claim(%s): %v", describeRequest(req), err)
	}
	if err := checkClaims(req, got); err != nil {
		t.Fatalf("Claim(%s): %v", describeRequest(req), err)
	}
	return got
}

// checkClaims returns what is wrong with claims as Claim's answer to req.
func checkClaims(req store.ClaimRequest, claims []store.Claim) error {
	if len(claims) > req.Max {
		return errors.New("returned " + strconv.Itoa(len(claims)) + " claims, above Max")
	}
	seen := make(map[string]bool, len(claims))
	for _, c := range claims {
		switch {
		case c.Item.Queue != req.Queue:
			return errors.New("returned an item of queue " + strconv.Quote(c.Item.Queue))
		case req.Tenant != "" && c.Item.Tenant != req.Tenant:
			return errors.New("returned an item of tenant " + strconv.Quote(c.Item.Tenant))
		case c.Owner != req.Owner || c.ClaimedAt != req.Now || c.ExpiresAt != req.Now+req.TTL || c.Attempt < 1:
			return errors.New("returned " + describeClaim(c) + ", not owned from Now to Now+TTL")
		case seen[c.Item.ExecutionID]:
			return errors.New("returned " + strconv.Quote(c.Item.ExecutionID) + " twice")
		}
		seen[c.Item.ExecutionID] = true
	}
	return nil
}

// expectClaimed claims with req and requires exactly the items want, in
// order, returning the claims.
func expectClaimed(t *testing.T, s store.QueueStore, req store.ClaimRequest, want ...string) []store.Claim {
	t.Helper()
	got := claim(t, s, req)
	if ids := claimedIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("Claim(%s) claimed %q, want %q", describeRequest(req), ids, want)
	}
	return got
}

// claimedIDs lists the execution ids of claims, in order.
func claimedIDs(claims []store.Claim) []string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = c.Item.ExecutionID
	}
	return out
}

// expectDepth requires Depth(queue, now) to be want.
func expectDepth(t *testing.T, s store.QueueStore, queue string, now int64, want store.QueueDepth) {
	t.Helper()
	got, err := s.Depth(context.Background(), queue, now)
	if err != nil || got != want {
		t.Fatalf("Depth(%q, %d) = %+v, %v; want %+v, nil", queue, now, got, err, want)
	}
}

// mustComplete completes c and requires nil.
func mustComplete(t *testing.T, s store.QueueStore, c store.Claim) {
	t.Helper()
	if err := s.Complete(context.Background(), c); err != nil {
		t.Fatalf("Complete(%s): %v", describeClaim(c), err)
	}
}

// mustReleaseClaim releases c and requires nil.
func mustReleaseClaim(t *testing.T, s store.QueueStore, c store.Claim) {
	t.Helper()
	if err := s.Release(context.Background(), c); err != nil {
		t.Fatalf("Release(%s): %v", describeClaim(c), err)
	}
}

// expectClaimLost requires err to be store.ErrClaimLost.
func expectClaimLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrClaimLost) {
		t.Fatalf("%s = %v, want store.ErrClaimLost", what, err)
	}
}

// sameItem reports whether got equals want field by field, Input and Meta
// as equal compact JSON (an absent one may be nil or empty).
func sameItem(got, want store.QueueItem) bool {
	return got.Queue == want.Queue && got.ExecutionID == want.ExecutionID && got.FlowID == want.FlowID &&
		got.Tenant == want.Tenant && got.Priority == want.Priority && got.PartitionKey == want.PartitionKey &&
		got.EnqueuedAt == want.EnqueuedAt &&
		bytes.Equal(compactJSON(got.Input), compactJSON(want.Input)) &&
		bytes.Equal(compactJSON(got.Meta), compactJSON(want.Meta))
}

// describeRequest renders a claim request for failure messages.
func describeRequest(r store.ClaimRequest) string {
	s := "queue " + strconv.Quote(r.Queue) + " owner " + strconv.Quote(r.Owner) + " now " + itoa(r.Now) +
		" ttl " + itoa(r.TTL) + " max " + strconv.Itoa(r.Max)
	if r.Tenant != "" {
		s += " tenant " + strconv.Quote(r.Tenant)
	}
	if r.Limits != (store.QueueLimits{}) {
		s += " limits " + strconv.Quote(string(mustJSON(r.Limits)))
	}
	return s
}

// describeClaim renders a claim for failure messages.
func describeClaim(c store.Claim) string {
	return "{" + strconv.Quote(c.Item.ExecutionID) + " owner " + strconv.Quote(c.Owner) + " token " + itoa(c.Token) +
		" from " + itoa(c.ClaimedAt) + " until " + itoa(c.ExpiresAt) + " attempt " + strconv.Itoa(c.Attempt) + "}"
}

// mustJSON marshals v, which the kit only calls with plain structs.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// closed: after Close every method returns store.ErrClosed, and a second
// Close returns nil or store.ErrClosed.
func (k queueKit) closed(t *testing.T) {
	s := k.open(t)
	mustEnqueue(t, s, queueItem("a"))
	c := expectClaimed(t, s, claimReq("o", claimNow, 1), "a")[0]
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	_, err := s.Enqueue(ctx, queueItem("b"))
	check("Enqueue", err)
	_, err = s.Claim(ctx, claimReq("o", claimNow, 1))
	check("Claim", err)
	_, err = s.Renew(ctx, c, claimNow, queueTTL)
	check("Renew", err)
	check("Complete", s.Complete(ctx, c))
	check("Release", s.Release(ctx, c))
	_, err = s.ReadyTenants(ctx, kitQueue, claimNow)
	check("ReadyTenants", err)
	_, err = s.Depth(ctx, kitQueue, claimNow)
	check("Depth", err)
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close = %v, want nil or store.ErrClosed", err)
	}
}
