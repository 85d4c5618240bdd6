package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// QueueStoreSPIVersion versions the QueueStore SPI (pinned with its method
// set by TestSPIVersionsPinMethodSets).
const QueueStoreSPIVersion = "1.0.0"

// QueueItem is one queued start: the execution to start, the flow and its
// input, and what orders and limits it. Enqueue is idempotent by
// ExecutionID within a queue: the id is the item's identity for as long as
// the store keeps it, done or not.
type QueueItem struct {
	Queue       string          `json:"queue"`
	ExecutionID string          `json:"executionId"`
	FlowID      string          `json:"flowId"`
	Input       json.RawMessage `json:"input,omitempty"`
	// Tenant is the tenant the execution is started for ("" for none); a
	// fair scheduler claims by it.
	Tenant string `json:"tenant,omitempty"`
	// Priority orders ready items: higher first, then EnqueuedAt, then
	// ExecutionID.
	Priority int `json:"priority,omitempty"`
	// PartitionKey groups items that QueueLimits.PerPartition bounds
	// together ("" is no partition: never bounded by it).
	PartitionKey string `json:"partitionKey,omitempty"`
	// EnqueuedAt is the enqueue time (epoch ms, the caller's clock).
	EnqueuedAt int64 `json:"enqueuedAt"`
	// Meta travels with the item to the start (a trace context, the
	// principal); the store keeps it as it is.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// QueueLimits bound what Claim hands out. The limits live with the caller,
// not the store: every node claiming from a queue passes the same ones. A
// zero field is no limit.
type QueueLimits struct {
	// Concurrency bounds the live claims of the queue across all owners.
	Concurrency int `json:"concurrency,omitempty"`
	// PerOwner bounds the live claims of one owner (a node's share).
	PerOwner int `json:"perOwner,omitempty"`
	// PerPartition bounds the live claims of one partition key.
	PerPartition int `json:"perPartition,omitempty"`
	// Rate claims at most per RateWindow milliseconds: no window of that
	// length (ending at a claim's time) holds more than Rate claims of the
	// queue. Both are set or neither.
	Rate       int   `json:"rate,omitempty"`
	RateWindow int64 `json:"rateWindow,omitempty"`
}

// Validate refuses a negative limit, or a Rate without a RateWindow (and
// the reverse), with *QueueLimitsError.
func (l QueueLimits) Validate() error {
	refuse := func(field, problem string) error { return &QueueLimitsError{Field: field, Problem: problem} }
	switch {
	case l.Concurrency < 0:
		return refuse("Concurrency", "is negative; use 0 for no limit")
	case l.PerOwner < 0:
		return refuse("PerOwner", "is negative; use 0 for no limit")
	case l.PerPartition < 0:
		return refuse("PerPartition", "is negative; use 0 for no limit")
	case l.Rate < 0:
		return refuse("Rate", "is negative; use 0 for no limit")
	case l.RateWindow < 0:
		return refuse("RateWindow", "is negative")
	case (l.Rate > 0) != (l.RateWindow > 0):
		return refuse("Rate", "and RateWindow are set together or not at all")
	}
	return nil
}

// QueueLimitsError refuses QueueLimits, naming the field to change.
type QueueLimitsError struct {
	Field   string
	Problem string
}

func (e *QueueLimitsError) Error() string { return "loom: queue limit " + e.Field + " " + e.Problem }

// ClaimRequest asks Claim for up to Max ready items of Queue for Owner.
type ClaimRequest struct {
	Queue string
	Owner string
	// Now is the claim time (epoch ms, the caller's clock); a claim lives
	// until Now+TTL unless renewed.
	Now int64
	TTL int64
	// Max bounds the items returned (>= 1).
	Max int
	// Tenant, when set, claims only that tenant's items (a fair
	// scheduler's pick); "" claims any tenant's.
	Tenant string
	Limits QueueLimits
}

// Claim is one item held by one owner until ExpiresAt. Token grows with
// every claim of the item, so a renewal or completion by an owner whose
// claim expired and was taken over is refused.
type Claim struct {
	Item      QueueItem `json:"item"`
	Owner     string    `json:"owner"`
	Token     int64     `json:"token"`
	ClaimedAt int64     `json:"claimedAt"`
	ExpiresAt int64     `json:"expiresAt"`
	// Attempt counts the claims of the item so far, this one included.
	Attempt int `json:"attempt"`
}

// QueueDepth counts a queue's items by state at a time: Ready includes
// items whose claim expired, Claimed only live claims.
type QueueDepth struct {
	Ready   int `json:"ready"`
	Claimed int `json:"claimed"`
	Done    int `json:"done"`
}

// QueueStore is a durable start queue (DESIGN: work queues): items are
// enqueued idempotently, claimed exclusively under limits checked
// atomically with the claim, renewed by their owner, and completed.
// A claim not renewed by its ExpiresAt returns to ready (a dead node's
// work is claimed again).
type QueueStore interface {
	// Enqueue stores item durably and reports true; an item whose
	// (Queue, ExecutionID) the store already holds, done or not, is left as
	// it is and reports false. It refuses an item with no Queue,
	// ExecutionID or FlowID with *QueueItemError, storing nothing.
	Enqueue(ctx context.Context, item QueueItem) (bool, error)
	// Claim hands out up to req.Max ready items in priority order,
	// exclusively: no item is held by two live claims, and the limits hold
	// at every instant across every caller, however many claim at once.
	// It refuses invalid limits with *QueueLimitsError, claiming nothing.
	Claim(ctx context.Context, req ClaimRequest) ([]Claim, error)
	// Renew extends a live claim to now+ttl and returns it; a claim that
	// expired or that another owner took over is refused with
	// ErrClaimLost.
	Renew(ctx context.Context, c Claim, now, ttl int64) (Claim, error)
	// Complete marks the claimed item done, freeing its slot, iff c is
	// still its live claim (by Token); otherwise ErrClaimLost.
	Complete(ctx context.Context, c Claim) error
	// Release returns the claimed item to ready at once (its owner gives
	// it up), iff c is still its live claim; otherwise ErrClaimLost.
	Release(ctx context.Context, c Claim) error
	// ReadyTenants lists the tenants with ready items in queue at now,
	// sorted: what a fair scheduler picks from.
	ReadyTenants(ctx context.Context, queue string, now int64) ([]string, error)
	// Depth counts queue's items at now.
	Depth(ctx context.Context, queue string, now int64) (QueueDepth, error)
	// Close releases the store.
	Close() error
}

// ErrClaimLost refuses a renewal, completion or release by an owner whose
// claim expired or was taken over: the item is someone else's now.
var ErrClaimLost = errors.New("loom: queue claim lost (expired or taken over)")

// QueueItemError refuses an item Enqueue cannot store.
type QueueItemError struct {
	Field   string
	Problem string
}

func (e *QueueItemError) Error() string { return "loom: queue item " + e.Field + " " + e.Problem }

// MaxQueueNameLen bounds a queue name, a tenant id and a partition key, in
// bytes.
const MaxQueueNameLen = 128

// maxQueueMetaBytes bounds an item's Meta (a trace context, a principal).
const maxQueueMetaBytes = 64 << 10

// ValidateQueueItem is the check every QueueStore's Enqueue runs.
func ValidateQueueItem(item QueueItem) error {
	refuse := func(field, problem string) error { return &QueueItemError{Field: field, Problem: problem} }
	switch {
	case item.Queue == "":
		return refuse("Queue", "is required")
	case len(item.Queue) > MaxQueueNameLen:
		return refuse("Queue", "is longer than "+strconv.Itoa(MaxQueueNameLen)+" bytes")
	case item.ExecutionID == "":
		return refuse("ExecutionID", "is required (it is the idempotency key)")
	case len(item.ExecutionID) > event.MaxIDBytes:
		return refuse("ExecutionID", "is longer than "+strconv.Itoa(event.MaxIDBytes)+" bytes")
	case item.FlowID == "":
		return refuse("FlowID", "is required")
	case len(item.FlowID) > event.MaxIDBytes:
		return refuse("FlowID", "is longer than "+strconv.Itoa(event.MaxIDBytes)+" bytes")
	case len(item.PartitionKey) > MaxQueueNameLen:
		return refuse("PartitionKey", "is longer than "+strconv.Itoa(MaxQueueNameLen)+" bytes")
	case len(item.Input) > event.DefaultMaxPayloadBytes:
		return refuse("Input", "is larger than "+strconv.Itoa(event.DefaultMaxPayloadBytes)+" bytes: claim-check it (ContentStore)")
	case len(item.Meta) > maxQueueMetaBytes:
		return refuse("Meta", "is larger than "+strconv.Itoa(maxQueueMetaBytes)+" bytes")
	case len(item.Tenant) > MaxQueueNameLen:
		return refuse("Tenant", "is longer than "+strconv.Itoa(MaxQueueNameLen)+" bytes")
	case len(item.Input) > 0 && !json.Valid(item.Input):
		return refuse("Input", "is not valid JSON")
	case len(item.Meta) > 0 && !json.Valid(item.Meta):
		return refuse("Meta", "is not valid JSON")
	}
	return nil
}

// ValidateClaimRequest is the check every QueueStore's Claim runs.
func ValidateClaimRequest(req ClaimRequest) error {
	switch {
	case req.Queue == "":
		return &QueueItemError{Field: "Queue", Problem: "is required"}
	case req.Owner == "":
		return &QueueItemError{Field: "Owner", Problem: "is required"}
	case req.TTL <= 0:
		return &QueueLimitsError{Field: "TTL", Problem: "must be positive"}
	case req.Max < 1:
		return &QueueLimitsError{Field: "Max", Problem: "must be at least 1"}
	}
	return req.Limits.Validate()
}

// ValidateTimerClaim is the check every TimerClaimer's ClaimDue runs: it
// refuses the owner and ttl as a lease grant's are refused, with
// *event.InvalidEnvelopeError (Field "owner" or "ttlMs"), claiming nothing.
func ValidateTimerClaim(owner string, now, ttl int64) error {
	if err := event.ValidateID("owner", owner); err != nil {
		return err
	}
	if ttl < 1 || now > math.MaxInt64-ttl {
		return &event.InvalidEnvelopeError{Field: "ttlMs", Reason: "not positive, or now+ttl overflows int64"}
	}
	return nil
}

// TimerClaimer is an optional TimerStore capability: ClaimDue hands each
// due timer to one caller for ttl milliseconds, so several nodes polling
// one store fire each timer once (the others see it claimed). A claim ends
// when the timer is deleted (fired) or replaced by Put, or at its expiry,
// when the timer is due again for anyone (the claimer died).
type TimerClaimer interface {
	ClaimDue(ctx context.Context, owner string, now, ttl int64, limit int) ([]Timer, error)
}
