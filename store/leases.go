package store

import (
	"context"
	"errors"
	"strconv"
)

// LeaseStoreSPIVersion versions the LeaseStore SPI (pinned with its method
// set by TestSPIVersionsPinMethodSets).
const LeaseStoreSPIVersion = "1.0.0"

// Lease says which node drives an execution, until when. Token grows with
// every acquisition of the execution's lease, so it orders drivers; an
// expired lease is evidence its driver is gone (heartbeats stopped).
type Lease struct {
	ExecutionID string `json:"executionId"`
	Owner       string `json:"owner"`
	Token       int64  `json:"token"`
	// ExpiresAt is epoch milliseconds on the callers' clock (a store with a
	// clock of its own may substitute it; leases need only rough agreement).
	ExpiresAt int64 `json:"expiresAt"`
}

// LeaseStore grants heartbeat leases: one live driver per execution across
// nodes (architecture §5.5; ADR 0130 D11).
type LeaseStore interface {
	// Acquire gives owner the lease of executionID until now+ttlMs when it
	// is free, expired at now, or already owner's; the returned lease has a
	// token greater than any before. Otherwise it returns *LeaseHeldError
	// naming the holder, changing nothing.
	Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (Lease, error)
	// Renew extends l until now+ttlMs iff its owner still holds it with its
	// token (a heartbeat); otherwise ErrLeaseLost, changing nothing.
	Renew(ctx context.Context, l Lease, now, ttlMs int64) (Lease, error)
	// Release gives l up iff its owner still holds it with its token;
	// releasing a lease already lost is not an error.
	Release(ctx context.Context, l Lease) error
	// Get returns the current lease of executionID, expired or not.
	Get(ctx context.Context, executionID string) (Lease, bool, error)
	// Close releases the store.
	Close() error
}

// ErrLeaseHeld matches *LeaseHeldError.
var ErrLeaseHeld = errors.New("store: lease held by another owner")

// ErrLeaseLost is returned by Renew for a lease that expired and was taken,
// or released.
var ErrLeaseLost = errors.New("store: lease lost")

// LeaseHeldError reports the live lease another owner holds.
type LeaseHeldError struct {
	ExecutionID string
	Owner       string
	ExpiresAt   int64
}

func (e *LeaseHeldError) Error() string {
	return "store: execution " + strconv.Quote(e.ExecutionID) + " is leased to " + strconv.Quote(e.Owner) +
		" until " + strconv.FormatInt(e.ExpiresAt, 10)
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
