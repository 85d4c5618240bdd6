package dispatch

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
)

// MaxPoolWorkers bounds the workers of one Pool.
const MaxPoolWorkers = 1024

// PoolConfig configures NewPool. The defaults (the zero value of each
// field):
//
//   - Capacity: no bound per worker;
//   - Health: none — CheckHealth returns every unhealthy worker to the
//     rotation, and the next package it gets is the probe;
//   - Unreachable: an error whose chain holds a net.Error (a refused or
//     reset connection, a dial or TLS failure: what a
//     workerhttp.TransportError wraps) or io.ErrUnexpectedEOF.
type PoolConfig struct {
	// Workers run the packages (at least one, at most MaxPoolWorkers, none
	// nil), e.g. several workerhttp.RemoteWorkers.
	Workers []WorkerRuntime
	// Capacity bounds the Execute calls in flight on each worker; a
	// Dispatch with every healthy worker full waits for a slot or its ctx.
	Capacity int
	// Health probes a worker marked unhealthy; nil brings it back. The
	// worker server of plugins/workerhttp has no health endpoint (only
	// POST /execute), so a probe there is the caller's own (a TCP dial, a
	// load balancer's check).
	Health func(ctx context.Context, w WorkerRuntime) error
	// Unreachable tells a failure to reach the worker from every other
	// Execute error. Only such a failure marks the worker unhealthy and
	// moves the package to another one: a flow failure is a result, and a
	// refusal (4xx) or a 5xx came from a worker that answered.
	Unreachable func(error) bool
}

// NoWorkerError is Pool.Dispatch's answer when no healthy worker is left
// to try: every worker is marked unhealthy, or failed to be reached for
// this package. Err is the last transport failure, if one happened during
// this Dispatch. It is retryable: the workers may come back — check them,
// then call Pool.CheckHealth (or let its caller's ticker) to return them
// to the rotation. errors.Is(err, ErrNoWorker) holds.
type NoWorkerError struct {
	ExecutionID string
	Workers     int
	Err         error
}

func (e *NoWorkerError) Error() string {
	msg := "dispatch: execution " + strconv.Quote(e.ExecutionID) + ": none of the pool's " + strconv.Itoa(e.Workers) +
		" workers is reachable; check them, then call Pool.CheckHealth to bring them back"
	if e.Err != nil {
		msg += " (last: " + e.Err.Error() + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrNoWorker) true.
func (e *NoWorkerError) Is(target error) bool { return target == ErrNoWorker }

// Unwrap exposes the last transport failure.
func (e *NoWorkerError) Unwrap() error { return e.Err }

// Retryable reports true: a worker may be back by the next attempt.
func (e *NoWorkerError) Retryable() bool { return true }

// Pool is a Dispatcher over many WorkerRuntimes. Each package goes to the
// healthy worker with the fewest Execute calls in flight (the lowest index
// on a tie, so placement is deterministic) that has room under Capacity.
// An Execute that fails to reach its worker (PoolConfig.Unreachable) marks
// the worker unhealthy — it gets no packages until CheckHealth brings it
// back — and the same package is executed on the next healthy worker:
// packages are idempotent by contract, and the unreachable worker may have
// run it. When none is left, *NoWorkerError. Every other outcome, a result
// or an error, is returned as the worker gave it. Invalid packages are
// refused with a *PackageError before any worker sees them. It is safe for
// concurrent use.
type Pool struct {
	cfg PoolConfig

	mu      sync.Mutex
	slots   []poolSlot
	changed chan struct{} // closed and replaced when a slot frees or a worker returns
}

type poolSlot struct {
	inFlight  int
	unhealthy bool
}

// NewPool validates cfg and builds a Pool with every worker healthy. It
// refuses no workers, too many, a nil one and a negative Capacity with an
// *OptionsError.
func NewPool(cfg PoolConfig) (*Pool, error) {
	switch {
	case len(cfg.Workers) == 0:
		return nil, &OptionsError{Field: "PoolConfig.Workers", Reason: "at least one WorkerRuntime is required"}
	case len(cfg.Workers) > MaxPoolWorkers:
		return nil, &OptionsError{Field: "PoolConfig.Workers", Reason: "more than " + strconv.Itoa(MaxPoolWorkers) + " workers"}
	case cfg.Capacity < 0:
		return nil, &OptionsError{Field: "PoolConfig.Capacity", Reason: "must not be negative (zero means no bound)"}
	}
	for i, w := range cfg.Workers {
		if w == nil {
			return nil, &OptionsError{Field: "PoolConfig.Workers[" + strconv.Itoa(i) + "]", Reason: "is nil"}
		}
	}
	cfg.Workers = append([]WorkerRuntime(nil), cfg.Workers...)
	if cfg.Unreachable == nil {
		cfg.Unreachable = unreachable
	}
	return &Pool{cfg: cfg, slots: make([]poolSlot, len(cfg.Workers)), changed: make(chan struct{})}, nil
}

// unreachable is PoolConfig.Unreachable's default.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Dispatch executes pkg on the least-loaded healthy worker; see Pool.
func (p *Pool) Dispatch(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error) {
	if err := pkg.Validate(); err != nil {
		return ExecutionResult{}, err
	}
	tried := make([]bool, len(p.cfg.Workers))
	var last error
	// Each pass either returns or marks one more worker tried, so the loop
	// runs at most len(Workers) times.
	for {
		i, err := p.acquire(ctx, tried)
		if err != nil {
			if errors.Is(err, ErrNoWorker) {
				return ExecutionResult{}, &NoWorkerError{ExecutionID: pkg.ExecutionID, Workers: len(p.cfg.Workers), Err: last}
			}
			return ExecutionResult{}, err
		}
		tried[i] = true
		res, err := p.cfg.Workers[i].Execute(ctx, pkg)
		down := err != nil && ctx.Err() == nil && p.cfg.Unreachable(err)
		p.release(i, down)
		if !down {
			return res, err
		}
		last = err
	}
}

// acquire takes a slot on the least-loaded healthy untried worker, waiting
// while every such worker is at Capacity; ErrNoWorker when none is left.
func (p *Pool) acquire(ctx context.Context, tried []bool) (int, error) {
	for {
		p.mu.Lock()
		best, candidates := -1, 0
		for i, s := range p.slots {
			if s.unhealthy || tried[i] {
				continue
			}
			candidates++
			if p.cfg.Capacity > 0 && s.inFlight >= p.cfg.Capacity {
				continue
			}
			if best < 0 || s.inFlight < p.slots[best].inFlight {
				best = i
			}
		}
		if best >= 0 {
			p.slots[best].inFlight++
			p.mu.Unlock()
			return best, nil
		}
		changed := p.changed
		p.mu.Unlock()
		if candidates == 0 {
			return 0, ErrNoWorker
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (p *Pool) release(i int, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots[i].inFlight--
	if down {
		p.slots[i].unhealthy = true
	}
	p.signal()
}

// signal wakes the Dispatch calls waiting for a slot. Callers hold p.mu.
func (p *Pool) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// CheckHealth probes every unhealthy worker with PoolConfig.Health, one
// after another, and returns those that pass to the rotation (without
// Health, all of them). It returns how many workers are healthy after.
// Call it periodically (a ticker) and after a *NoWorkerError; the probes
// end with ctx.
func (p *Pool) CheckHealth(ctx context.Context) int {
	for i, w := range p.cfg.Workers {
		if p.Healthy(i) {
			continue
		}
		if p.cfg.Health != nil && p.cfg.Health(ctx, w) != nil {
			continue
		}
		p.mu.Lock()
		p.slots[i].unhealthy = false
		p.signal()
		p.mu.Unlock()
	}
	n := 0
	for i := range p.cfg.Workers {
		if p.Healthy(i) {
			n++
		}
	}
	return n
}

// Healthy reports whether worker i (its index in PoolConfig.Workers) is in
// the rotation; false for an index out of range.
func (p *Pool) Healthy(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return i >= 0 && i < len(p.slots) && !p.slots[i].unhealthy
}

// InFlight is the number of Execute calls in flight on worker i.
func (p *Pool) InFlight(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.slots) {
		return 0
	}
	return p.slots[i].inFlight
}
